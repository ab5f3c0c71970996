/* Feeds a generated policy N pseudo-random observations mixing normal values, NaN, +-Inf, huge and tiny
 * numbers; prints how many outputs were not finite, the status counts and each action's min and max. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy.h"

static uint32_t state = 2463534242u;

static uint32_t next(void)
{
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

static float uniform(void) { return (float)(next() >> 8) / 16777216.0f; }

static float sample(void)
{
    const uint32_t kind = next() % 100u;
    const float sign = (next() & 1u) ? 1.0f : -1.0f;
    if (kind < 3u) return NAN;
    if (kind < 6u) return sign * INFINITY;
    if (kind < 12u) return sign * 3.0e38f * uniform();
    if (kind < 16u) return sign * 1.0e-40f * uniform();
    return sign * uniform() * powf(10.0f, (float)(next() % 7u) - 3.0f);
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 1000000L;
    long non_finite = 0, status_count[3] = {0, 0, 0};
    float low[POLICY_ACTION_SIZE], high[POLICY_ACTION_SIZE];
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
        low[k] = INFINITY;
        high[k] = -INFINITY;
    }
    for (long i = 0; i < n; ++i) {
        float obs[POLICY_OBS_SIZE], action[POLICY_ACTION_SIZE];
        const int clean = (i % 4) == 0; /* a quarter without NaN/Inf so the network path is exercised */
        for (int k = 0; k < POLICY_OBS_SIZE; ++k) {
            float v = sample();
            obs[k] = (clean && !isfinite(v)) ? 1.0f : v;
        }
        const policy_status_t status = policy_step(obs, action);
        status_count[status] += 1;
        for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
            if (!isfinite(action[k])) {
                ++non_finite;
            } else {
                low[k] = action[k] < low[k] ? action[k] : low[k];
                high[k] = action[k] > high[k] ? action[k] : high[k];
            }
        }
    }
    printf("non_finite %ld\nok %ld\ninvalid_input %ld\ninvalid_output %ld\n", non_finite, status_count[0],
           status_count[1], status_count[2]);
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
        printf("range %d %.9g %.9g\n", k, low[k], high[k]);
    }
    return 0;
}
