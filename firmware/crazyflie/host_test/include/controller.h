/* STAND-IN for crazyflie-firmware's controller.h: the out-of-tree controller hooks. */
#ifndef CONTROLLER_H
#define CONTROLLER_H
#include "stabilizer_types.h"
void controllerOutOfTreeInit(void);
bool controllerOutOfTreeTest(void);
void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t stabilizerStep);
#endif
