/* Runs a generated policy on the emulated STM32F405 and reports, over semihosting, one "key=value" per line:
 * instructions of the first step (it also checks the constants' checksum), self-test result, agreement with
 * PyTorch on test vectors (actions and statuses), instructions per inference and stack use. */
#include <stdint.h>

#ifndef POLICY_HEADER /* the Makefile names another c_prefix's header */
#define POLICY_HEADER "policy.h"
#endif
#include POLICY_HEADER
#include "test_vectors.h"

#include "instruction_clock.h"

void semihost_print_uint(const char *key, uint64_t value);
uint32_t stack_high_water(void);

#define TIMED_INFERENCES 20u

int main(void)
{
    const uint32_t calibration = clock_start_and_calibrate();

    float action[POLICY_ACTION_SIZE];
    uint32_t start = clock_ticks();
    policy_step(test_obs[0], action); /* the first call: the constants' checksum, then an inference */
    const uint32_t first_step = clock_elapsed(start);
    semihost_print_uint("first_step_instructions", clock_instructions(first_step, calibration));

    float worst = 0.0f;
    const int self_test_failures = policy_self_test(&worst);
    semihost_print_uint("self_test_failures", (uint64_t)self_test_failures);
    semihost_print_uint("self_test_max_error_e12", (uint64_t)(worst * 1e12f));

    float vector_worst = 0.0f;
    int vector_failures = 0;
    for (int v = 0; v < TEST_VECTOR_COUNT; ++v) {
        const policy_status_t status = policy_step(test_obs[v], action);
        int bad = status != test_status[v];
        for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {
            const float e = action[k] > test_action[v][k] ? action[k] - test_action[v][k] : test_action[v][k] - action[k];
            vector_worst = e > vector_worst ? e : vector_worst;
            bad |= !(e <= POLICY_SELF_TEST_TOLERANCE);
        }
        vector_failures += bad;
    }
    semihost_print_uint("test_vectors", (uint64_t)TEST_VECTOR_COUNT);
    semihost_print_uint("test_vector_failures", (uint64_t)vector_failures);
    semihost_print_uint("test_vector_max_error_e12", (uint64_t)(vector_worst * 1e12f));

    start = clock_ticks();
    for (uint32_t i = 0; i < TIMED_INFERENCES; ++i) {
        policy_step(test_obs[i % TEST_VECTOR_COUNT], action);
    }
    const uint32_t inference = clock_elapsed(start);
    semihost_print_uint("calibration_ticks", calibration);
    semihost_print_uint("inference_ticks", inference);
    semihost_print_uint("instructions_per_inference", clock_instructions(inference, calibration) / TIMED_INFERENCES);
    semihost_print_uint("stack_high_water_bytes", stack_high_water());
    return (self_test_failures == 0 && vector_failures == 0) ? 0 : 1;
}
