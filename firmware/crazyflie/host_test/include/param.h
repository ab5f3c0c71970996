/* STAND-IN for crazyflie-firmware's param.h: the macros expand to host-visible pointers, so the test
 * driver can set robo_rl.enable and robo_rl.heartbeat by name. */
#ifndef PARAM_H
#define PARAM_H
#include "host_registry.h"
#define PARAM_UINT8 1
#define PARAM_UINT32 4
#define PARAM_FLOAT 6 /* the firmware's PARAM_4BYTES | PARAM_TYPE_FLOAT */
#define PARAM_GROUP_START(group) static const host_entry_t host_params_##group[] = {
#define PARAM_ADD(type, name, address) {#name, (void *)(address), type},
#define PARAM_GROUP_STOP(group) {0, 0, 0}}; const host_entry_t *host_params = host_params_##group;
#endif
