/* SysTick as an instruction counter: under QEMU's -icount (which models no Cortex-M4 cycles) it advances with
 * executed instructions, at a rate that a loop of known length calibrates. */
#ifndef INSTRUCTION_CLOCK_H
#define INSTRUCTION_CLOCK_H
#include <stdint.h>

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define CALIBRATION_LOOPS 200000u /* two instructions each */

static inline uint32_t clock_ticks(void) { return SYST_CVR; }

/* SysTick ticks from `start` to now (it counts down, 24 bits) */
static inline uint32_t clock_elapsed(uint32_t start) { return (start - SYST_CVR) & 0xFFFFFFu; }

/* Starts SysTick from the processor clock and returns the ticks of 2 * CALIBRATION_LOOPS instructions */
static inline uint32_t clock_start_and_calibrate(void)
{
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0u;
    SYST_CSR = 5u; /* processor clock, enabled, no interrupt */
    uint32_t loops = CALIBRATION_LOOPS;
    const uint32_t start = clock_ticks();
    __asm volatile("1: subs %0, %0, #1\n bne 1b\n" : "+r"(loops));
    return clock_elapsed(start);
}

/* `ticks` in instructions, given the calibration's ticks */
static inline uint64_t clock_instructions(uint64_t ticks, uint32_t calibration)
{
    return ticks * (2u * CALIBRATION_LOOPS) / calibration;
}
#endif
