/* robo-rl out-of-tree controller for the Crazyflie 2.x: runs the exported policy at its trained rate
 * inside the 1 kHz stabilizer loop and commands the motors in controlModeForce.
 *
 * Safety:
 *  - the policy flies only while param robo_rl.enable is set AND param robo_rl.heartbeat keeps changing
 *    (the ground station increments it; no change for RR_HEARTBEAT_TIMEOUT_MS stops the policy; only a
 *    change seen by this controller after it was selected and enabled counts);
 *  - it takes over only from a vehicle the supervisor reports armed, allowed to fly and flying (the stock
 *    controller takes off), never from the ground;
 *  - it flies only what it was trained on: a target position (all three axes absolute) at or above the
 *    take-over floor, and the supervisor's level-out, where it holds the last target. Any other setpoint (a
 *    pilot's velocity, hover, attitude or thrust commands, cflib's MotionCommander, a landing below the floor)
 *    is the PID's, without a fault: the policy takes over again when target positions come back;
 *  - otherwise, and after any fault, the stock PID controller flies (it needs the usual setpoints); on
 *    every hand-over the PID restarts from the current state and the control struct is cleared;
 *  - while the policy flies, the PID is restarted from the current state on its attitude-loop ticks (500 Hz,
 *    into a scratch struct): the firmware switches stabilizer.controller without telling the controller it
 *    leaves, so a switch to the PID in flight starts it from the state of 1-2 ms before, not from the one it
 *    had before the policy took over; log robo_rl.active reads 0 once another controller is selected;
 *  - it observes in the frame of the heading it took over at (world turned about z), so a vehicle facing any
 *    way starts as a training episode does, and it holds that heading (not the setpoint's yaw);
 *  - faults latch until robo_rl.enable is cleared: non-finite observation or action (policy status),
 *    tumble (tilt beyond RR_MAX_TILT_DEG), geofence (position error beyond the training arena in the
 *    heading's frame, or position outside the absolute arena params robo_rl.arena*), heartbeat lapse, a
 *    stop setpoint (land() ending, stop(), cflib's send_stop_setpoint: the PID then stops the motors), the
 *    supervisor withdrawing;
 *  - controllerOutOfTreeTest runs the policy's recorded self-test pairs at start-up and checks that this
 *    firmware's per-motor THRUST_MAX / THRUST_MIN are those the policy was exported for (its deployment
 *    vehicle's platform); on other limits the test fails and the policy never takes over (fault 7).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "autoconf.h" /* CONFIG_CONTROLLER_OOT (app-config), which declares ControllerTypeOot in controller.h */
#include "controller.h"
#include "controller_pid.h"
#include "log.h"
#include "param.h"
#include "platform_defaults.h"
#include "stabilizer_types.h"
#include "supervisor.h"

#include "policy.h"
#include "policy_layout.h"
#include "robo_rl_observation.h"

#ifndef RR_HEARTBEAT_TIMEOUT_MS
#define RR_HEARTBEAT_TIMEOUT_MS 200
#endif
#ifndef RR_MAX_TILT_DEG
/* 60 degrees: the tilt at which the firmware's own supervisor starts its tumble timer
 * (SUPERVISOR_TUMBLE_CHECK_ACCEPTED_TILT_ACCZ); past about 54 degrees even full thrust of a stock CF2.1
 * (4 x 0.12 N against 0.29 N of weight) no longer holds altitude, so the vehicle is falling, not hovering.
 * Training starts reach 90 degrees, but on hardware a policy past 60 degrees hands over to the PID. */
#define RR_MAX_TILT_DEG 60 /* whole degrees */
#endif
#if !(RR_MAX_TILT_DEG > 0 && RR_MAX_TILT_DEG < 90)
#error "RR_MAX_TILT_DEG must be below 90 degrees: beyond, thrust pushes the vehicle down"
#endif
/* The absolute arena [m, world frame] the policy may fly in (params robo_rl.arena*, set them to the room):
 * a 4 m x 4 m x 2.5 m flight space around the positioning system's origin by default. */
