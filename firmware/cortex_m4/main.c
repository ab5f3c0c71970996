/* Runs a generated policy on the emulated STM32F405 and reports, over semihosting, one "key=value" per line:
 * instructions of the first step (it also checks the constants' checksum), self-test result, agreement with
 * PyTorch on test vectors (actions and statuses), instructions per inference and stack use. */
#include <stdint.h>

#ifndef POLICY_HEADER /* the Makefile names another c_prefix's header */
#define POLICY_HEADER "policy.h"
#endif
#include POLICY_HEADER
#include "test_vectors.h"

void semihost_write(const char *text);
uint32_t stack_high_water(void);

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define CALIBRATION_LOOPS 200000u
#define TIMED_INFERENCES 20u

static void print_uint(const char *key, uint64_t value)
{
    char text[64];
    int n = 0;
    while (key[n] != '\0' && n < 40) {
        text[n] = key[n];
        ++n;
    }
    text[n++] = '=';
    char digits[21];
    int d = 0;
    do {
        digits[d++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (d > 0) {
        text[n++] = digits[--d];
    }
    text[n++] = '\n';
    text[n] = '\0';
    semihost_write(text);
}

static uint32_t ticks(void) { return SYST_CVR; }

static uint32_t elapsed(uint32_t start, uint32_t end) { return (start - end) & 0xFFFFFFu; } /* counts down */

int main(void)
{
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0u;
    SYST_CSR = 5u; /* processor clock, enabled, no interrupt */

    /* With QEMU -icount, SysTick advances with executed instructions: a loop of known length calibrates it. */
    uint32_t loops = CALIBRATION_LOOPS;
    uint32_t start = ticks();
    __asm volatile("1: subs %0, %0, #1\n bne 1b\n" : "+r"(loops));
    const uint32_t calibration = elapsed(start, ticks());

    float action[POLICY_ACTION_SIZE];
    start = ticks();
    policy_step(test_obs[0], action); /* the first call: the constants' checksum, then an inference */
    const uint32_t first_step = elapsed(start, ticks());
    print_uint("first_step_instructions", (uint64_t)first_step * (2u * CALIBRATION_LOOPS) / calibration);

    float worst = 0.0f;
    const int self_test_failures = policy_self_test(&worst);
    print_uint("self_test_failures", (uint64_t)self_test_failures);
    print_uint("self_test_max_error_e12", (uint64_t)(worst * 1e12f));

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
    print_uint("test_vectors", (uint64_t)TEST_VECTOR_COUNT);
    print_uint("test_vector_failures", (uint64_t)vector_failures);
    print_uint("test_vector_max_error_e12", (uint64_t)(vector_worst * 1e12f));

    start = ticks();
    for (uint32_t i = 0; i < TIMED_INFERENCES; ++i) {
        policy_step(test_obs[i % TEST_VECTOR_COUNT], action);
    }
    const uint32_t inference = elapsed(start, ticks());
    print_uint("calibration_ticks", calibration);
    print_uint("inference_ticks", inference);
    print_uint("instructions_per_inference",
               (uint64_t)inference * (2u * CALIBRATION_LOOPS) / calibration / TIMED_INFERENCES);
    print_uint("stack_high_water_bytes", stack_high_water());
    return (self_test_failures == 0 && vector_failures == 0) ? 0 : 1;
}
