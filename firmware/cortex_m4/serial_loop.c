/* Policy in the loop over USART1: the emulated STM32F405 receives observations from a simulator on the
 * host and answers with actions. Protocol (little-endian float32): after boot the board sends 'R'; then
 * for each step the host sends POLICY_OBS_SIZE floats and the board replies with one status byte and
 * POLICY_ACTION_SIZE floats. */
#include <stdint.h>
#include <string.h>

#ifndef POLICY_HEADER /* the Makefile names another c_prefix's header */
#define POLICY_HEADER "policy.h"
#endif
#include POLICY_HEADER

#define RCC_APB2ENR (*(volatile uint32_t *)0x40023844u)
#define USART1_SR (*(volatile uint32_t *)0x40011000u)
#define USART1_DR (*(volatile uint32_t *)0x40011004u)
#define USART1_CR1 (*(volatile uint32_t *)0x4001100Cu)
#define SR_RXNE (1u << 5)
#define SR_TXE (1u << 7)

static void put(uint8_t byte)
{
    while (!(USART1_SR & SR_TXE)) {
    }
    USART1_DR = byte;
}

static uint8_t get(void)
{
    while (!(USART1_SR & SR_RXNE)) {
    }
    return (uint8_t)USART1_DR;
}

int main(void)
{
    RCC_APB2ENR |= 1u << 4;                             /* USART1 clock */
    USART1_CR1 = (1u << 13) | (1u << 3) | (1u << 2);   /* UE, TE, RE */
    put('R');
    for (;;) {
        uint8_t in[4 * POLICY_OBS_SIZE];
        for (unsigned i = 0; i < sizeof in; ++i) {
            in[i] = get();
        }
        float obs[POLICY_OBS_SIZE];
        float action[POLICY_ACTION_SIZE];
        memcpy(obs, in, sizeof obs);
        const policy_status_t status = policy_step(obs, action);
        uint8_t out[4 * POLICY_ACTION_SIZE];
        memcpy(out, action, sizeof out);
        put((uint8_t)status);
        for (unsigned i = 0; i < sizeof out; ++i) {
            put(out[i]);
        }
    }
}