#ifndef RR_ARENA_HALF_WIDTH_M
#define RR_ARENA_HALF_WIDTH_M 2.0f
#endif
#ifndef RR_ARENA_CEILING_M
#define RR_ARENA_CEILING_M 2.5f
#endif
#ifndef RR_ARENA_FLOOR_M
#define RR_ARENA_FLOOR_M -0.2f /* below the ground plane: position estimates on the ground scatter around 0 */
#endif
#define RR_DEG_TO_RAD 0.017453292519943295f
#define RR_TICKS_PER_POLICY_STEP (RATE_MAIN_LOOP / POLICY_CONTROL_HZ)

#if RATE_MAIN_LOOP % POLICY_CONTROL_HZ != 0
#error "the policy's control rate must divide the stabilizer loop rate"
#endif
#if !defined(POLICY_FIRMWARE_THRUST_MAX) || !defined(POLICY_FIRMWARE_THRUST_MIN)
#error "policy_layout.h names no firmware thrust limits: export the policy again, for the vehicle you fly (python -m robo_rl.export run=<run> vehicle=<name>)"
#endif
/* Relative tolerance of the firmware-limit check: the limits are written as float literals on both sides,
 * so they agree to float rounding (a few ulp) when they are the same numbers. */
#define RR_LIMIT_TOLERANCE 1e-6f

enum {
    RR_FAULT_NONE = 0,
    RR_FAULT_INVALID = 1,    /* non-finite observation or action */
    RR_FAULT_TUMBLE = 2,     /* tilt beyond RR_MAX_TILT_DEG */
    RR_FAULT_GEOFENCE = 3,   /* position error beyond the training arena (heading frame), or outside robo_rl.arena* */
    RR_FAULT_HEARTBEAT = 4,  /* heartbeat lapsed while the policy flew */
    RR_FAULT_STOPPED = 5,    /* a stop setpoint arrived while the policy flew: stay stopped until re-enabled */
    RR_FAULT_SUPERVISOR = 6, /* the supervisor no longer reports the vehicle armed, allowed to fly and flying */
    RR_FAULT_FIRMWARE = 7,   /* THRUST_MAX / THRUST_MIN differ from the policy's export: never cleared */
};

static uint8_t enable;          /* param robo_rl.enable */
static uint32_t heartbeat;      /* param robo_rl.heartbeat: any change is a heartbeat */
static uint8_t active;          /* log robo_rl.active */
static uint8_t fault;           /* log robo_rl.fault: the latched RR_FAULT_* */
static uint8_t last_status;     /* log robo_rl.status: the policy's last policy_status_t */
static uint8_t setpoint_log;    /* log robo_rl.setpoint: the last setpoint's rr_setpoint_kind_t */

/* The setpoints the policy flies, as the commander and the supervisor make them */
typedef enum {
    RR_SETPOINT_OTHER = 0,    /* the PID's: velocity, hover, attitude, rate, thrust or stop setpoints */
    RR_SETPOINT_POSITION = 1, /* x, y, z absolute: a target position (go_to, cmd_position, cmd_full_state) */
    RR_SETPOINT_LEVEL_OUT = 2 /* supervisor.c's level-out when setpoints stop coming (COMMANDER_WDT_TIMEOUT_STABILIZE):
                                 x, y disabled, level attitude, no yaw rate, z kept */
} rr_setpoint_kind_t;

/* The lowest height [m, world frame] at which the policy may take over or be given a target (param
 * robo_rl.minTakeOverZ, which can raise it, never lower it): the supervisor still reports "flying" for a
 * while after the motors stop, so without it a vehicle that has just landed or been stopped could be handed
 * to the policy again by re-enabling it; and training has no ground (episodes end below 0.05 m, no ground
 * effect, no contact), so touch-down is the PID's. */
