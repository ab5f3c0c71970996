#include "robo_rl_observation.h"

#if POLICY_OBS_SIZE != POLICY_OBS_ACTION_HISTORY_OFFSET + 4 * POLICY_ACTION_HISTORY && POLICY_ACTION_HISTORY > 0
#error "policy_layout.h and policy.h disagree on the observation size"
#endif

void rr_history_reset(rr_action_history_t *history, float command)
{
    for (int step = 0; step < RR_HISTORY_STEPS; ++step) {
        for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
            history->commands[step][motor] = command;
        }
    }
}

void rr_history_push(rr_action_history_t *history, const float *command)
{
    for (int step = RR_HISTORY_STEPS - 1; step > 0; --step) {
        for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
            history->commands[step][motor] = history->commands[step - 1][motor];
        }
    }
    for (int motor = 0; motor < POLICY_ACTION_SIZE && RR_HISTORY_STEPS > 0; ++motor) {
        history->commands[0][motor] = command[motor];
    }
}

void rr_observation_build(const rr_flight_state_t *state, const float target_position[3],
                          const float target_velocity[3], const rr_action_history_t *history, float *obs)
{
    const float w = state->quaternion[0], x = state->quaternion[1];
    const float y = state->quaternion[2], z = state->quaternion[3];
    const float rotation[9] = {
        1.0f - 2.0f * (y * y + z * z), 2.0f * (x * y - w * z), 2.0f * (x * z + w * y),
        2.0f * (x * y + w * z), 1.0f - 2.0f * (x * x + z * z), 2.0f * (y * z - w * x),
        2.0f * (x * z - w * y), 2.0f * (y * z + w * x), 1.0f - 2.0f * (x * x + y * y),
    };
    for (int k = 0; k < 3; ++k) {
        obs[POLICY_OBS_POSITION_ERROR_OFFSET + k] = state->position[k] - target_position[k];
        obs[POLICY_OBS_VELOCITY_ERROR_OFFSET + k] = state->velocity[k] - target_velocity[k];
        obs[POLICY_OBS_ANGULAR_VELOCITY_OFFSET + k] = state->body_rates[k];
    }
    for (int k = 0; k < 9; ++k) {
        obs[POLICY_OBS_ROTATION_MATRIX_OFFSET + k] = rotation[k];
    }
#if POLICY_ACTION_HISTORY > 0
    for (int step = 0; step < RR_HISTORY_STEPS; ++step) {
        for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
            obs[POLICY_OBS_ACTION_HISTORY_OFFSET + POLICY_ACTION_SIZE * step + motor] = history->commands[step][motor];
        }
    }
#endif
}
