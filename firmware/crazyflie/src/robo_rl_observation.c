#include "robo_rl_observation.h"

#include <math.h>
#include <stdbool.h>

#if defined(POLICY_OBS_LAYOUT_SIZE) && POLICY_OBS_LAYOUT_SIZE != POLICY_OBS_SIZE
#error "policy_layout.h and policy.h disagree on the observation size: copy both from the same export"
#endif
#if POLICY_STATE_HISTORY > 0
#if POLICY_OBS_STATE_HISTORY_SIZE != RR_STATE_HISTORY_VALUES * POLICY_STATE_HISTORY || \
    POLICY_OBS_SIZE != POLICY_OBS_STATE_HISTORY_OFFSET + POLICY_OBS_STATE_HISTORY_SIZE
#error "policy_layout.h's state history does not end the observation with 6 values per step"
#endif
#if POLICY_ACTION_HISTORY > 0 && \
    POLICY_OBS_STATE_HISTORY_OFFSET != POLICY_OBS_ACTION_HISTORY_OFFSET + 4 * POLICY_ACTION_HISTORY
#error "policy_layout.h's state history does not follow the action history"
#endif
#if POLICY_OBS_ANGULAR_VELOCITY_OFFSET != POLICY_OBS_VELOCITY_ERROR_OFFSET + 3
#error "the state history's values are the velocity error and body rates, which must be adjacent"
#endif
#elif POLICY_OBS_SIZE != POLICY_OBS_ACTION_HISTORY_OFFSET + 4 * POLICY_ACTION_HISTORY && POLICY_ACTION_HISTORY > 0
#error "policy_layout.h and policy.h disagree on the observation size"
#endif

rr_heading_t rr_heading_of(const float quaternion[4])
{
    const float w = quaternion[0], x = quaternion[1], y = quaternion[2], z = quaternion[3];
    const float yaw = atan2f(2.0f * (w * z + x * y), 1.0f - 2.0f * (y * y + z * z));
    const rr_heading_t heading = {cosf(yaw), sinf(yaw)};
    return heading;
}

void rr_heading_turn(const rr_heading_t *heading, const float world[3], float frame[3])
{
    const float x = world[0], y = world[1]; /* (frame may be world) */
    frame[0] = heading->cos * x + heading->sin * y;
    frame[1] = -heading->sin * x + heading->cos * y;
    frame[2] = world[2];
}

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

void rr_state_history_reset(rr_state_history_t *history)
{
    history->filled = 0;
}

void rr_state_history_push(rr_state_history_t *history, const float *obs)
{
#if RR_STATE_HISTORY_STEPS > 0
    const float *newest = obs + POLICY_OBS_VELOCITY_ERROR_OFFSET; /* then the body rates (checked above) */
    /* after a reset, the first observation fills every entry (the simulator's episode start), so the
     * shift below leaves it in all of them */
    for (int step = history->filled ? RR_STATE_HISTORY_STEPS - 1 : 0; step > 0; --step) {
        for (int k = 0; k < RR_STATE_HISTORY_VALUES; ++k) {
            history->values[step][k] = history->values[step - 1][k];
        }
    }
    for (int step = 0; step < (history->filled ? 1 : RR_STATE_HISTORY_STEPS); ++step) {
        for (int k = 0; k < RR_STATE_HISTORY_VALUES; ++k) {
            history->values[step][k] = newest[k];
        }
    }
#else
    (void)obs;
#endif
    history->filled = 1;
}

void rr_observation_build(const rr_flight_state_t *state, const rr_heading_t *heading, const float target_position[3],
                          const float target_velocity[3], const rr_action_history_t *history,
                          const rr_state_history_t *state_history, float *obs)
{
    const float w = state->quaternion[0], x = state->quaternion[1];
    const float y = state->quaternion[2], z = state->quaternion[3];
    const float rotation[9] = {
        1.0f - 2.0f * (y * y + z * z), 2.0f * (x * y - w * z), 2.0f * (x * z + w * y),
        2.0f * (x * y + w * z), 1.0f - 2.0f * (x * x + z * z), 2.0f * (y * z - w * x),
        2.0f * (x * z - w * y), 2.0f * (y * z + w * x), 1.0f - 2.0f * (x * x + y * y),
    };
    float error[3], velocity_error[3];
    for (int k = 0; k < 3; ++k) {
        error[k] = state->position[k] - target_position[k];
        velocity_error[k] = state->velocity[k] - target_velocity[k];
        obs[POLICY_OBS_ANGULAR_VELOCITY_OFFSET + k] = state->body_rates[k];
    }
    rr_heading_turn(heading, error, error);
    rr_heading_turn(heading, velocity_error, &obs[POLICY_OBS_VELOCITY_ERROR_OFFSET]);
    /* a setpoint farther than the limit is observed at the limit, in its direction (as in the simulator:
     * sim/quadrotor/observation.py limited_position_error) */
    const float limit = (float)POLICY_POSITION_ERROR_LIMIT_M;
    const float squared = error[0] * error[0] + error[1] * error[1] + error[2] * error[2];
    const bool beyond = limit > 0.0f && squared > limit * limit;
    const float scale = beyond ? limit / sqrtf(squared) : 1.0f;
    for (int k = 0; k < 3; ++k) {
        obs[POLICY_OBS_POSITION_ERROR_OFFSET + k] = beyond ? error[k] * scale : error[k];
    }
    for (int column = 0; column < 3; ++column) { /* each column is a body axis in the world frame: turned */
        const float axis[3] = {rotation[column], rotation[3 + column], rotation[6 + column]};
        float turned[3];
        rr_heading_turn(heading, axis, turned);
        for (int row = 0; row < 3; ++row) {
            obs[POLICY_OBS_ROTATION_MATRIX_OFFSET + 3 * row + column] = turned[row];
        }
    }
#if POLICY_ACTION_HISTORY > 0
    for (int step = 0; step < RR_HISTORY_STEPS; ++step) {
        for (int motor = 0; motor < POLICY_ACTION_SIZE; ++motor) {
            obs[POLICY_OBS_ACTION_HISTORY_OFFSET + POLICY_ACTION_SIZE * step + motor] = history->commands[step][motor];
        }
    }
#endif
#if RR_STATE_HISTORY_STEPS > 0
    for (int step = 0; step < RR_STATE_HISTORY_STEPS; ++step) {
        for (int k = 0; k < RR_STATE_HISTORY_VALUES; ++k) {
            /* right after a reset, every entry is this observation's own (the simulator's episode start) */
            obs[POLICY_OBS_STATE_HISTORY_OFFSET + RR_STATE_HISTORY_VALUES * step + k] =
                state_history->filled ? state_history->values[step][k] : obs[POLICY_OBS_VELOCITY_ERROR_OFFSET + k];
        }
    }
#else
    (void)state_history;
#endif
}
