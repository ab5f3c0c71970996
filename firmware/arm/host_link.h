/* The host link's frames (host_protocol.h): CRC-16/CCITT-FALSE, framing and a byte-at-a-time parser, with no
 * hardware. The same frames as robo_rl/export/host_link.py. */
#ifndef HOST_LINK_H
#define HOST_LINK_H
#include <stddef.h>
#include <stdint.h>

#include "host_protocol.h"

#define HOST_FRAME_OVERHEAD 7u /* sync (2), type, sequence, length, CRC (2) */

uint16_t host_crc16(const uint8_t *data, size_t n);

/* The CRC continued over more bytes. */
uint16_t host_crc16_update(uint16_t crc, const uint8_t *data, size_t n);

/* A frame around `payload` into `out` (room for n + 7 bytes); returns its length, 0 if n is too long. */
size_t host_frame(uint8_t *out, uint8_t type, uint8_t sequence, const uint8_t *payload, uint8_t n);

typedef struct {
    uint8_t stage;
    uint8_t type, sequence, length, count;
    uint8_t payload[HOST_MAX_PAYLOAD];
    uint8_t crc_low;
    uint32_t bad_frames;
} host_parser_t;

void host_parser_reset(host_parser_t *p);

/* Feed one received byte; 1 when it completes a frame with a good CRC (type, sequence, payload[0..length)). */
int host_parser_push(host_parser_t *p, uint8_t byte);

#endif
