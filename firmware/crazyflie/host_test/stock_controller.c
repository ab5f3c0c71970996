/* Host stand-in for the firmware's PID controller: marks its output so tests see every fallback. */
#include "controller_pid.h"

unsigned long stock_controller_calls;

void controllerPidInit(void) {}

bool controllerPidTest(void) { return true; }

void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep)
{
    (void)setpoint, (void)sensors, (void)state, (void)stabilizerStep;
    ++stock_controller_calls;
    control->controlMode = controlModeLegacy;
    control->thrust = 0.0f;
}
