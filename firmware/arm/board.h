/* The STM32F405 board under the arm app: clocks, a 1 kHz SysTick, the servo bus on USART1 (PA9, single-wire
 * half-duplex, 1 Mbaud) and the host link on USART2 (PA2 TX, PA3 RX, 460800 baud). QEMU's netduinoplus2
 * emulates the same SoC: its first -serial is USART1, its second USART2. */
#ifndef BOARD_H
#define BOARD_H
#include <stddef.h>
#include <stdint.h>

#define BOARD_SYSCLK_HZ 168000000u
#define BOARD_BUS_BAUD 1000000u
#define BOARD_HOST_BAUD 460800u
/* 1: PA9 is the servo bus' data line itself (USART1 half-duplex, HDSEL); 0: PA9/PA10 go to a half-duplex bus
 * adapter's TX/RX (e.g. a bus servo driver board's UART header), which turns the line around itself */
#ifndef BOARD_BUS_SINGLE_WIRE
#define BOARD_BUS_SINGLE_WIRE 1
#endif

/* Clocks (HSI -> PLL 168 MHz; waits are bounded, so a board whose PLL does not lock runs on the 16 MHz HSI
 * and says so in board_clock_locked), SysTick, GPIO alternate functions and both UARTs. */
void board_init(void);
int board_clock_locked(void);

uint32_t board_millis(void);
/* SysTick counts at the core clock: differences of board_ticks() measure durations below 25 s. */
uint32_t board_ticks(void);

/* SysTick ticks of `loops` two-instruction iterations (subs, bne): turns tick counts into instructions. */
uint32_t board_calibration_ticks(uint32_t loops);

/* The deepest stack used since reset [bytes] (0 where the board cannot tell). */
uint32_t board_stack_high_water(void);

void bus_write(const uint8_t *data, size_t n);
int bus_read_byte(uint8_t *byte); /* 1 and the byte if one is waiting, else 0 (from the RX interrupt's buffer) */
void bus_flush_input(void);

void host_write(const uint8_t *data, size_t n);
int host_read_byte(uint8_t *byte); /* from a buffer the UART's interrupt fills */

#endif
