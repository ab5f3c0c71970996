/* robo-rl out-of-tree controller for the Crazyflie 2.x: runs the exported policy at its trained rate
 * inside the 1 kHz stabilizer loop and commands the motors in controlModeForce.
 *
 * Safety:
 *  - the policy flies only while param robo_rl.enable is set AND param robo_rl.heartbeat keeps changing
 *    (the ground station increments it; no change for RR_HEARTBEAT_TIMEOUT_MS stops the policy);
 *  - otherwise, and after any fault, the stock PID controller flies (it needs the usual setpoints);
 *  - faults latch until robo_rl.enable is cleared: non-finite observation or action (policy status),
 *    tumble (tilt beyond RR_MAX_TILT_DEG), geofence (position error beyond the training arena);
 *  - controllerOutOfTreeTest runs the policy's recorded self-test pairs at start-up.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "controller.h"
#include "controller_pid.h"
#include "log.h"
#include "param.h"
#include "platform_defaults.h"
#include "stabilizer_types.h"

#include "policy.h"
#include "policy_layout.h"
#include "robo_rl_observation.h"

#ifndef RR_HEARTBEAT_TIMEOUT_MS
#define RR_HEARTBEAT_TIMEOUT_MS 200
#endif
#ifndef RR_MAX_TILT_DEG
#define RR_MAX_TILT_DEG 100.0f /* training starts reach 90 degrees; beyond this the vehicle is tumbling */
#endif
#define RR_DEG_TO_RAD 0.017453292519943295f
#define RR_TICKS_PER_POLICY_STEP (RATE_MAIN_LOOP / POLICY_CONTROL_HZ)

#if RATE_MAIN_LOOP % POLICY_CONTROL_HZ != 0
#error "the policy's control rate must divide the stabilizer loop rate"
#endif

enum { RR_FAULT_NONE = 0, RR_FAULT_INVALID = 1, RR_FAULT_TUMBLE = 2, RR_FAULT_GEOFENCE = 3, RR_FAULT_HEARTBEAT = 4 };

static uint8_t enable;          /* param robo_rl.enable */
static uint32_t heartbeat;      /* param robo_rl.heartbeat: any change is a heartbeat */
static uint8_t active;          /* log robo_rl.active */
static uint8_t fault;           /* log robo_rl.fault: the latched RR_FAULT_* */
static uint8_t last_status;     /* log robo_rl.status: the policy's last policy_status_t */

static uint32_t last_heartbeat;
static uint32_t heartbeat_tick;
static uint32_t next_policy_tick;
static float latched_target[3];
static float command[POLICY_ACTION_SIZE];  /* the policy's last action: fraction of POLICY_THRUST_MAX_NEWTON */
static rr_action_history_t history;

void controllerOutOfTreeInit(void)
{
    controllerPidInit();
    rr_history_reset(&history, POLICY_HOVER_COMMAND);
    active = 0;
    fault = RR_FAULT_NONE;
}

bool controllerOutOfTreeTest(void)
{
    float worst = 0.0f;
    return policy_self_test(&worst) == 0 && controllerPidTest();
}

static void fly_stock(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                      const state_t *state, const stabilizerStep_t tick)
{
    active = 0;
    controllerPid(control, setpoint, sensors, state, tick);
}

static bool absolute_position(const setpoint_t *setpoint)
{
    return setpoint->mode.x == modeAbs && setpoint->mode.y == modeAbs && setpoint->mode.z == modeAbs;
}

