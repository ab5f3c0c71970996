/* Bare-metal start-up for a Cortex-M4F: vector table, FPU on, .data/.bss, stack painting, main. */
#include <stdint.h>

extern uint32_t _data_load, _data_start, _data_end, _bss_start, _bss_end, _stack_top, _stack_limit;
extern int main(void);
void semihost_exit(int status);

#define STACK_PAINT 0xA5A5A5A5u
#define CPACR (*(volatile uint32_t *)0xE000ED88u)

void reset_handler(void);
void fault_handler(void);
void default_handler(void) {}
/* Interrupts an app may enable by defining the handler (the policy harness enables none) */
void systick_handler(void) __attribute__((weak, alias("default_handler")));
void usart1_handler(void) __attribute__((weak, alias("default_handler")));
void usart2_handler(void) __attribute__((weak, alias("default_handler")));

#define USART1_IRQ 37 /* STM32F405 (RM0090 table 61) */
#define USART2_IRQ 38

__attribute__((section(".isr_vector"), used)) static const void *const vectors[16 + USART2_IRQ + 1] = {
    &_stack_top, reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    [15] = systick_handler,
    [16 + USART1_IRQ] = usart1_handler,
    [16 + USART2_IRQ] = usart2_handler,
};

__attribute__((naked, noreturn)) void reset_handler(void)
{
    /* The FPU must be enabled before any floating-point instruction runs (CP10, CP11 full access). */
    __asm volatile(
        "ldr r0, =0xE000ED88\n"
        "ldr r1, [r0]\n"
        "orr r1, r1, #(0xF << 20)\n"
        "str r1, [r0]\n"
        "dsb\n"
        "isb\n"
        "b start_c\n");
}

__attribute__((noreturn, used)) void start_c(void)
{
    uint32_t *src = &_data_load;
    for (uint32_t *dst = &_data_start; dst < &_data_end;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &_bss_start; dst < &_bss_end;) {
        *dst++ = 0;
    }
    /* paint the free RAM below the current frame, to measure the stack high-water mark later */
    uint32_t *sp;
    __asm volatile("mov %0, sp" : "=r"(sp));
    for (uint32_t *p = &_stack_limit; p < sp - 16;) {
        *p++ = STACK_PAINT;
    }
    semihost_exit(main());
    for (;;) {
    }
}

/* Bytes of stack ever used: from the top of RAM down to the lowest word no longer painted. */
uint32_t stack_high_water(void)
{
    uint32_t *p = &_stack_limit;
    while (p < &_stack_top && *p == STACK_PAINT) {
        ++p;
    }
    return (uint32_t)((uintptr_t)&_stack_top - (uintptr_t)p);
}

void fault_handler(void)
{
    semihost_exit(3);
}
