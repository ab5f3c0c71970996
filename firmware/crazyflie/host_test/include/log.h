/* STAND-IN for crazyflie-firmware's log.h (same idea as param.h): a variable or, by function, a getter. */
#ifndef LOG_H
#define LOG_H
#include <stdint.h>
#include "host_registry.h"
#define LOG_UINT8 1
#define LOG_BY_FUNCTION 0x40
typedef uint8_t (*logAcquireUInt8)(uint32_t timestamp, void *data);
typedef struct {
    union {
        logAcquireUInt8 acquireUInt8;
    };
    void *data;
} logByFunction_t;
#define LOG_GROUP_START(group) static const host_entry_t host_logs_##group[] = {
#define LOG_ADD(type, name, address) {#name, (void *)(address), type},
#define LOG_ADD_BY_FUNCTION(type, name, address) {#name, (void *)(address), (type) | LOG_BY_FUNCTION},
#define LOG_GROUP_STOP(group) {0, 0, 0}}; const host_entry_t *host_logs = host_logs_##group;
#endif
