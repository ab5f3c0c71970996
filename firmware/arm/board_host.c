/* board.h on a PC: the arm app compiled for the host, for software in the loop and fuzzing
 * (robo_rl.export.arm_firmware.HostArmApp). Time is virtual and advances BOARD_HOST_TICKS_PER_READ SysTick
 * ticks at every clock read, so a timeout passes after as many polls as it is long, however fast the PC.
 * What the app writes on the bus goes to the handler the harness registers, which answers by pushing bytes;
 * the host link's bytes are pushed and taken through queues. */
#include <string.h>

#include "board.h"

#define BOARD_HOST_TICKS_PER_READ (BOARD_SYSCLK_HZ / 100000u) /* 10 us */
#define QUEUE_SIZE 8192u

typedef void (*board_host_handler_t)(const uint8_t *data, size_t n);

typedef struct {
    uint8_t bytes[QUEUE_SIZE];
    size_t head, tail; /* read at head, written at tail; head == tail: empty */
} queue_t;

static queue_t bus_rx, host_rx, host_tx;
static board_host_handler_t bus_handler;
static uint64_t clock_ticks;

static void push(queue_t *q, const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        const size_t next = (q->tail + 1u) % QUEUE_SIZE;
        if (next == q->head) { /* full: the byte is lost, as a UART overrun loses it */
            return;
        }
        q->bytes[q->tail] = data[i];
        q->tail = next;
    }
}

static int pop(queue_t *q, uint8_t *byte)
{
    if (q->head == q->tail) {
        return 0;
    }
    *byte = q->bytes[q->head];
    q->head = (q->head + 1u) % QUEUE_SIZE;
    return 1;
}

void board_host_reset(void)
{
    memset(&bus_rx, 0, sizeof bus_rx);
    memset(&host_rx, 0, sizeof host_rx);
    memset(&host_tx, 0, sizeof host_tx);
    clock_ticks = 0;
}

void board_host_set_bus_handler(board_host_handler_t handler) { bus_handler = handler; }
void board_host_push_bus(const uint8_t *data, size_t n) { push(&bus_rx, data, n); }
void board_host_push_host(const uint8_t *data, size_t n) { push(&host_rx, data, n); }

size_t board_host_take_host(uint8_t *out, size_t max)
{
    size_t n = 0;
    while (n < max && pop(&host_tx, &out[n])) {
        ++n;
    }
    return n;
}

void board_init(void) {}
int board_clock_locked(void) { return 1; }

uint32_t board_ticks(void)
{
    clock_ticks += BOARD_HOST_TICKS_PER_READ;
    return (uint32_t)clock_ticks;
}

uint32_t board_millis(void)
{
    clock_ticks += BOARD_HOST_TICKS_PER_READ;
    return (uint32_t)(clock_ticks / (BOARD_SYSCLK_HZ / 1000u));
}

uint32_t board_calibration_ticks(uint32_t loops) { return loops * 2u; }

uint32_t board_stack_high_water(void) { return 0; }

void bus_write(const uint8_t *data, size_t n)
{
    if (bus_handler != NULL) {
        bus_handler(data, n);
    }
}

int bus_read_byte(uint8_t *byte) { return pop(&bus_rx, byte); }

void bus_flush_input(void)
{
    uint8_t byte;
    while (pop(&bus_rx, &byte)) {
    }
}

void host_write(const uint8_t *data, size_t n) { push(&host_tx, data, n); }
int host_read_byte(uint8_t *byte) { return pop(&host_rx, byte); }