#ifndef RR_MIN_TAKE_OVER_Z_M
#define RR_MIN_TAKE_OVER_Z_M 0.1f
#endif
/* How far below the floor the policy may sink while flying before it is a geofence fault: below the floor
 * minus this, training ended its episodes (0.05 m). */
#ifndef RR_FLOOR_MARGIN_M
#define RR_FLOOR_MARGIN_M 0.05f
#endif
static float min_take_over_z = RR_MIN_TAKE_OVER_Z_M; /* param */
static float arena_min[3] = {-RR_ARENA_HALF_WIDTH_M, -RR_ARENA_HALF_WIDTH_M, RR_ARENA_FLOOR_M}; /* params */
static float arena_max[3] = {RR_ARENA_HALF_WIDTH_M, RR_ARENA_HALF_WIDTH_M, RR_ARENA_CEILING_M};

static uint32_t last_heartbeat;
static bool heartbeat_seen; /* a heartbeat change was seen by this controller since it was selected and enabled */
static uint32_t heartbeat_tick;
static uint32_t next_policy_tick;
/* The position held through the supervisor's level-out: the last one commanded (not the take-over point: the
 * policy would fly back there, across the room). */
static float latched_target[3];
static float forces[POLICY_ACTION_SIZE];   /* normalizedForces of the policy's last action */
static rr_action_history_t history;
static rr_state_history_t state_history; /* what the policy observed of the vehicle, newest first */
/* The heading the policy took over at: it observes in this frame. Training starts face within 90 degrees of +x
 * (make train's policy flew 0% of level starts turned 180 degrees in the world frame; bench/start_heading.py). */
static rr_heading_t heading = {1.0f, 0.0f};

void controllerOutOfTreeInit(void)
{
    controllerPidInit();
    rr_history_reset(&history, POLICY_HOVER_COMMAND);
    rr_state_history_reset(&state_history);
    active = 0;
    fault = RR_FAULT_NONE;
    /* Also called when stabilizer.controller switches to this controller at run time: heartbeat changes
     * made while another controller flew must not count as fresh. */
    last_heartbeat = heartbeat;
    heartbeat_seen = false;
}

/* Whether this firmware's per-motor thrust limits are those the policy was exported for: the action is a
 * fraction of the deployment vehicle's POLICY_THRUST_MAX_NEWTON and the simulator clamps and cuts it at
 * these limits, so on another platform (another THRUST_MAX, e.g. the thrust upgrade kit or the Brushless)
 * the motors would get other forces than the policy was checked with. */
static bool firmware_limits_match(void)
{
    const float max_policy = POLICY_FIRMWARE_THRUST_MAX, min_policy = POLICY_FIRMWARE_THRUST_MIN;
    return fabsf((float)THRUST_MAX - max_policy) <= RR_LIMIT_TOLERANCE * max_policy &&
           fabsf((float)THRUST_MIN - min_policy) <= RR_LIMIT_TOLERANCE * min_policy;
}

bool controllerOutOfTreeTest(void)
{
    float worst = 0.0f;
    return firmware_limits_match() && policy_self_test(&worst) == 0 && controllerPidTest();
}

/* The setpoint that stops the motors: z not controlled and zero thrust. The firmware sends it (all zero)
 * when a high-level land() ends, on stop(), on cflib's send_stop_setpoint, and as the supervisor's null
 * setpoint; from it the stock PID computes thrust 0 (controller_pid.c: mode.z == modeDisable ->
 * actuatorThrust = setpoint->thrust). */
static bool stop_setpoint(const setpoint_t *setpoint)
{
    return setpoint->mode.z == modeDisable && setpoint->thrust == 0.0f;
}

/* The policy may spin the motors only where the stock controller could: armed (the brushless Crazyflie
 * needs an explicit arming), allowed to fly (not locked, crashed or tumbled) and flying (taken off). */
