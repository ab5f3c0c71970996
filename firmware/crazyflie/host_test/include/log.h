/* STAND-IN for crazyflie-firmware's log.h (same idea as param.h). */
#ifndef LOG_H
#define LOG_H
#include "host_registry.h"
#define LOG_UINT8 1
#define LOG_GROUP_START(group) static const host_entry_t host_logs_##group[] = {
#define LOG_ADD(type, name, address) {#name, (void *)(address), type},
#define LOG_GROUP_STOP(group) {0, 0, 0}}; const host_entry_t *host_logs = host_logs_##group;
#endif
