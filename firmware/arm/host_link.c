#include "host_link.h"

#include <string.h>

uint16_t host_crc16_update(uint16_t crc, const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (int b = 0; b < 8; ++b) {
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ HOST_CRC_POLY) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

uint16_t host_crc16(const uint8_t *data, size_t n)
{
    return host_crc16_update(HOST_CRC_INIT, data, n);
}

size_t host_frame(uint8_t *out, uint8_t type, uint8_t sequence, const uint8_t *payload, uint8_t n)
{
    if (n > HOST_MAX_PAYLOAD) {
        return 0;
    }
    out[0] = HOST_SYNC0;
    out[1] = HOST_SYNC1;
    out[2] = type;
    out[3] = sequence;
    out[4] = n;
    memcpy(&out[5], payload, n);
    const uint16_t crc = host_crc16(&out[2], 3u + n);
    out[5u + n] = (uint8_t)(crc & 0xFFu);
    out[6u + n] = (uint8_t)(crc >> 8);
    return (size_t)n + HOST_FRAME_OVERHEAD;
}

enum { STAGE_SYNC0, STAGE_SYNC1, STAGE_TYPE, STAGE_SEQUENCE, STAGE_LENGTH, STAGE_PAYLOAD, STAGE_CRC0, STAGE_CRC1 };

void host_parser_reset(host_parser_t *p)
{
    p->stage = STAGE_SYNC0;
}

int host_parser_push(host_parser_t *p, uint8_t byte)
{
    switch (p->stage) {
    case STAGE_SYNC0:
        p->stage = byte == HOST_SYNC0 ? STAGE_SYNC1 : STAGE_SYNC0;
        return 0;
    case STAGE_SYNC1:
        p->stage = byte == HOST_SYNC1 ? STAGE_TYPE : (byte == HOST_SYNC0 ? STAGE_SYNC1 : STAGE_SYNC0);
        return 0;
    case STAGE_TYPE:
        p->type = byte;
        p->stage = STAGE_SEQUENCE;
        return 0;
    case STAGE_SEQUENCE:
        p->sequence = byte;
        p->stage = STAGE_LENGTH;
        return 0;
    case STAGE_LENGTH:
        if (byte > HOST_MAX_PAYLOAD) {
            ++p->bad_frames;
            p->stage = STAGE_SYNC0;
            return 0;
        }
        p->length = byte;
        p->count = 0;
        p->stage = byte > 0u ? STAGE_PAYLOAD : STAGE_CRC0;
        return 0;
    case STAGE_PAYLOAD:
        p->payload[p->count++] = byte;
        if (p->count == p->length) {
            p->stage = STAGE_CRC0;
        }
        return 0;
    case STAGE_CRC0:
        p->crc_low = byte;
        p->stage = STAGE_CRC1;
        return 0;
    default: { /* STAGE_CRC1 */
        p->stage = STAGE_SYNC0;
        const uint8_t header[3] = {p->type, p->sequence, p->length};
        const uint16_t crc = host_crc16_update(host_crc16(header, 3u), p->payload, p->length);
        if ((uint16_t)(p->crc_low | ((uint16_t)byte << 8)) == crc) {
            return 1;
        }
        ++p->bad_frames;
        return 0;
    }
    }
}