static bool supervisor_allows(void)
{
    return supervisorIsArmed() && supervisorCanFly() && supervisorIsFlying();
}

/* Restarts the stock PID from the current state and setpoint and writes every field of control. The PID keeps
 * static state (integrators, filters, derivative memory, desired attitude, thrust) from its last flight, and
 * control_t is a union: on ticks where its 500 Hz attitude loop does not run it writes only the mode and
 * thrust, leaving whatever was there (the policy's float forces) in the legacy roll/pitch/yaw. First a stop
 * setpoint takes the PID through its own zero-thrust path (controllerPidReinitialize from the current state,
 * desired yaw = current yaw, thrust 0); then it runs on the real setpoint as at step 0, where every loop
 * executes, into the cleared struct. */
static void pid_restart(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                        const state_t *state)
{
    static const setpoint_t stop = {0};
    static control_t scratch;
    controllerPid(&scratch, &stop, sensors, state, 0);
    memset(control, 0, sizeof *control);
    controllerPid(control, setpoint, sensors, state, 0);
}

static void fly_stock(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                      const state_t *state, const stabilizerStep_t tick)
{
    if (active) { /* hand-over */
        active = 0;
        pid_restart(control, setpoint, sensors, state);
        return;
    }
    controllerPid(control, setpoint, sensors, state, tick);
}

/* What the motors get for a policy action (fraction of POLICY_THRUST_MAX_NEWTON), as normalizedForces
 * (fractions of the firmware's THRUST_MAX), with the firmware's own limits applied here so the history can
 * hold what was flown: power_distribution_quadrotor.c (powerDistributionForce) clamps to [0, 1] and scales
 * to UINT16_MAX; motors.c (motorsCompensateBatteryVoltage) returns 0 (motor off) when that thrust is below
 * THRUST_MIN. */
static float motor_force(float action)
{
    float force = action * (POLICY_THRUST_MAX_NEWTON / THRUST_MAX);
    force = force < 0.0f ? 0.0f : (force > 1.0f ? 1.0f : force);
#ifdef CONFIG_ENABLE_THRUST_BAT_COMPENSATED
    const int32_t ratio = (int32_t)(force * UINT16_MAX); /* motorThrustUncapped, as the firmware truncates it */
    if (((float)ratio / 65535.0f) * THRUST_MAX < THRUST_MIN) {
        force = 0.0f;
    }
#endif
    return force;
}

static rr_setpoint_kind_t setpoint_kind(const setpoint_t *setpoint)
{
    const setpoint_mode_t *mode = &setpoint->mode;
    if (mode->x == modeAbs && mode->y == modeAbs && mode->z == modeAbs) {
        return RR_SETPOINT_POSITION;
    }
    /* supervisorOverrideSetpoint in supervisorStateWarningLevelOut; z stays as the last setpoint had it */
    if (mode->x == modeDisable && mode->y == modeDisable && mode->z == modeAbs && mode->roll == modeAbs &&
        mode->pitch == modeAbs && setpoint->attitude.roll == 0.0f && setpoint->attitude.pitch == 0.0f &&
        mode->yaw == modeVelocity && setpoint->attitudeRate.yaw == 0.0f) {
        return RR_SETPOINT_LEVEL_OUT;
    }
    return RR_SETPOINT_OTHER;
}

