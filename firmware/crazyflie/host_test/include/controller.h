/* STAND-IN for crazyflie-firmware's controller.h: the out-of-tree controller hooks and the controller selection
 * (host_test/driver.c selects, as stabilizer.c does on a stabilizer.controller change). */
#ifndef CONTROLLER_H
#define CONTROLLER_H
#include "stabilizer_types.h"
typedef enum {
    ControllerTypeAutoSelect,
    ControllerTypePID,
    ControllerTypeMellinger,
    ControllerTypeINDI,
    ControllerTypeBrescianini,
    ControllerTypeLee,
#ifdef CONFIG_CONTROLLER_OOT
    ControllerTypeOot,
#endif
    ControllerType_COUNT,
} ControllerType;
ControllerType controllerGetType(void);
void controllerOutOfTreeInit(void);
bool controllerOutOfTreeTest(void);
void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t stabilizerStep);
#endif
