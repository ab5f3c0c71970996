"""The arm firmware's protocol C (firmware/arm/servo_bus.c, host_link.c), compiled for this host and called
through ctypes, against the Python definitions (robo_rl.export.feetech, robo_rl.export.host_link), and both
against values neither computed: the Feetech SDK's packets worked out by hand (as in test_feetech.py), the CRC
catalogue's check value and the standard library's CRC-CCITT (binascii.crc_hqx). A sign or offset error shared
by both sides therefore does not pass."""

from __future__ import annotations

import binascii
import ctypes
import random
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from robo_rl.export import feetech, host_link
from robo_rl.export.feetech import REGISTERS, Instruction, Packet, PacketReader
from robo_rl.export.host_link import Frame, FrameReader

ROOT = Path(__file__).resolve().parents[3]
ARM = ROOT / "firmware" / "arm"
CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{ARM}")
R = REGISTERS
SIGNED = sorted({r.sign_bit for r in R.values() if r.sign_bit is not None})  # 10 (load), 11 (offset), 15

# The test's side of the C: parser state allocated here (ctypes needs no copy of the structs' layout), the
# parsers fed one byte at a time, and every accepted packet or frame recorded as
#   offset of the byte that completed it (u32 LE), id, error, length, count, parameters[count]       (feetech)
#   offset (u32 LE), type, sequence, length, count, payload[count]                                  (host)
# With TEST_MAIN it is a standalone program for the sanitizers: it reads the fuzz strings from a file
# (u16 LE length, bytes), feeds both parsers, exercises the builders into exactly sized heap buffers and the
# signed encoding at its extremes, and prints the totals.
DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_link.h"
#include "servo_bus.h"

void *test_feetech_new(void)
{
    feetech_parser_t *p = calloc(1, sizeof *p);
    if (p != NULL) {
        feetech_parser_reset(p);
    }
    return p;
}

void *test_host_new(void)
{
    host_parser_t *p = calloc(1, sizeof *p);
    if (p != NULL) {
        host_parser_reset(p);
    }
    return p;
}

void test_free(void *p) { free(p); }
void test_feetech_reset(void *p) { feetech_parser_reset((feetech_parser_t *)p); }
void test_host_reset(void *p) { host_parser_reset((host_parser_t *)p); }
uint32_t test_feetech_bad(const void *p) { return ((const feetech_parser_t *)p)->bad_checksums; }
uint32_t test_host_bad(const void *p) { return ((const host_parser_t *)p)->bad_frames; }

static size_t put_record(uint8_t *out, size_t k, uint32_t offset, const uint8_t head[4], const uint8_t *data)
{
    out[k++] = (uint8_t)(offset & 0xFFu);
    out[k++] = (uint8_t)((offset >> 8) & 0xFFu);
    out[k++] = (uint8_t)((offset >> 16) & 0xFFu);
    out[k++] = (uint8_t)(offset >> 24);
    memcpy(&out[k], head, 4u);
    memcpy(&out[k + 4u], data, head[3]);
    return k + 4u + head[3];
}

/* Returns the record bytes written to out, (size_t)-1 if cap is too small; *records counts them. */
size_t test_feetech_feed(void *parser, const uint8_t *data, size_t n, uint8_t *out, size_t cap, size_t *records)
{
    feetech_parser_t *p = parser;
    size_t k = 0;
    *records = 0;
    for (size_t i = 0; i < n; ++i) {
        if (feetech_parser_push(p, data[i])) {
            const uint8_t head[4] = {p->id, p->error, p->length, p->count};
            if (k + 8u + p->count > cap) {
                return (size_t)-1;
            }
            k = put_record(out, k, (uint32_t)i, head, p->parameters);
            ++*records;
        }
    }
    return k;
}

size_t test_host_feed(void *parser, const uint8_t *data, size_t n, uint8_t *out, size_t cap, size_t *records)
{
    host_parser_t *p = parser;
    size_t k = 0;
    *records = 0;
    for (size_t i = 0; i < n; ++i) {
        if (host_parser_push(p, data[i])) {
            const uint8_t head[4] = {p->type, p->sequence, p->length, p->count};
            if (k + 8u + p->count > cap) {
                return (size_t)-1;
            }
            k = put_record(out, k, (uint32_t)i, head, p->payload);
            ++*records;
        }
    }
    return k;
}

