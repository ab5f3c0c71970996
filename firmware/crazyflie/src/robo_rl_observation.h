/* Builds the policy's observation exactly as robo-rl's quadrotor simulator does (sim/quadrotor/observation.py).
 * Plain floats in, no firmware types: the host tests compare it with the simulator directly. */
#ifndef ROBO_RL_OBSERVATION_H
#define ROBO_RL_OBSERVATION_H

#include "policy.h"
#include "policy_layout.h"

#define RR_HISTORY_STEPS POLICY_ACTION_HISTORY
#ifndef POLICY_STATE_HISTORY
#define POLICY_STATE_HISTORY 0 /* a policy exported before the state history: it observes none */
#endif
#define RR_STATE_HISTORY_STEPS POLICY_STATE_HISTORY
#ifndef POLICY_POSITION_ERROR_LIMIT_M
#define POLICY_POSITION_ERROR_LIMIT_M 0.0f /* a policy exported before the limit: it observes the error as it is */
#endif
#define RR_STATE_HISTORY_VALUES 6 /* per step: velocity error (3, world frame), body rates (3, body frame) */

typedef struct {
    float position[3];       /* world frame [m] */
    float velocity[3];       /* world frame [m/s] */
    float quaternion[4];     /* body to world, w x y z */
    float body_rates[3];     /* body frame [rad/s] */
} rr_flight_state_t;

/* The frame the policy observes in: world, turned about z by the heading the policy took over at. Training
 * starts face within 90 degrees of +x; in this frame every take-over faces +x, and the dynamics do not depend
 * on heading (sim/quadrotor/observation.py in_heading_frame, the reference). */
typedef struct {
    float cos; /* of the heading */
    float sin;
} rr_heading_t;

typedef struct {
    float commands[RR_HISTORY_STEPS > 0 ? RR_HISTORY_STEPS : 1][POLICY_ACTION_SIZE]; /* newest first */
} rr_action_history_t;

typedef struct {
    /* the velocity error [m/s] and body rates [rad/s] of the previous observations, newest first */
    float values[RR_STATE_HISTORY_STEPS > 0 ? RR_STATE_HISTORY_STEPS : 1][RR_STATE_HISTORY_VALUES];
    int filled; /* 0 after a reset: the next observation's own values fill every entry */
} rr_state_history_t;

/* The heading (yaw of the z-y-x Euler angles: the body x axis about world z) of a body-to-world quaternion w x y z */
rr_heading_t rr_heading_of(const float quaternion[4]);

/* `world` (3, world frame) in the heading's frame: x and y turned by minus the heading, z as it is */
void rr_heading_turn(const rr_heading_t *heading, const float world[3], float frame[3]);

/* Fill the history with `command` on every motor (the simulator starts episodes at the hover command). */
void rr_history_reset(rr_action_history_t *history, float command);

/* Shift in the command just sent to the motors (normalized as the policy's action). */
void rr_history_push(rr_action_history_t *history, const float *command);

/* Start the state history over (the simulator's episode start): the next observation built sees its own
 * velocity error and body rates in every entry. */
void rr_state_history_reset(rr_state_history_t *history);

/* Shift in the velocity error and body rates of `obs`, the observation the policy was just given. */
void rr_state_history_push(rr_state_history_t *history, const float *obs);

/* obs[POLICY_OBS_SIZE] from the state, the target position and velocity (world frame) and the histories, in the
 * frame of `heading`: position error, rotation matrix and velocity error turned into it (the state history
 * holds observations already turned). The position error is scaled down to the norm
 * POLICY_POSITION_ERROR_LIMIT_M where it is longer (the simulator's position_error_limit; 0: not limited). */
void rr_observation_build(const rr_flight_state_t *state, const rr_heading_t *heading, const float target_position[3],
                          const float target_velocity[3], const rr_action_history_t *history,
                          const rr_state_history_t *state_history, float *obs);

#endif
