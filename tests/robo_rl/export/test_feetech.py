"""The Feetech SCS/STS protocol (robo_rl.export.feetech) against packets worked out by hand from Feetech's
SCServo SDK (SCS.cpp's writeBuf and syncWrite, SMS_STS.cpp's WritePosEx and ReadPos), not against this
module's own inverse."""

from __future__ import annotations

import numpy as np
import pytest

from robo_rl.export.feetech import (REGISTERS, Instruction, Packet, PacketReader, ProtocolError, decode, encode,
                                    packet, read, sync_write, write, write_bytes)

R = REGISTERS


def test_write_pos_ex_is_the_sdks_packet():
    # SMS_STS::WritePosEx(1, 2048, 1000, 50): genWrite(1, SMS_STS_ACC = 41, [50, 0x00, 0x08, 0, 0, 0xE8, 0x03], 7)
    # -> FF FF id=01 len=7+3=0A WRITE=03 addr=29 data..., checksum ~(1+10+3+41+50+8+232+3) & 0xFF = 0xA3
    data = encode(R["acceleration"], 50) + encode(R["goal_position"], 2048) + encode(R["goal_time"], 0) \
        + encode(R["goal_speed"], 1000)
    assert write_bytes(1, R["acceleration"], data) == bytes.fromhex("FFFF 01 0A 03 29 32 0008 0000 E803 A3")


def test_a_negative_position_is_sign_magnitude_at_bit_15():
    # WritePosEx: if (Position < 0) { Position = -Position; Position |= (1 << 15); }, then Host2SCS low byte first
    assert encode(R["goal_position"], -100) == bytes((0x64, 0x80))
    assert decode(R["present_position"], bytes((0x64, 0x80))) == -100
    assert decode(R["present_load"], (1000 | 1 << 10).to_bytes(2, "little")) == -1000  # ReadLoad: bit 10


def test_read_present_position_and_its_status_packet():
    # ReadPos: Read(1, SMS_STS_PRESENT_POSITION_L = 56, 2): FF FF 01 len=04 READ=02 38 02, ~(1+4+2+56+2) = 0xBE
    assert read(1, R["present_position"]) == bytes.fromhex("FFFF0104023802BE")
    # the servo's answer: FF FF 01 len=04 error=00 00 08 (2048), ~(1+4+0+0+8) = 0xF2
    (answer,) = PacketReader().feed(bytes.fromhex("FFFF0104000008F2"))
    assert answer == Packet(1, 0, b"\x00\x08") and decode(R["present_position"], answer.parameters) == 2048


def test_sync_write_is_the_sdks_broadcast():
    # syncWrite(ID = [1, 2], IDN = 2, MemAddr = 42, nDat, nLen = 2): FF FF FE mesLen = (2+1)*2+4 = 0A 83 2A 02
    # 01 00 08 02 00 04, checksum ~(0xFE + 0x0A + 0x83 + 0x2A + 2 + 1 + 8 + 2 + 4) & 0xFF = 0x39
    assert sync_write(R["goal_position"], {1: 2048, 2: 1024}) == bytes.fromhex("FFFFFE0A832A0201000802000439")


def test_the_reader_finds_packets_in_any_chunking_and_skips_garbage_and_corruption():
    first, second = write(3, R["torque_enable"], 1), read(4, R["present_speed"])
    corrupt = bytearray(write(5, R["goal_speed"], -300))
    corrupt[6] ^= 0x10  # a flipped bit in the data: the checksum fails
    stream = b"\x00\x13\xff" + first + bytes(corrupt) + b"\xff" + second
    reader, found = PacketReader(), []
    for byte in stream:  # one byte at a time, as a UART delivers it
        found += reader.feed(bytes((byte,)))
    assert [(p.servo_id, p.code) for p in found] == [(3, Instruction.WRITE), (4, Instruction.READ)]
    assert found[0].parameters == bytes((40, 1)) and reader.discarded > 0
    assert PacketReader().feed(stream) == found  # and all at once


def test_values_and_packets_the_protocol_cannot_carry_are_refused():
    with pytest.raises(ProtocolError, match="goal_position must lie in"):
        encode(R["goal_position"], 1 << 15)
    with pytest.raises(ProtocolError, match=r"torque_enable must lie in \[0, 255\]"):
        encode(R["torque_enable"], -1)
    with pytest.raises(ProtocolError, match="present_position is read-only"):
        write(1, R["present_position"], 0)
    with pytest.raises(ProtocolError, match="servo id"):
        packet(0xFF, Instruction.PING)
    with pytest.raises(ProtocolError, match="servo id"):
        sync_write(R["goal_position"], {0xFE: 0})
    with pytest.raises(ProtocolError, match="takes 2 bytes"):
        decode(R["present_position"], b"\x00")
    # a careless caller's NaN, fraction, flag or text is refused, never rounded onto the bus
    for value in (float("nan"), 2047.5, True, "2048", None):
        with pytest.raises(ProtocolError, match="goal_position must be a whole number"):
            write(1, R["goal_position"], value)
    assert encode(R["goal_position"], 2048.0) == encode(R["goal_position"], 2048)
    with pytest.raises(ProtocolError, match="one byte"):
        packet(1, 0x103)
    with pytest.raises(ProtocolError, match="read size"):
        read(1, R["present_position"], 0)
    with pytest.raises(ProtocolError, match="servo id must be a whole number"):
        write(1.5, R["torque_enable"], 1)


def test_packets_survive_a_noisy_line():
    """Valid packets between bursts of random bytes (a line with noise, a servo answering late): the reader
    never raises and recovers nearly all of them; a false header costs at most the packet it overlaps."""
    rng = np.random.default_rng(0)
    sent, stream = [], bytearray()
    for i in range(500):
        stream += rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8).tobytes()
        sent.append(write(i % 8, R["goal_position"], int(rng.integers(-4095, 4096))))
        stream += sent[-1]
    reader, found = PacketReader(), []
    for start in range(0, len(stream), 7):
        found += reader.feed(stream[start:start + 7])
    wanted = {bytes(p) for p in sent}
    recovered = [p for p in found if write_bytes(p.servo_id, R["goal_position"], p.parameters[1:]) in wanted]
    assert len(recovered) >= 0.97 * len(sent), (len(recovered), len(found))
