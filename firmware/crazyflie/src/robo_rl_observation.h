/* Builds the policy's observation exactly as robo-rl's quadrotor simulator does (sim/quadrotor/observation.py).
 * Plain floats in, no firmware types: the host tests compare it with the simulator directly. */
#ifndef ROBO_RL_OBSERVATION_H
#define ROBO_RL_OBSERVATION_H

#include "policy.h"
#include "policy_layout.h"

#define RR_HISTORY_STEPS POLICY_ACTION_HISTORY

typedef struct {
    float position[3];       /* world frame [m] */
    float velocity[3];       /* world frame [m/s] */
    float quaternion[4];     /* body to world, w x y z */
    float body_rates[3];     /* body frame [rad/s] */
} rr_flight_state_t;

typedef struct {
    float commands[RR_HISTORY_STEPS > 0 ? RR_HISTORY_STEPS : 1][POLICY_ACTION_SIZE]; /* newest first */
} rr_action_history_t;

/* Fill the history with `command` on every motor (the simulator starts episodes at the hover command). */
void rr_history_reset(rr_action_history_t *history, float command);

/* Shift in the command just sent to the motors (normalized as the policy's action). */
void rr_history_push(rr_action_history_t *history, const float *command);

/* obs[POLICY_OBS_SIZE] from the state, the target position and velocity (world frame) and the history. */
void rr_observation_build(const rr_flight_state_t *state, const float target_position[3],
                          const float target_velocity[3], const rr_action_history_t *history, float *obs);

#endif