#ifdef TEST_MAIN
static uint8_t *exact(size_t n) /* a heap buffer of exactly n bytes: ASan reports any byte past it */
{
    uint8_t *b = malloc(n > 0u ? n : 1u);
    if (b == NULL) {
        exit(3);
    }
    for (size_t i = 0; i < n; ++i) {
        b[i] = (uint8_t)(i * 37u + 11u);
    }
    return b;
}

static void builders(void)
{
    for (unsigned n = 0; n <= FEETECH_MAX_PARAMETERS; ++n) {
        uint8_t *parameters = exact(n), *out = exact(n + FEETECH_PACKET_OVERHEAD);
        if (feetech_packet(out, 1u, FEETECH_INST_WRITE, parameters, (uint8_t)n) != n + FEETECH_PACKET_OVERHEAD) {
            exit(4);
        }
        free(out);
        if (n + 1u <= FEETECH_MAX_PARAMETERS) {
            out = exact(n + 1u + FEETECH_PACKET_OVERHEAD);
            if (feetech_write(out, 1u, 42u, parameters, (uint8_t)n) != n + 1u + FEETECH_PACKET_OVERHEAD) {
                exit(5);
            }
            free(out);
        }
        free(parameters);
    }
    for (unsigned size = 1; size <= 4u; ++size) {
        for (unsigned count = 0; 2u + count * (1u + size) <= FEETECH_MAX_PARAMETERS; ++count) {
            const unsigned n = 2u + count * (1u + size);
            uint8_t *ids = exact(count), *data = exact(count * size), *out = exact(n + FEETECH_PACKET_OVERHEAD);
            if (feetech_sync_write(out, 42u, (uint8_t)size, ids, data, (uint8_t)count) != n + FEETECH_PACKET_OVERHEAD) {
                exit(6);
            }
            free(ids);
            free(data);
            free(out);
        }
    }
    uint8_t *out = exact(4u * FEETECH_MAX_PARAMETERS), *read = exact(8u);
    if (feetech_sync_write(out, 42u, 2u, out, out, 84u) != 0u || feetech_write(out, 1u, 42u, out, 253u) != 0u
        || feetech_read(read, 1u, 56u, 4u) != 8u) {
        exit(7);
    }
    free(out);
    free(read);
    for (unsigned n = 0; n <= HOST_MAX_PAYLOAD + 1u; ++n) {
        uint8_t *payload = exact(n), *frame = exact(n + HOST_FRAME_OVERHEAD);
        const size_t length = host_frame(frame, HOST_MSG_TELEMETRY, (uint8_t)n, payload, (uint8_t)n);
        if (length != (n <= HOST_MAX_PAYLOAD ? n + HOST_FRAME_OVERHEAD : 0u)) {
            exit(8);
        }
        free(payload);
        free(frame);
    }
}

