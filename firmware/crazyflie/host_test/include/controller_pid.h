/* STAND-IN for crazyflie-firmware's controller_pid.h; host_test/stock_controller.c counts the calls. */
#ifndef CONTROLLER_PID_H
#define CONTROLLER_PID_H
#include "stabilizer_types.h"
void controllerPidInit(void);
bool controllerPidTest(void);
void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep);
#endif
