/* Feetech SCS/STS packets (feetech_protocol.h): built into a buffer and parsed from received bytes, with no
 * hardware; the board's UART moves the bytes. The same packets as robo_rl/export/feetech.py. */
#ifndef SERVO_BUS_H
#define SERVO_BUS_H
#include <stddef.h>
#include <stdint.h>

#include "feetech_protocol.h"

#define FEETECH_PACKET_OVERHEAD 6u /* header (2), id, length, instruction or error, checksum */

/* An instruction packet into `out` (room for n + 6 bytes); returns its length. */
size_t feetech_packet(uint8_t *out, uint8_t id, uint8_t instruction, const uint8_t *parameters, uint8_t n);

/* READ `size` bytes of servo `id` from register `address` on. */
size_t feetech_read(uint8_t *out, uint8_t id, uint8_t address, uint8_t size);

/* WRITE bytes to servo `id` from register `address` on. */
size_t feetech_write(uint8_t *out, uint8_t id, uint8_t address, const uint8_t *data, uint8_t n);

/* SYNC_READ of `size` bytes from `address` on of servos ids[0..count): each answers with its own status
 * packet, in that order. Returns 0 if the packet would exceed FEETECH_MAX_PARAMETERS. */
size_t feetech_sync_read(uint8_t *out, uint8_t address, uint8_t size, const uint8_t *ids, uint8_t count);

/* SYNC_WRITE of `size` bytes per servo from `address` on: ids[i] takes data[i * size ...]. Returns 0 if the
 * packet would exceed FEETECH_MAX_PARAMETERS. */
size_t feetech_sync_write(uint8_t *out, uint8_t address, uint8_t size, const uint8_t *ids, const uint8_t *data,
                          uint8_t count);

/* A sign-magnitude register value (sign at `sign_bit`) to its raw 16 bits and back; magnitudes are clipped
 * to the bits below the sign. */
uint16_t feetech_encode_signed(int32_t value, unsigned sign_bit);
int32_t feetech_decode_signed(uint16_t raw, unsigned sign_bit);

/* A status packet parsed from bytes: feed one byte at a time; a complete packet with a good checksum
 * returns 1 and is in id, error, parameters[0..count). Bad checksums restart the search (counted). */
typedef struct {
    uint8_t stage;
    uint8_t id, length, error, count, sum;
    uint8_t parameters[FEETECH_MAX_PARAMETERS];
    uint32_t bad_checksums;
} feetech_parser_t;

void feetech_parser_reset(feetech_parser_t *p);
int feetech_parser_push(feetech_parser_t *p, uint8_t byte);

#endif