static void signed_extremes(void)
{
    static const int32_t values[] = {INT32_MIN, INT32_MIN + 1, -65536, -32768, -32767, -2048, -1, 0, 1, 32767, 32768,
                                     65536, INT32_MAX};
    static const unsigned bits[] = {10u, 11u, 15u};
    for (size_t b = 0; b < sizeof bits / sizeof bits[0]; ++b) {
        const int32_t limit = (int32_t)((1u << bits[b]) - 1u);
        for (size_t v = 0; v < sizeof values / sizeof values[0]; ++v) {
            const int32_t clipped = values[v] > limit ? limit : (values[v] < -limit ? -limit : values[v]);
            if (feetech_decode_signed(feetech_encode_signed(values[v], bits[b]), bits[b]) != clipped) {
                exit(9);
            }
        }
        for (uint32_t raw = 0; raw <= 0xFFFFu; ++raw) {
            (void)feetech_decode_signed((uint16_t)raw, bits[b]);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        return 2;
    }
    size_t size = 0, capacity = 1u << 16;
    uint8_t *all = malloc(capacity);
    for (size_t got; all != NULL && (got = fread(all + size, 1u, capacity - size, f)) > 0u;) {
        size += got;
        if (size == capacity) {
            capacity *= 2u;
            all = realloc(all, capacity);
        }
    }
    fclose(f);
    if (all == NULL) {
        return 3;
    }
    void *fp = test_feetech_new(), *hp = test_host_new();
    unsigned long strings = 0, packets = 0, frames = 0;
    for (size_t at = 0; at + 2u <= size;) {
        const size_t n = (size_t)all[at] | ((size_t)all[at + 1u] << 8);
        at += 2u;
        if (at + n > size) {
            return 10;
        }
        uint8_t *data = exact(n), *out = exact(2u * n + 16u);
        memcpy(data, all + at, n);
        at += n;
        size_t records;
        test_feetech_reset(fp);
        if (test_feetech_feed(fp, data, n, out, 2u * n + 16u, &records) == (size_t)-1) {
            return 11;
        }
        packets += records;
        test_host_reset(hp);
        if (test_host_feed(hp, data, n, out, 2u * n + 16u, &records) == (size_t)-1) {
            return 12;
        }
        frames += records;
        ++strings;
        free(data);
        free(out);
    }
    builders();
    signed_extremes();
    printf("strings %lu packets %lu frames %lu\n", strings, packets, frames);
    test_free(fp);
    test_free(hp);
    free(all);
    return 0;
}
#endif
"""


def _compile(tmp: Path, *flags: str, output: str) -> Path:
    driver = tmp / "protocol_driver.c"
    driver.write_text(DRIVER)
    target = tmp / output
    command = ["gcc", *CFLAGS, *flags, str(ARM / "servo_bus.c"), str(ARM / "host_link.c"), str(driver), "-o",
               str(target)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stderr}"
    return target


class ProtocolC:
    """servo_bus.c and host_link.c (and the driver above) as one host shared library."""

    def __init__(self, library: Path):
        lib = self.lib = ctypes.CDLL(str(library))
        u8, u16, size, buf = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_size_t, ctypes.c_char_p
        for name, restype, argtypes in (
                ("feetech_packet", size, [buf, u8, u8, buf, u8]),
                ("feetech_read", size, [buf, u8, u8, u8]),
                ("feetech_write", size, [buf, u8, u8, buf, u8]),
                ("feetech_sync_write", size, [buf, u8, u8, buf, buf, u8]),
                ("feetech_encode_signed", u16, [ctypes.c_int32, ctypes.c_uint]),
                ("feetech_decode_signed", ctypes.c_int32, [u16, ctypes.c_uint]),
                ("host_crc16", u16, [buf, size]),
                ("host_crc16_update", u16, [u16, buf, size]),
                ("host_frame", size, [buf, u8, u8, buf, u8]),
                ("test_feetech_new", ctypes.c_void_p, []),
                ("test_host_new", ctypes.c_void_p, []),
                ("test_free", None, [ctypes.c_void_p]),
                ("test_feetech_reset", None, [ctypes.c_void_p]),
                ("test_host_reset", None, [ctypes.c_void_p]),
                ("test_feetech_bad", ctypes.c_uint32, [ctypes.c_void_p]),
                ("test_host_bad", ctypes.c_uint32, [ctypes.c_void_p]),
                ("test_feetech_feed", size, [ctypes.c_void_p, buf, size, buf, size, ctypes.POINTER(size)]),
                ("test_host_feed", size, [ctypes.c_void_p, buf, size, buf, size, ctypes.POINTER(size)])):
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes

    def _build(self, function, room: int, *args) -> bytes:
        out = ctypes.create_string_buffer(room)
        n = function(out, *args)
        return out.raw[:n]

    def packet(self, servo_id: int, code: int, parameters: bytes) -> bytes:
        return self._build(self.lib.feetech_packet, len(parameters) + 6, servo_id, code, parameters, len(parameters))

    def read(self, servo_id: int, address: int, size: int) -> bytes:
        return self._build(self.lib.feetech_read, 8, servo_id, address, size)

    def write(self, servo_id: int, address: int, data: bytes) -> bytes:
        return self._build(self.lib.feetech_write, len(data) + 7, servo_id, address, data, len(data))

    def sync_write(self, address: int, size: int, ids: bytes, data: bytes) -> bytes:
        return self._build(self.lib.feetech_sync_write, 512, address, size, ids, data, len(ids))

    def frame(self, message_type: int, sequence: int, payload: bytes) -> bytes:
        return self._build(self.lib.host_frame, len(payload) + 7, message_type, sequence, payload, len(payload))

    def crc16(self, data: bytes) -> int:
        return self.lib.host_crc16(data, len(data))


class Parser:
    """One C parser (feetech or host): feed bytes, get back what it accepted as (offset, a, b, length, data)
    with offset the index of the byte that completed it."""

    def __init__(self, c: ProtocolC, kind: str):
        self.lib, self.kind = c.lib, kind
        self.handle = getattr(self.lib, f"test_{kind}_new")()
        assert self.handle

    def __del__(self):
        self.lib.test_free(self.handle)

    def reset(self) -> None:
        getattr(self.lib, f"test_{self.kind}_reset")(self.handle)

    @property
    def bad(self) -> int:
        return getattr(self.lib, f"test_{self.kind}_bad")(self.handle)

    def feed(self, data: bytes) -> list[tuple[int, int, int, int, bytes]]:
        cap = 2 * len(data) + 16
        out, records = ctypes.create_string_buffer(cap), ctypes.c_size_t()
        n = getattr(self.lib, f"test_{self.kind}_feed")(self.handle, data, len(data), out, cap, ctypes.byref(records))
        assert n != ctypes.c_size_t(-1).value, "record buffer too small"
        raw, found, k = out.raw[:n], [], 0
        while k < n:
            offset, a, b, length, count = struct.unpack_from("<IBBBB", raw, k)
            found.append((offset, a, b, length, raw[k + 8:k + 8 + count]))
            k += 8 + count
        assert len(found) == records.value
        return found


@pytest.fixture(scope="module")
def c(tmp_path_factory) -> ProtocolC:
    return ProtocolC(_compile(tmp_path_factory.mktemp("arm_protocols"), "-shared", "-fPIC",
                              output="libarm_protocols.so"))


# ---------------------------------------------------------------------------------------------------------------
# 1. The checked-in headers are the generators' output


@pytest.mark.parametrize("header, module", [("feetech_protocol.h", feetech), ("host_protocol.h", host_link)])
def test_checked_in_headers_are_the_generators_output(header, module):
    assert (ARM / header).read_text() == module.c_header(), (
        f"firmware/arm/{header} differs from {module.__name__}.c_header(); regenerate it: "
        f".venv/bin/python -m {module.__name__} > firmware/arm/{header}")


# ---------------------------------------------------------------------------------------------------------------
# 2. Feetech packets and values

WRITE_POS_EX = bytes.fromhex("FFFF010A03293200080000E803A3")  # SMS_STS::WritePosEx(1, 2048, 1000, 50)
READ_POS = bytes.fromhex("FFFF0104023802BE")  # SMS_STS::ReadPos(1)
SYNC_WRITE = bytes.fromhex("FFFFFE0A832A0201000802000439")  # syncWrite([1, 2], goal_position, [2048, 1024])
STATUS_2048 = bytes.fromhex("FFFF0104000008F2")  # servo 1's answer to ReadPos: 2048, no error


def test_c_packets_are_the_sdks_packets(c):
    data = bytes((50, 0x00, 0x08, 0, 0, 0xE8, 0x03))  # acceleration 50, position 2048, time 0, speed 1000
    assert c.write(1, 41, data) == WRITE_POS_EX
    assert c.read(1, 56, 2) == READ_POS
    assert c.sync_write(42, 2, bytes((1, 2)), bytes((0x00, 0x08, 0x00, 0x04))) == SYNC_WRITE
    assert c.packet(1, 0, b"\x00\x08") == STATUS_2048
    assert Parser(c, "feetech").feed(STATUS_2048) == [(7, 1, 0, 4, b"\x00\x08")]


def test_c_packets_equal_python_packets(c):
    rng = np.random.default_rng(1)
    writable = [r for r in R.values() if r.writable]
    for _ in range(500):
        servo_id = int(rng.integers(0, feetech.MAX_ID + 1))
        register = R[rng.choice(sorted(R))]
        size = int(rng.integers(1, feetech.MAX_PARAMETERS))
        assert c.read(servo_id, register.address, size) == feetech.read(servo_id, register, size)
        assert c.read(servo_id, register.address, register.size) == feetech.read(servo_id, register)
        register = writable[int(rng.integers(len(writable)))]
        if register.sign_bit is None:
            value = int(rng.integers(0, 1 << 8 * register.size))
        else:
            limit = (1 << register.sign_bit) - 1
            value = int(rng.integers(-limit, limit + 1))
        data = feetech.encode(register, value)
        assert c.write(servo_id, register.address, data) == feetech.write(servo_id, register, value)
        count = int(rng.integers(1, 7))
        ids = rng.choice(feetech.MAX_ID + 1, count, replace=False)
        values = rng.integers(-32767, 32768, count)
        expected = feetech.sync_write(R["goal_position"], {int(i): int(v) for i, v in zip(ids, values)})
        data = b"".join(feetech.encode(R["goal_position"], int(v)) for v in values)
        assert c.sync_write(42, 2, bytes(ids.astype(np.uint8)), data) == expected
        parameters = rng.integers(0, 256, int(rng.integers(0, feetech.MAX_PARAMETERS + 1)), dtype=np.uint8).tobytes()
        code = int(rng.integers(0, 256))  # a status packet's error byte, or any instruction
        assert c.packet(servo_id, code, parameters) == feetech.packet(servo_id, code, parameters)
    # what neither side can carry: the C answers 0 where Python refuses
    assert c.write(1, 42, bytes(252)) == feetech.write_bytes(1, R["goal_position"], bytes(252))
    assert c.write(1, 42, bytes(253)) == b""
    with pytest.raises(feetech.ProtocolError):
        feetech.write_bytes(1, R["goal_position"], bytes(253))
    assert len(c.sync_write(42, 2, bytes(83), bytes(166))) == 2 + 83 * 3 + 6  # 251 parameters
    assert c.sync_write(42, 2, bytes(84), bytes(168)) == b""  # 254
    with pytest.raises(feetech.ProtocolError):
        feetech.sync_write(R["goal_position"], {i: 0 for i in range(84)})


def test_signed_encoding_matches_python_over_every_value(c):
    """Every value within each signed register's range (position, speed: bit 15; load: bit 10; offset: bit 11)
    encodes to Python's bytes and every raw value without bits above the sign decodes to Python's value;
    beyond the range the C clips where Python refuses."""
    encode, decode = c.lib.feetech_encode_signed, c.lib.feetech_decode_signed
    assert encode(-100, 15) == 0x8064 and decode(0x8064, 15) == -100  # WritePosEx: |value| | 1 << 15
    assert encode(-1000, 10) == 1000 | 1 << 10 and decode(1000 | 1 << 10, 10) == -1000  # ReadLoad: bit 10
    assert decode(0x8000, 15) == 0 and decode(0x0800, 11) == 0  # minus zero
    for bit in SIGNED:
        register = next(r for r in R.values() if r.sign_bit == bit)
        limit = (1 << bit) - 1
        for value in range(-limit, limit + 1):
            raw = encode(value, bit)
            assert raw.to_bytes(2, "little") == feetech.encode(register, value), (bit, value)
            assert decode(raw, bit) == value == feetech.decode(register, raw.to_bytes(2, "little"))
        for raw in range(1 << (bit + 1)):
            assert decode(raw, bit) == feetech.decode(register, raw.to_bytes(2, "little")), (bit, hex(raw))
        for value in (limit + 1, limit + 1000, 1 << 20, 2 ** 31 - 1):
            assert encode(value, bit) == limit and encode(-value, bit) == limit | 1 << bit, (bit, value)
            with pytest.raises(feetech.ProtocolError):
                feetech.encode(register, -value)


def test_raw_values_with_bits_above_the_sign_decode_alike(c):
    """Bits above the sign carry nothing on either side (present_load raw 0x0800 is 0, 0x0C00 is -0)."""
    for bit in (10, 11):
        register = next(r for r in R.values() if r.sign_bit == bit)
        for raw in range(1 << (bit + 1), 1 << 16, 7):
            assert c.lib.feetech_decode_signed(raw, bit) == feetech.decode(register, raw.to_bytes(2, "little")), \
                (register.name, hex(raw))


def _status_packet(rng, no_ff: bool = False) -> tuple[Packet, bytes]:
    while True:
        servo_id = int(rng.integers(0, feetech.BROADCAST_ID + 1))
        n = int(rng.integers(0, 12)) if rng.random() < 0.9 else int(rng.integers(0, feetech.MAX_PARAMETERS + 1))
        parameters = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        error = int(rng.choice([0, 0, 0x20, int(rng.integers(0, 256))]))
        raw = feetech.packet(servo_id, error, parameters)
        if not no_ff or 0xFF not in raw[2:]:
            return Packet(servo_id, error, parameters), raw


def _noise(rng, without: int, most: int = 12) -> bytes:
    noise = rng.integers(0, 255, int(rng.integers(0, most + 1)), dtype=np.uint8)
    noise[noise >= without] += 1  # every byte but `without`
    return noise.tobytes()


def _chunks(rng, data: bytes):
    at = 0
    while at < len(data):
        step = int(rng.integers(1, 20))
        yield data[at:at + step]
        at += step


def test_c_status_parser_finds_what_python_finds_between_noise(c):
    """400 status packets (parameters may hold 0xFF) between noise bytes without 0xFF, fed one byte at a time:
    the C parser returns exactly the sent packets, as PacketReader does (fed in random chunks)."""
    rng = np.random.default_rng(2)
    sent, stream = [], bytearray()
    for _ in range(400):
        stream += _noise(rng, 0xFF)
        packet, raw = _status_packet(rng)
        sent.append(packet)
        stream += raw
    stream += _noise(rng, 0xFF)
    parser = Parser(c, "feetech")
    found = [Packet(i, e, p) for _, i, e, _, p in parser.feed(bytes(stream))]
    reader = PacketReader()
    expected = [p for chunk in _chunks(rng, bytes(stream)) for p in reader.feed(chunk)]
    assert found == expected == sent
    assert parser.bad == 0


def test_a_packet_with_a_flipped_bit_is_rejected_by_both_and_the_next_still_parses(c):
    """One bit flipped in the id, error, a parameter or the checksum of every third packet (packets without
    0xFF after the header, so that Python's re-scan of the rejected bytes finds no false header): both sides
    reject exactly those and return every other packet."""
    rng = np.random.default_rng(3)
    sent, stream, flipped = [], bytearray(), 0
    for k in range(300):
        stream += _noise(rng, 0xFF)
        packet, raw = _status_packet(rng, no_ff=k % 3 == 0)
        if k % 3:
            sent.append(packet)
        else:
            raw = bytearray(raw)
            while True:
                at = int(rng.choice([2, *range(4, len(raw))]))  # not the header, not the length
                bit = 1 << int(rng.integers(8))
                if raw[at] ^ bit != 0xFF:
                    break
            raw[at] ^= bit
            flipped += 1
        stream += raw
    parser, reader = Parser(c, "feetech"), PacketReader()
    found = [Packet(i, e, p) for _, i, e, _, p in parser.feed(bytes(stream))]
    expected = [p for chunk in _chunks(rng, bytes(stream)) for p in reader.feed(chunk)]
    assert found == expected == sent
    assert parser.bad == flipped == 100 and reader.discarded > 0


# ---------------------------------------------------------------------------------------------------------------
# 3. The host link


def test_crc16_is_ccitt_false_on_both_sides(c):
    assert c.crc16(b"123456789") == host_link.crc16(b"123456789") == 0x29B1  # the catalogue's check value
    assert c.crc16(b"") == 0xFFFF
    rng = np.random.default_rng(4)
    for _ in range(300):
        data = rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8).tobytes()
        expected = binascii.crc_hqx(data, 0xFFFF)  # the standard library's CRC-CCITT, an independent one
        assert c.crc16(data) == host_link.crc16(data) == expected
        cut = int(rng.integers(0, len(data) + 1))
        assert c.lib.host_crc16_update(c.crc16(data[:cut]), data[cut:], len(data) - cut) == expected


def test_c_frames_equal_python_frames(c):
    rng = np.random.default_rng(5)
    for _ in range(500):
        message_type, sequence = (int(x) for x in rng.integers(0, 256, 2))
        payload = rng.integers(0, 256, int(rng.integers(0, host_link.MAX_PAYLOAD + 1)), dtype=np.uint8).tobytes()
        frame = c.frame(message_type, sequence, payload)
        assert frame == host_link.frame(message_type, sequence, payload)
        body = bytes((message_type, sequence, len(payload))) + payload
        assert frame == b"\xa5\x5a" + body + binascii.crc_hqx(body, 0xFFFF).to_bytes(2, "little")
    assert c.frame(1, 0, bytes(65)) == b""
    with pytest.raises(host_link.LinkError):
        host_link.frame(1, 0, bytes(65))


def _frame(rng, no_a5: bool = False) -> tuple[Frame, bytes]:
    while True:
        message_type = int(rng.choice([*host_link.MessageType, int(rng.integers(0, 256))]))
        sequence = int(rng.integers(0, 256))
        payload = rng.integers(0, 256, int(rng.integers(0, host_link.MAX_PAYLOAD + 1)), dtype=np.uint8).tobytes()
        raw = host_link.frame(message_type, sequence, payload)
        if not no_a5 or 0xA5 not in raw[2:]:
            return Frame(message_type, sequence, payload), raw


def test_c_frame_parser_finds_what_python_finds_between_noise(c):
    rng = np.random.default_rng(6)
    sent, stream = [], bytearray()
    for _ in range(400):
        stream += _noise(rng, 0xA5)
        frame, raw = _frame(rng)
        sent.append(frame)
        stream += raw
    parser, reader = Parser(c, "host"), FrameReader()
    found = [Frame(t, s, p) for _, t, s, _, p in parser.feed(bytes(stream))]
    expected = [f for chunk in _chunks(rng, bytes(stream)) for f in reader.feed(chunk)]
    assert found == expected == sent
    assert parser.bad == 0


def test_a_frame_with_a_flipped_bit_is_rejected_by_both_and_the_next_still_parses(c):
    """One bit flipped in the type, sequence, payload or CRC of every third frame (frames without 0xA5 after the
    sync, for the same reason as above)."""
    rng = np.random.default_rng(7)
    sent, stream, flipped = [], bytearray(), 0
    for k in range(300):
        stream += _noise(rng, 0xA5)
        frame, raw = _frame(rng, no_a5=k % 3 == 0)
        if k % 3:
            sent.append(frame)
        else:
            raw = bytearray(raw)
            while True:
                at = int(rng.choice([2, 3, *range(5, len(raw))]))  # not the sync, not the length
                bit = 1 << int(rng.integers(8))
                if raw[at] ^ bit != 0xA5:
                    break
            raw[at] ^= bit
            flipped += 1
        stream += raw
    parser, reader = Parser(c, "host"), FrameReader()
    found = [Frame(t, s, p) for _, t, s, _, p in parser.feed(bytes(stream))]
    expected = [f for chunk in _chunks(rng, bytes(stream)) for f in reader.feed(chunk)]
    assert found == expected == sent
    assert parser.bad == flipped == 100 and reader.discarded > 0


def _layout(message) -> dict[str, tuple[int, str, int]]:
    """{field: (offset, C type, count)} of HOST_<MESSAGE>_<FIELD> in the checked-in host_protocol.h."""
    prefix, header = f"HOST_{message.TYPE.name}_", (ARM / "host_protocol.h").read_text()
    fields = {m[1].lower(): (int(m[2]), m[3], int(m[4])) for m in
              re.finditer(rf"^#define {prefix}(\w+) (\d+)u /\* (\w+)\[(\d+)\] \*/$", header, re.MULTILINE)}
    size = re.search(rf"^#define {prefix}SIZE (\d+)u$", header, re.MULTILINE)
    assert size and int(size[1]) == struct.calcsize(message.FORMAT), message
    assert list(fields) == [name for name, _, _ in message.FIELDS if not name.startswith("_")], message
    return fields


CODES = {"float": "f", "uint32_t": "I", "uint8_t": "B"}


def test_payloads_read_at_the_c_headers_offsets_are_python_payloads():
    """The C reads INPUTS and writes BOOT and TELEMETRY at host_protocol.h's offsets: an INPUTS payload from
    Inputs.pack read there gives its numbers; BOOT and TELEMETRY payloads written there give
    Boot.unpack/Telemetry.unpack the numbers written."""
    rng = np.random.default_rng(8)
    layout = _layout(host_link.Inputs)
    for _ in range(100):
        position, goal = rng.normal(0, 1, 3).astype(np.float32), rng.normal(0, 1, 3).astype(np.float32)
        flags = int(rng.integers(0, 256))
        payload = host_link.Inputs(tuple(map(float, position)), tuple(map(float, goal)), flags).pack()
        read = {name: struct.unpack_from(f"<{count}{CODES[kind]}", payload, offset)
                for name, (offset, kind, count) in layout.items()}
        assert read == {"object_position": tuple(map(float, position)), "goal": tuple(map(float, goal)),
                        "flags": (flags,)}
    for message in (host_link.Boot, host_link.Telemetry):
        layout = _layout(message)
        for _ in range(100):
            payload, values = bytearray(struct.calcsize(message.FORMAT)), {}
            for name, (offset, kind, count) in layout.items():
                if kind == "float":
                    numbers = tuple(map(float, rng.normal(0, 10, count).astype(np.float32)))
                else:
                    numbers = tuple(int(x) for x in rng.integers(0, 256 if kind == "uint8_t" else 2 ** 32, count))
                struct.pack_into(f"<{count}{CODES[kind]}", payload, offset, *numbers)
                values[name] = numbers if count > 1 else numbers[0]
            assert message.unpack(bytes(payload)) == message(**values)
    # anchors written out: the Inputs goal's x at byte 12, the Telemetry action after one pad byte at 8
    assert struct.unpack_from("<f", host_link.Inputs((0, 0, 0), (1.5, 0, 0), 0).pack(), 12) == (1.5,)
    assert _layout(host_link.Telemetry)["action"][0] == 8 and _layout(host_link.Inputs)["flags"][0] == 24


# ---------------------------------------------------------------------------------------------------------------
# 4. Fuzz

FUZZ_STRINGS = 20_000


def _fuzz_strings(seed: int = 9) -> list[bytes]:
    """Random lengths 0-300: a quarter plain random bytes, a quarter biased to 0xFF, 0xA5, 0x5A and small
    lengths, and half valid packets and frames with some bytes changed or cut off, amid such bytes."""
    rng, draw = np.random.default_rng(seed), random.Random(seed)
    special = np.array([0xFF, 0xFF, 0xFF, 0xA5, 0xA5, 0x5A, 0x00, 0x01, 0x02, 0x03, 0x04, 0x40, 0x41], np.uint8)
    pool = [_status_packet(rng)[1] for _ in range(300)] + [_frame(rng)[1] for _ in range(300)]
    lengths = rng.integers(0, 301, FUZZ_STRINGS)
    data = rng.integers(0, 256, (FUZZ_STRINGS, 300), dtype=np.uint8)
    biased = (rng.random(data.shape) < 0.5) & (np.arange(FUZZ_STRINGS) % 4 != 0)[:, None]
    data[biased] = rng.choice(special, int(biased.sum()))
    special = special.tolist()
    strings = []
    for k in range(FUZZ_STRINGS):
        n, row = int(lengths[k]), data[k].tobytes()
        if k % 2 == 0:
            strings.append(row[:n])
            continue
        pieces, size = [], 0
        while size < n:
            if draw.random() < 0.5:
                piece = bytearray(draw.choice(pool))
                for _ in range(draw.choice((0, 0, 1, 2))):
                    piece[draw.randrange(len(piece))] = draw.choice(special)
                if draw.random() < 0.2:
                    del piece[draw.randrange(len(piece)):]
            else:
                piece = row[size:size + draw.randrange(16)]
            pieces.append(bytes(piece))
            size += len(piece)
        strings.append(b"".join(pieces)[:n])
    return strings


def test_fuzz_both_c_parsers(c, tmp_path, record_property):
    """20,000 seeded byte strings through both C parsers in-process, and through a build under AddressSanitizer
    and UBSan (which also runs every builder into exactly sized buffers and the signed encoding at its
    extremes): no crash, no sanitizer report, the same counts; every packet the C accepts is the bytes
    before the byte that completed it and has a good checksum by feetech.checksum (and PacketReader reads it
    alike); every frame is host_link.frame of its fields (CRC by host_link.crc16); the Python readers never
    raise on the same strings and each packet or frame they return is in the string."""
    strings = _fuzz_strings()
    feetech_parser, host_parser = Parser(c, "feetech"), Parser(c, "host")
    packets = frames = 0
    for data in strings:
        feetech_parser.reset()
        for offset, servo_id, error, length, parameters in feetech_parser.feed(data):
            assert len(parameters) == length - 2 and offset >= length + 3
            raw = data[offset - length - 3:offset + 1]
            assert raw == feetech.HEADER + bytes((servo_id, length, error)) + parameters + data[offset:offset + 1]
            assert feetech.checksum(raw[2:-1]) == raw[-1], raw.hex()
            assert PacketReader().feed(raw) == [Packet(servo_id, error, parameters)], raw.hex()
            packets += 1
        host_parser.reset()
        for offset, message_type, sequence, length, payload in host_parser.feed(data):
            assert len(payload) == length <= host_link.MAX_PAYLOAD and offset >= length + 6
            raw = data[offset - length - 6:offset + 1]
            assert raw == host_link.frame(message_type, sequence, payload), raw.hex()
            assert FrameReader().feed(raw) == [Frame(message_type, sequence, payload)], raw.hex()
            frames += 1
        for packet in PacketReader().feed(data):
            assert feetech.packet(packet.servo_id, packet.code, packet.parameters) in data
        for frame in FrameReader().feed(data):
            assert host_link.frame(frame.message_type, frame.sequence, frame.payload) in data
    assert packets > 1000 and frames > 1000, (packets, frames)  # the fuzz reaches acceptance, not just noise

    program = _compile(tmp_path, "-O1", "-g", "-DTEST_MAIN", "-fsanitize=address,undefined",
                       "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", output="fuzz_arm_protocols")
    (tmp_path / "fuzz.bin").write_bytes(b"".join(len(s).to_bytes(2, "little") + s for s in strings))
    run = subprocess.run([str(program), str(tmp_path / "fuzz.bin")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr  # a sanitizer report exits non-zero
    assert run.stdout.split() == ["strings", str(FUZZ_STRINGS), "packets", str(packets), "frames", str(frames)]
    record_property("fuzz", f"arm protocol C parsers (in-process and sanitized): {FUZZ_STRINGS} inputs, "
                    f"{packets} packets and {frames} frames accepted, all valid, 0 crashes")