/* The take-over floor: robo_rl.minTakeOverZ, never below RR_MIN_TAKE_OVER_Z_M (fmaxf also drops a NaN) */
static float take_over_floor(void)
{
    return fmaxf(min_take_over_z, RR_MIN_TAKE_OVER_Z_M);
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
    if (setpoint_kind(setpoint) == RR_SETPOINT_POSITION) {
        target_position[0] = latched_target[0] = setpoint->position.x;
        target_position[1] = latched_target[1] = setpoint->position.y;
        target_position[2] = latched_target[2] = setpoint->position.z;
        target_velocity[0] = setpoint->velocity.x;
        target_velocity[1] = setpoint->velocity.y;
        target_velocity[2] = setpoint->velocity.z;
    }
    const float qx = flight.quaternion[1], qy = flight.quaternion[2];
    const float uprightness = 1.0f - 2.0f * (qx * qx + qy * qy); /* cos(tilt) = R[2][2] */
    if (!(uprightness >= cosf((float)RR_MAX_TILT_DEG * RR_DEG_TO_RAD))) {
        fault = RR_FAULT_TUMBLE; /* also catches a NaN attitude */
        return false;
    }
    /* the training arena is a box about the target in the frame the policy observes in */
    const float world_error[3] = {flight.position[0] - target_position[0], flight.position[1] - target_position[1],
                                  flight.position[2] - target_position[2]};
    float error[3];
    rr_heading_turn(&heading, world_error, error);
    for (int k = 0; k < 3; ++k) {
        const float lowest = k == 2 ? fmaxf(arena_min[2], take_over_floor() - RR_FLOOR_MARGIN_M) : arena_min[k];
        if (!(fabsf(error[k]) <= POLICY_MAX_POSITION_ERROR_M &&
              flight.position[k] >= lowest && flight.position[k] <= arena_max[k])) {
            fault = RR_FAULT_GEOFENCE;
            return false;
        }
    }
    static float obs[POLICY_OBS_SIZE]; /* static: the stabilizer task's stack is small */
    static float action[POLICY_ACTION_SIZE];
    rr_observation_build(&flight, &heading, target_position, target_velocity, &history, &state_history, obs);
    /* the next observation's history holds this one's velocity error and body rates, as observed */
    rr_state_history_push(&state_history, obs);
    const policy_status_t status = policy_step(obs, action);
    last_status = (uint8_t)status;
    if (status != POLICY_OK) {
        fault = RR_FAULT_INVALID;
        return false;
    }
    /* The history holds what the motors got, in the policy's units, as the simulator's does */
    float flown[POLICY_ACTION_SIZE];
    for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
        forces[motor] = motor_force(action[motor]);
        flown[motor] = forces[motor] * (THRUST_MAX / POLICY_THRUST_MAX_NEWTON);
    }
    rr_history_push(&history, flown);
    return true;
}

