/* Fuzzes a generated policy's policy_step: a seeded stream of observations in six categories, taken in turn,
 * until max_inputs are done or the time limit is reached. Usage: fuzz_policy <max_inputs> <seconds> <seed>.
 *
 *   normal      every entry finite, sign * [0, 1) * 10^-3..10^3
 *   huge        every entry finite, |x| in 1e30..FLT_MAX: overflows inside the network
 *   tiny        every entry +-0, subnormal or near FLT_MIN
 *   non_finite  normal entries with one to three NaN, +Inf or -Inf among them
 *   mixed       each entry drawn from any of the kinds above
 *   bits        each entry a random 32-bit pattern (NaN payloads and signalling NaNs included)
 *
 * Prints one line per category with how many inputs gave each status and how many broke a rule:
 *   non_finite_action  an action entry that is NaN or Inf (any status)
 *   bad_fallback       a status other than POLICY_OK whose action is not policy_safe_action
 *   wrong_status       POLICY_INVALID_INPUT for a finite observation, anything else for a non-finite one,
 *                      or POLICY_INVALID_WEIGHTS / an unknown status at all
 * then "total <inputs> <seconds>" and "range <k> <min> <max>" of each action entry over POLICY_OK steps. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"

enum { NORMAL, HUGE_FINITE, TINY, NON_FINITE, MIXED, BITS, CATEGORIES };
static const char *const category_name[CATEGORIES] = {"normal", "huge", "tiny", "non_finite", "mixed", "bits"};

static uint32_t state;

static uint32_t next(void) /* xorshift32 */
{
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

static float uniform(void) { return (float)(next() >> 8) / 16777216.0f; } /* [0, 1) */

static float sign(void) { return (next() & 1u) ? 1.0f : -1.0f; }

static float normal_value(void) { return sign() * uniform() * powf(10.0f, (float)(next() % 7u) - 3.0f); }

static float huge_value(void)
{
    const float v = powf(10.0f, 30.0f + 8.54f * uniform()); /* up to 10^38.54 > FLT_MAX: clipped below */
    return sign() * (v < FLT_MAX ? v : FLT_MAX);
}

static float tiny_value(void)
{
    switch (next() % 3u) {
    case 0u:
        return sign() * 0.0f;
    case 1u:
        return sign() * FLT_MIN * uniform(); /* subnormal */
    default:
        return sign() * FLT_MIN * (1.0f + 4.0f * uniform());
    }
}

static float non_finite_value(void)
{
    const uint32_t kind = next() % 3u;
    return kind == 0u ? NAN : (kind == 1u ? INFINITY : -INFINITY);
}

static float bits_value(void)
{
    const uint32_t bits = next();
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void observation(int category, float *obs)
{
    for (int k = 0; k < POLICY_OBS_SIZE; ++k) {
        switch (category) {
        case NORMAL:
        case NON_FINITE:
            obs[k] = normal_value();
            break;
        case HUGE_FINITE:
            obs[k] = huge_value();
            break;
        case TINY:
            obs[k] = tiny_value();
            break;
        case MIXED: {
            const uint32_t kind = next() % 10u;
            obs[k] = kind < 5u   ? normal_value()
                     : kind < 7u ? huge_value()
                     : kind < 9u ? tiny_value()
                                 : non_finite_value();
            break;
        }
        default:
            obs[k] = bits_value();
        }
    }
    if (category == NON_FINITE) {
        const uint32_t count = 1u + next() % 3u;
        for (uint32_t c = 0; c < count; ++c) {
            obs[next() % (uint32_t)POLICY_OBS_SIZE] = non_finite_value();
        }
    }
}

typedef struct {
    long inputs, status[4], other_status, non_finite_action, bad_fallback, wrong_status;
} counts_t;

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s <max_inputs> <seconds> <seed>\n", argv[0]);
        return 2;
    }
    const long max_inputs = atol(argv[1]);
    const double seconds = atof(argv[2]);
    state = (uint32_t)strtoul(argv[3], NULL, 10) * 2654435761u + 2463534242u; /* never 0 */
    if (state == 0u) {
        state = 2463534242u;
    }
    counts_t counts[CATEGORIES];
    memset(counts, 0, sizeof counts);
    float low[POLICY_ACTION_SIZE], high[POLICY_ACTION_SIZE];
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
        low[k] = INFINITY;
        high[k] = -INFINITY;
    }
    const clock_t start = clock();
    long i = 0;
    for (; i < max_inputs; ++i) {
        if ((i & 255) == 0 && (double)(clock() - start) / CLOCKS_PER_SEC > seconds) {
            break;
        }
        const int category = (int)(i % CATEGORIES);
        counts_t *c = &counts[category];
        float obs[POLICY_OBS_SIZE], action[POLICY_ACTION_SIZE];
        observation(category, obs);
        int finite_input = 1;
        for (int k = 0; k < POLICY_OBS_SIZE; ++k) {
            finite_input &= isfinite(obs[k]) != 0;
        }
        const policy_status_t status = policy_step(obs, action);
        c->inputs += 1;
        if ((int)status >= 0 && (int)status <= 3) {
            c->status[(int)status] += 1;
        } else {
            c->other_status += 1;
        }
        c->wrong_status += finite_input ? (status != POLICY_OK && status != POLICY_INVALID_OUTPUT)
                                        : (status != POLICY_INVALID_INPUT);
        int non_finite = 0, fallback_differs = 0;
        for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
            non_finite |= !isfinite(action[k]);
            fallback_differs |= memcmp(&action[k], &policy_safe_action[k], sizeof action[k]) != 0;
        }
        c->non_finite_action += non_finite;
        if (status != POLICY_OK) {
            c->bad_fallback += fallback_differs;
        } else if (!non_finite) {
            for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
                low[k] = action[k] < low[k] ? action[k] : low[k];
                high[k] = action[k] > high[k] ? action[k] : high[k];
            }
        }
    }
    for (int g = 0; g < CATEGORIES; ++g) {
        const counts_t *c = &counts[g];
        printf("category %s inputs %ld ok %ld invalid_input %ld invalid_output %ld invalid_weights %ld "
               "other_status %ld non_finite_action %ld bad_fallback %ld wrong_status %ld\n",
               category_name[g], c->inputs, c->status[POLICY_OK], c->status[POLICY_INVALID_INPUT],
               c->status[POLICY_INVALID_OUTPUT], c->status[POLICY_INVALID_WEIGHTS], c->other_status,
               c->non_finite_action, c->bad_fallback, c->wrong_status);
    }
    printf("total %ld %.3f\n", i, (double)(clock() - start) / CLOCKS_PER_SEC);
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
        printf("range %d %.9g %.9g\n", k, low[k], high[k]);
    }
    return 0;
}
