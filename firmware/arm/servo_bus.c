#include "servo_bus.h"

#include <string.h>

size_t feetech_packet(uint8_t *out, uint8_t id, uint8_t instruction, const uint8_t *parameters, uint8_t n)
{
    out[0] = FEETECH_HEADER_BYTE;
    out[1] = FEETECH_HEADER_BYTE;
    out[2] = id;
    out[3] = (uint8_t)(n + 2u);
    out[4] = instruction;
    uint8_t sum = (uint8_t)(id + out[3] + instruction);
    for (uint8_t i = 0; i < n; ++i) {
        out[5u + i] = parameters[i];
        sum = (uint8_t)(sum + parameters[i]);
    }
    out[5u + n] = (uint8_t)~sum;
    return (size_t)n + FEETECH_PACKET_OVERHEAD;
}

size_t feetech_read(uint8_t *out, uint8_t id, uint8_t address, uint8_t size)
{
    const uint8_t parameters[2] = {address, size};
    return feetech_packet(out, id, FEETECH_INST_READ, parameters, 2u);
}

size_t feetech_write(uint8_t *out, uint8_t id, uint8_t address, const uint8_t *data, uint8_t n)
{
    uint8_t parameters[FEETECH_MAX_PARAMETERS];
    if ((unsigned)n + 1u > FEETECH_MAX_PARAMETERS) {
        return 0;
    }
    parameters[0] = address;
    memcpy(&parameters[1], data, n);
    return feetech_packet(out, id, FEETECH_INST_WRITE, parameters, (uint8_t)(n + 1u));
}

size_t feetech_sync_read(uint8_t *out, uint8_t address, uint8_t size, const uint8_t *ids, uint8_t count)
{
    uint8_t parameters[FEETECH_MAX_PARAMETERS];
    if (2u + (unsigned)count > FEETECH_MAX_PARAMETERS) {
        return 0;
    }
    parameters[0] = address;
    parameters[1] = size;
    memcpy(&parameters[2], ids, count);
    return feetech_packet(out, FEETECH_BROADCAST_ID, FEETECH_INST_SYNC_READ, parameters, (uint8_t)(2u + count));
}

size_t feetech_sync_write(uint8_t *out, uint8_t address, uint8_t size, const uint8_t *ids, const uint8_t *data,
                          uint8_t count)
{
    uint8_t parameters[FEETECH_MAX_PARAMETERS];
    const unsigned n = 2u + (unsigned)count * (1u + size);
    if (n > FEETECH_MAX_PARAMETERS) {
        return 0;
    }
    parameters[0] = address;
    parameters[1] = size;
    unsigned k = 2u;
    for (uint8_t i = 0; i < count; ++i) {
        parameters[k++] = ids[i];
        memcpy(&parameters[k], &data[(unsigned)i * size], size);
        k += size;
    }
    return feetech_packet(out, FEETECH_BROADCAST_ID, FEETECH_INST_SYNC_WRITE, parameters, (uint8_t)n);
}

uint16_t feetech_encode_signed(int32_t value, unsigned sign_bit)
{
    const uint32_t limit = (1u << sign_bit) - 1u;
    uint32_t magnitude = value < 0 ? 0u - (uint32_t)value : (uint32_t)value; /* no -INT32_MIN */
    magnitude = magnitude > limit ? limit : magnitude;
    return (uint16_t)(magnitude | (value < 0 ? (1u << sign_bit) : 0u));
}

int32_t feetech_decode_signed(uint16_t raw, unsigned sign_bit)
{
    const int32_t magnitude = (int32_t)(raw & ((1u << sign_bit) - 1u));
    return (raw & (1u << sign_bit)) ? -magnitude : magnitude;
}

enum { STAGE_HEADER1, STAGE_HEADER2, STAGE_ID, STAGE_LENGTH, STAGE_ERROR, STAGE_PARAMETERS, STAGE_CHECKSUM };

void feetech_parser_reset(feetech_parser_t *p)
{
    p->stage = STAGE_HEADER1;
}

int feetech_parser_push(feetech_parser_t *p, uint8_t byte)
{
    switch (p->stage) {
    case STAGE_HEADER1:
        p->stage = byte == FEETECH_HEADER_BYTE ? STAGE_HEADER2 : STAGE_HEADER1;
        return 0;
    case STAGE_HEADER2:
        p->stage = byte == FEETECH_HEADER_BYTE ? STAGE_ID : STAGE_HEADER1;
        return 0;
    case STAGE_ID:
        if (byte == FEETECH_HEADER_BYTE) { /* 0xFF 0xFF 0xFF: the header starts one byte later */
            return 0;
        }
        p->id = byte;
        p->stage = STAGE_LENGTH;
        return 0;
    case STAGE_LENGTH:
        if (byte < 2u) {
            p->stage = STAGE_HEADER1;
            return 0;
        }
        p->length = byte;
        p->stage = STAGE_ERROR;
        return 0;
    case STAGE_ERROR:
        p->error = byte;
        p->count = 0;
        p->sum = (uint8_t)(p->id + p->length + byte);
        p->stage = p->length > 2u ? STAGE_PARAMETERS : STAGE_CHECKSUM;
        return 0;
    case STAGE_PARAMETERS:
        p->parameters[p->count++] = byte;
        p->sum = (uint8_t)(p->sum + byte);
        if (p->count == (uint8_t)(p->length - 2u)) {
            p->stage = STAGE_CHECKSUM;
        }
        return 0;
    default: { /* STAGE_CHECKSUM */
        p->stage = STAGE_HEADER1;
        const uint8_t expected = (uint8_t)~p->sum;
        if (expected == byte) {
            return 1;
        }
        ++p->bad_checksums;
        return 0;
    }
    }
}