void controllerOutOfTree(control_t *control, const setpoint_t *setpoint, const sensorData_t *sensors,
                         const state_t *state, const stabilizerStep_t tick)
{
    if (!enable) {
        fault = RR_FAULT_NONE; /* clearing enable acknowledges a latched fault */
        heartbeat_seen = false; /* and only a heartbeat after enabling counts */
        last_heartbeat = heartbeat;
    } else if (heartbeat != last_heartbeat) {
        last_heartbeat = heartbeat;
        heartbeat_tick = tick;
        heartbeat_seen = true;
    }
    if (!firmware_limits_match()) {
        fault = RR_FAULT_FIRMWARE; /* (set again after enable clears it: no acknowledging it) */
    }
    const bool heartbeat_fresh =
        heartbeat_seen && (uint32_t)(tick - heartbeat_tick) <= RR_HEARTBEAT_TIMEOUT_MS * RATE_MAIN_LOOP / 1000;
    if (enable && active && fault == RR_FAULT_NONE) {
        if (stop_setpoint(setpoint)) {
            fault = RR_FAULT_STOPPED; /* after land() or stop() the policy must not take off again */
        } else if (!supervisor_allows()) {
            fault = RR_FAULT_SUPERVISOR;
        } else if (!heartbeat_fresh) {
            fault = RR_FAULT_HEARTBEAT;
        }
    }
    /* The policy flies target positions above the floor, and holds its last through the supervisor's level-out;
     * it takes over on a target position only, from a flying vehicle above the floor (a stop setpoint is not one) */
    const rr_setpoint_kind_t kind = setpoint_kind(setpoint);
    setpoint_log = (uint8_t)kind;
    const float floor_z = take_over_floor();
    const bool trained_setpoint = kind == RR_SETPOINT_POSITION ? setpoint->position.z >= floor_z
                                                               : (kind == RR_SETPOINT_LEVEL_OUT && active);
    const bool may_take_over =
        trained_setpoint && (active || (supervisor_allows() && state->position.z >= floor_z));
    if (!enable || !heartbeat_fresh || fault != RR_FAULT_NONE || !may_take_over) {
        fly_stock(control, setpoint, sensors, state, tick);
        return;
    }
    if (!active) { /* activation: start like a simulated episode, hold the current position unless commanded */
        latched_target[0] = state->position.x;
        latched_target[1] = state->position.y;
        latched_target[2] = state->position.z;
        rr_history_reset(&history, POLICY_HOVER_COMMAND);
        rr_state_history_reset(&state_history); /* the first observation fills it */
        const float quaternion[4] = {state->attitudeQuaternion.w, state->attitudeQuaternion.x,
                                     state->attitudeQuaternion.y, state->attitudeQuaternion.z};
        heading = rr_heading_of(quaternion); /* a NaN attitude is the tumble fault below */
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
    control->controlMode = controlModeForce;
    for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
        control->normalizedForces[motor] = forces[motor];
    }
    /* stabilizer.c switches stabilizer.controller between two ticks and calls only the new controller's init,
     * which resets neither the PID's attitude loop nor its thrust (it would start from its flight before the
     * take-over: full thrust after a climb, on crazyflie-firmware's own PID). Restarted here on each of its
     * attitude-loop ticks, the PID a switch in flight hands the vehicle to starts from the state of 1-2 ms
     * before, as after one of its own loop periods. (A switch before an odd tick still leaves this tick's
     * forces in the legacy roll/pitch/yaw for that 1 ms: control_t is the stabilizer's.) */
    if (RATE_DO_EXECUTE(ATTITUDE_RATE, tick)) {
        static control_t shadow;
        pid_restart(&shadow, setpoint, sensors, state);
    }
}

/* log robo_rl.active: whether the policy flies, which it cannot while another controller is selected (the
 * firmware does not call this one then, so `active` keeps the value of the last tick it was) */
static uint8_t active_now(uint32_t timestamp, void *data)
{
    (void)timestamp, (void)data;
    return active && controllerGetType() == ControllerTypeOot;
}
static const logByFunction_t active_log = {.acquireUInt8 = active_now, .data = 0};

PARAM_GROUP_START(robo_rl)
PARAM_ADD(PARAM_UINT8, enable, &enable)
PARAM_ADD(PARAM_UINT32, heartbeat, &heartbeat)
PARAM_ADD(PARAM_FLOAT, minTakeOverZ, &min_take_over_z)
PARAM_ADD(PARAM_FLOAT, arenaXMin, &arena_min[0])
PARAM_ADD(PARAM_FLOAT, arenaXMax, &arena_max[0])
PARAM_ADD(PARAM_FLOAT, arenaYMin, &arena_min[1])
PARAM_ADD(PARAM_FLOAT, arenaYMax, &arena_max[1])
PARAM_ADD(PARAM_FLOAT, arenaZMin, &arena_min[2])
PARAM_ADD(PARAM_FLOAT, arenaZMax, &arena_max[2])
PARAM_GROUP_STOP(robo_rl)

LOG_GROUP_START(robo_rl)
LOG_ADD_BY_FUNCTION(LOG_UINT8, active, &active_log)
LOG_ADD(LOG_UINT8, fault, &fault)
LOG_ADD(LOG_UINT8, status, &last_status)
LOG_ADD(LOG_UINT8, setpoint, &setpoint_log)
LOG_GROUP_STOP(robo_rl)
