/* STM32F405 registers (RM0090) for board.h. Transmit polls (a tick's packets are short: 100 bytes, 1 ms at
 * 1 Mbaud); receive is interrupt-driven into rings. */
#include "board.h"

#define REG(address) (*(volatile uint32_t *)(address))

#define RCC_CR REG(0x40023800u)
#define RCC_PLLCFGR REG(0x40023804u)
#define RCC_CFGR REG(0x40023808u)
#define RCC_AHB1ENR REG(0x40023830u)
#define RCC_APB1ENR REG(0x40023840u)
#define RCC_APB2ENR REG(0x40023844u)
#define FLASH_ACR REG(0x40023C00u)

#define GPIOA_MODER REG(0x40020000u)
#define GPIOA_OTYPER REG(0x40020004u)
#define GPIOA_PUPDR REG(0x4002000Cu)
#define GPIOA_AFRL REG(0x40020020u)
#define GPIOA_AFRH REG(0x40020024u)

#define USART1_BASE 0x40011000u
#define USART2_BASE 0x40004400u
#define USART_SR(base) REG((base) + 0x00u)
#define USART_DR(base) REG((base) + 0x04u)
#define USART_BRR(base) REG((base) + 0x08u)
#define USART_CR1(base) REG((base) + 0x0Cu)
#define USART_CR3(base) REG((base) + 0x14u)
#define SR_RXNE (1u << 5)
#define SR_TC (1u << 6)
#define SR_TXE (1u << 7)
#define SR_ERRORS 0x0Fu /* PE, FE, NF, ORE: cleared by reading SR then DR */

#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)

#define APB1_HZ (BOARD_SYSCLK_HZ / 4u)
#define APB2_HZ (BOARD_SYSCLK_HZ / 2u)
#define WAIT_LIMIT 100000u

uint32_t stack_high_water(void); /* cortex_m4/startup.c: the painted stack's low-water mark */

#define NVIC_ISER1 REG(0xE000E104u)
#define USART1_IRQ 37u
#define USART2_IRQ 38u
#define RING 256u /* a power of two: the indices wrap by masking */

/* Received bytes, taken by each UART's interrupt as they arrive: none is lost to an overrun while a tick
 * computes, and waiting for one polls RAM, not the peripheral. */
typedef struct {
    volatile uint8_t bytes[RING];
    volatile uint32_t head, tail;
} ring_t;

static volatile uint32_t millis;
static int clock_locked;
static ring_t bus_ring, host_ring;

void systick_handler(void) { ++millis; }

static void receive(uint32_t base, ring_t *ring)
{
    const uint32_t status = USART_SR(base);
    const uint8_t byte = (uint8_t)USART_DR(base); /* reading SR then DR clears RXNE and the errors */
    if ((status & SR_RXNE) && !(status & SR_ERRORS) && ring->tail - ring->head < RING) {
        ring->bytes[ring->tail & (RING - 1u)] = byte;
        ++ring->tail;
    }
}

void usart1_handler(void) { receive(USART1_BASE, &bus_ring); }
void usart2_handler(void) { receive(USART2_BASE, &host_ring); }

static int take(ring_t *ring, uint8_t *byte)
{
    if (ring->head == ring->tail) {
        return 0;
    }
    *byte = ring->bytes[ring->head & (RING - 1u)];
    ++ring->head;
    return 1;
}

static int wait_set(volatile uint32_t *reg, uint32_t mask, uint32_t value)
{
    for (uint32_t i = 0; i < WAIT_LIMIT; ++i) {
        if ((*reg & mask) == value) {
            return 1;
        }
    }
    return 0;
}

static void clock_init(void)
{
    RCC_CR |= 1u;                                           /* HSI on (it is at reset) */
    if (!wait_set(&RCC_CR, 1u << 1, 1u << 1)) {
        return;
    }
    /* PLL from HSI 16 MHz: /M=16 -> 1 MHz, *N=336, /P=2 -> 168 MHz, /Q=7 -> 48 MHz */
    RCC_PLLCFGR = 16u | (336u << 6) | (0u << 16) | (7u << 24);
    RCC_CR |= 1u << 24;                                     /* PLL on */
    if (!wait_set(&RCC_CR, 1u << 25, 1u << 25)) {
        return;
    }
    FLASH_ACR = (1u << 8) | (1u << 9) | (1u << 10) | 5u;     /* prefetch, caches, 5 wait states at 168 MHz */
    RCC_CFGR = (5u << 10) | (4u << 13) | 2u;                /* APB1 /4, APB2 /2, SYSCLK = PLL */
    clock_locked = wait_set(&RCC_CFGR, 3u << 2, 2u << 2);
}