/* Runs one policy step; returns false (and latches a fault) if the state or the policy is unusable. */
static bool policy_update(const setpoint_t *setpoint, const sensorData_t *sensors, const state_t *state)
{
    const rr_flight_state_t flight = {
        .position = {state->position.x, state->position.y, state->position.z},
        .velocity = {state->velocity.x, state->velocity.y, state->velocity.z},
        .quaternion = {state->attitudeQuaternion.w, state->attitudeQuaternion.x, state->attitudeQuaternion.y,
                       state->attitudeQuaternion.z},
        /* the gyro reports deg/s; the simulator's body rates are rad/s */
        .body_rates = {sensors->gyro.x * RR_DEG_TO_RAD, sensors->gyro.y * RR_DEG_TO_RAD, sensors->gyro.z * RR_DEG_TO_RAD},
    };
    float target_position[3] = {latched_target[0], latched_target[1], latched_target[2]};
    float target_velocity[3] = {0.0f, 0.0f, 0.0f};
    if (absolute_position(setpoint)) {
        target_position[0] = setpoint->position.x;
        target_position[1] = setpoint->position.y;
        target_position[2] = setpoint->position.z;
        target_velocity[0] = setpoint->velocity.x;
        target_velocity[1] = setpoint->velocity.y;
        target_velocity[2] = setpoint->velocity.z;
    }
    const float qx = flight.quaternion[1], qy = flight.quaternion[2];
    const float uprightness = 1.0f - 2.0f * (qx * qx + qy * qy); /* cos(tilt) = R[2][2] */
    if (!(uprightness >= cosf(RR_MAX_TILT_DEG * RR_DEG_TO_RAD))) {
        fault = RR_FAULT_TUMBLE; /* also catches a NaN attitude */
        return false;
    }
    for (int k = 0; k < 3; ++k) {
        if (!(fabsf(flight.position[k] - target_position[k]) <= POLICY_MAX_POSITION_ERROR_M)) {
            fault = RR_FAULT_GEOFENCE;
            return false;
        }
    }
    static float obs[POLICY_OBS_SIZE]; /* static: the stabilizer task's stack is small */
    static float action[POLICY_ACTION_SIZE];
    rr_observation_build(&flight, target_position, target_velocity, &history, obs);
    const policy_status_t status = policy_step(obs, action);
    last_status = (uint8_t)status;
    if (status != POLICY_OK) {
        fault = RR_FAULT_INVALID;
        return false;
    }
    rr_history_push(&history, action);
    for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
        command[motor] = action[motor];
    }
    return true;
}

void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t tick)
{
    if (heartbeat != last_heartbeat) {
        last_heartbeat = heartbeat;
        heartbeat_tick = tick;
    }
    const bool heartbeat_fresh = (uint32_t)(tick - heartbeat_tick) <= RR_HEARTBEAT_TIMEOUT_MS * RATE_MAIN_LOOP / 1000;
    if (!enable) {
        fault = RR_FAULT_NONE; /* clearing enable acknowledges a latched fault */
    } else if (!heartbeat_fresh && active) {
        fault = RR_FAULT_HEARTBEAT;
    }
    if (!enable || !heartbeat_fresh || fault != RR_FAULT_NONE) {
        fly_stock(control, setpoint, sensors, state, tick);
        return;
    }
    if (!active) { /* activation: start like a simulated episode, hold the current position unless commanded */
        latched_target[0] = state->position.x;
        latched_target[1] = state->position.y;
        latched_target[2] = state->position.z;
        rr_history_reset(&history, POLICY_HOVER_COMMAND);
        next_policy_tick = tick;
    }
    if ((int32_t)(tick - next_policy_tick) >= 0) {
        next_policy_tick = tick + RR_TICKS_PER_POLICY_STEP;
        if (!policy_update(setpoint, sensors, state)) {
            fly_stock(control, setpoint, sensors, state, tick);
            return;
        }
    }
    active = 1;
    /* normalizedForces are fractions of the firmware's THRUST_MAX; the policy's are of the trained vehicle's */
    control->controlMode = controlModeForce;
    for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
        const float force = command[motor] * (POLICY_THRUST_MAX_NEWTON / THRUST_MAX);
        control->normalizedForces[motor] = force < 0.0f ? 0.0f : (force > 1.0f ? 1.0f : force);
    }
}

PARAM_GROUP_START(robo_rl)
PARAM_ADD(PARAM_UINT8, enable, &enable)
PARAM_ADD(PARAM_UINT32, heartbeat, &heartbeat)
PARAM_GROUP_STOP(robo_rl)

LOG_GROUP_START(robo_rl)
LOG_ADD(LOG_UINT8, active, &active)
LOG_ADD(LOG_UINT8, fault, &fault)
LOG_ADD(LOG_UINT8, status, &last_status)
LOG_GROUP_STOP(robo_rl)
