/* Host stand-ins for the firmware's stock PID controller (controller_pid.c) and supervisor queries.
 *
 * The PID stand-in has the real one's structure with toy gains, so tests see what it does to control_t:
 *  - every tick: controlMode = legacy; a change of the setpoint's modes reinitialises it;
 *  - position loop at POSITION_RATE only: altitude PI -> actuator thrust, kept between ticks (static);
 *  - attitude loop at ATTITUDE_RATE only: mode.z disabled -> actuator thrust = setpoint thrust; roll, pitch
 *    and yaw from the body rates;
 *  - every tick: thrust = actuator thrust; thrust 0 -> roll, pitch, yaw 0 and reinitialise.
 * As in the real one, on ticks without the attitude loop it writes only the mode and the thrust (control_t
 * is a union), and its integrator keeps its value from its last flight until something reinitialises it.
 * controllerPidInit, which the firmware calls when stabilizer.controller selects the PID, resets the position
 * loop (positionControllerInit) and nothing else: the real attitude loop initialises once per boot
 * (attitudeControllerInit), and the actuator thrust, desired attitude and last setpoint mode are kept. Here the
 * integrator belongs to the position loop, so it is reset; the actuator thrust is kept. */
#include <string.h>

#include "controller_pid.h"
#include "supervisor.h"

#define STOCK_HOVER_THRUST 36000.0f /* legacy thrust units, about a CF2.1's hover */
#define STOCK_KP_Z 20000.0f         /* per m of altitude error */
#define STOCK_KI_Z 2000.0f          /* per m of altitude error and position-loop step */
#define STOCK_KP_RATE 100.0f        /* per deg/s of body rate */

/* calls that wrote the stabilizer's control struct (host_stabilizer_control, the driver's): the PID flew */
unsigned long stock_controller_calls;
const control_t *host_stabilizer_control;
bool host_supervisor_can_fly = true, host_supervisor_armed = true, host_supervisor_flying = true;

static setpoint_mode_t previous_mode; /* zero: the first call reinitialises, as in the real one */
static float actuator_thrust;
static float z_integral;

bool supervisorCanFly(void) { return host_supervisor_can_fly; }
bool supervisorIsArmed(void) { return host_supervisor_armed; }
bool supervisorIsFlying(void) { return host_supervisor_flying; }

void controllerPidInit(void) { z_integral = 0.0f; }

bool controllerPidTest(void) { return true; }

static void reinitialize(void) { z_integral = 0.0f; }

void controllerPid(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                   const state_t *state, const stabilizerStep_t stabilizerStep)
{
    stock_controller_calls += control == host_stabilizer_control;
    control->controlMode = controlModeLegacy;
    if (memcmp(&setpoint->mode, &previous_mode, sizeof previous_mode) != 0) {
        reinitialize();
    }
    previous_mode = setpoint->mode;
    if (RATE_DO_EXECUTE(POSITION_RATE, stabilizerStep) && setpoint->mode.z == modeAbs) {
        const float error = setpoint->position.z - state->position.z;
        z_integral += STOCK_KI_Z * error;
        const float thrust = STOCK_HOVER_THRUST + STOCK_KP_Z * error + z_integral;
        actuator_thrust = thrust < 0.0f ? 0.0f : (thrust > 60000.0f ? 60000.0f : thrust);
    }
    if (RATE_DO_EXECUTE(ATTITUDE_RATE, stabilizerStep)) {
        if (setpoint->mode.z == modeDisable) {
            actuator_thrust = setpoint->thrust;
        }
        control->roll = (int16_t)(-STOCK_KP_RATE * sensors->gyro.x);
        control->pitch = (int16_t)(STOCK_KP_RATE * sensors->gyro.y);
        control->yaw = (int16_t)(-STOCK_KP_RATE * sensors->gyro.z);
    }
    control->thrust = actuator_thrust;
    if (control->thrust == 0.0f) {
        control->roll = control->pitch = control->yaw = 0;
        reinitialize();
    }
}