static void uart_init(uint32_t base, uint32_t clock_hz, uint32_t baud, int half_duplex)
{
    USART_CR1(base) = 0u;
    USART_BRR(base) = (clock_hz + baud / 2u) / baud;         /* 16x oversampling: mantissa.fraction */
    USART_CR3(base) = half_duplex ? (1u << 3) : 0u;         /* HDSEL */
    USART_CR1(base) = (1u << 13) | (1u << 3) | (1u << 2);   /* UE, TE, RE */
}

void board_init(void)
{
    clock_init();
    RCC_AHB1ENR |= 1u << 0;                                 /* GPIOA */
    RCC_APB2ENR |= 1u << 4;                                 /* USART1 */
    RCC_APB1ENR |= 1u << 17;                                /* USART2 */
    /* PA9 (and PA10 through an adapter): USART1, AF7; single wire: PA9 open drain with pull-up is the bus
     * line. PA2/PA3: USART2 TX/RX, AF7 */
    GPIOA_MODER = (GPIOA_MODER & ~((3u << 18) | (3u << 20) | (3u << 4) | (3u << 6)))
                | (2u << 18) | (BOARD_BUS_SINGLE_WIRE ? 0u : 2u << 20) | (2u << 4) | (2u << 6);
    if (BOARD_BUS_SINGLE_WIRE) {
        GPIOA_OTYPER |= 1u << 9;
        GPIOA_PUPDR = (GPIOA_PUPDR & ~(3u << 18)) | (1u << 18);
    }
    GPIOA_AFRH = (GPIOA_AFRH & ~(0xFFu << 4)) | (7u << 4) | (7u << 8);
    GPIOA_AFRL = (GPIOA_AFRL & ~((0xFu << 8) | (0xFu << 12))) | (7u << 8) | (7u << 12);
    uart_init(USART1_BASE, APB2_HZ, BOARD_BUS_BAUD, BOARD_BUS_SINGLE_WIRE);
    uart_init(USART2_BASE, APB1_HZ, BOARD_HOST_BAUD, 0);
    USART_CR1(USART1_BASE) |= 1u << 5;                      /* RXNEIE */
    USART_CR1(USART2_BASE) |= 1u << 5;
    NVIC_ISER1 = (1u << (USART1_IRQ - 32u)) | (1u << (USART2_IRQ - 32u));
    SYST_RVR = BOARD_SYSCLK_HZ / 1000u - 1u;
    SYST_CVR = 0u;
    SYST_CSR = 7u;                                          /* core clock, interrupt, enabled */
}

int board_clock_locked(void) { return clock_locked; }

uint32_t board_stack_high_water(void) { return stack_high_water(); }

uint32_t board_millis(void) { return millis; }

uint32_t board_ticks(void)
{
    uint32_t ms, count;
    do { /* a SysTick interrupt between the two reads would pair a new count with an old millisecond */
        ms = millis;
        count = SYST_CVR;
    } while (ms != millis);
    return ms * (BOARD_SYSCLK_HZ / 1000u) + (BOARD_SYSCLK_HZ / 1000u - 1u - count);
}

uint32_t board_calibration_ticks(uint32_t loops)
{
    const uint32_t start = board_ticks();
    __asm volatile("1: subs %0, %0, #1\n bne 1b\n" : "+r"(loops));
    return board_ticks() - start;
}

static void uart_write(uint32_t base, const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        while (!(USART_SR(base) & SR_TXE)) {
        }
        USART_DR(base) = data[i];
    }
    while (!(USART_SR(base) & SR_TC)) {
    }
}

void bus_write(const uint8_t *data, size_t n) { uart_write(USART1_BASE, data, n); }

int bus_read_byte(uint8_t *byte) { return take(&bus_ring, byte); }

void bus_flush_input(void)
{
    bus_ring.head = bus_ring.tail;
}

void host_write(const uint8_t *data, size_t n) { uart_write(USART2_BASE, data, n); }

int host_read_byte(uint8_t *byte) { return take(&host_ring, byte); }
