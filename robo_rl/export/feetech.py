"""The Feetech SCS/STS serial-bus servo protocol (STS3215-class servos of SO-ARM100 arms), defined once: the
instructions, the STS register map, how values are encoded, and packets built and parsed. The host's servo
bus client (servo_client), the simulated servo bus (servo_sim) and the firmware's C header (`c_header`)
are made from this module.

What it follows (Feetech's SCServo SDK: INST.h, SCS.cpp, SMS_STS.h, SMS_STS.cpp):
- an instruction packet is 0xFF 0xFF, id, length, instruction, parameters, checksum; length counts the
  parameters plus 2 (the instruction and the checksum); the checksum is the bitwise NOT of the low byte of
  the sum of id, length, instruction and parameters. A status packet is the same with the servo's error byte
  in place of the instruction. Id 0xFE is the broadcast id (no status packet comes back).
- READ's parameters are the first register and the byte count; WRITE's the first register and the bytes;
  SYNC_WRITE (broadcast) the first register, the bytes per servo, then each servo's id and bytes.
- STS servos are little-endian (the SDK's End = 0): the low byte at the lower address.
- signed values are sign-magnitude: the magnitude in the low bits and a direction bit (bit 15 for positions
  and speeds, bit 10 for the load, bit 11 for the position offset).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Iterable, Mapping

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFD              # 0..253 address one servo
MAX_PARAMETERS = 253       # the length byte counts parameters + 2 and stays a byte


class Instruction(enum.IntEnum):
    """Instruction codes (INST.h)."""

    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


@dataclasses.dataclass(frozen=True)
class Register:
    """One entry of the register map: its first address, size in bytes, whether the host may write it, and
    the bit that carries the sign of a sign-magnitude value (None: unsigned)."""

    name: str
    address: int
    size: int
    writable: bool
    sign_bit: int | None = None


# the STS series' map (SMS_STS.h); EEPROM entries first, then SRAM
REGISTERS: dict[str, Register] = {r.name: r for r in (
    Register("model", 3, 2, False),
    Register("id", 5, 1, True),
    Register("baud_rate", 6, 1, True),
    Register("min_angle_limit", 9, 2, True),
    Register("max_angle_limit", 11, 2, True),
    Register("cw_dead_band", 26, 1, True),
    Register("ccw_dead_band", 27, 1, True),
    Register("position_offset", 31, 2, True, sign_bit=11),
    Register("mode", 33, 1, True),
    Register("torque_enable", 40, 1, True),
    Register("acceleration", 41, 1, True),
    Register("goal_position", 42, 2, True, sign_bit=15),
    Register("goal_time", 44, 2, True),
    Register("goal_speed", 46, 2, True, sign_bit=15),
    Register("lock", 55, 1, True),
    Register("present_position", 56, 2, False, sign_bit=15),
    Register("present_speed", 58, 2, False, sign_bit=15),
    Register("present_load", 60, 2, False, sign_bit=10),
    Register("present_voltage", 62, 1, False),
    Register("present_temperature", 63, 1, False),
    Register("moving", 66, 1, False),
    Register("present_current", 69, 2, False),
)}
POSITION_STEPS_PER_TURN = 4096  # present_position and goal_position: 0..4095 over one turn
# Status packet error bits, as Feetech's SCServo SDK names them (protocol_packet_handler.py, ERRBIT_*)
ERROR_VOLTAGE = 0x01
ERROR_ANGLE = 0x02  # the SDK's "Angle sen error": the magnetic angle sensor
ERROR_OVERHEAT = 0x04
ERROR_OVERCURRENT = 0x08  # ERRBIT_OVERELE
ERROR_OVERLOAD = 0x20
# The SDK names no bit for a refused instruction or write; the simulated bus sets Dynamixel protocol 1.0's
# ERRBIT_INSTRUCTION (0x40), the protocol Feetech's is derived from (Dynamixel SDK protocol1_packet_handler)
ERROR_INSTRUCTION = 0x40
ERROR_NAMES = {ERROR_VOLTAGE: "voltage", ERROR_ANGLE: "angle sensor", ERROR_OVERHEAT: "overheat",
               ERROR_OVERCURRENT: "overcurrent", ERROR_OVERLOAD: "overload", ERROR_INSTRUCTION: "instruction"}


class ProtocolError(ValueError):
    """A value or packet the protocol cannot carry."""


def _whole(value: object, what: str) -> int:
    """`value` as an int if it is a whole number (NaN, 2.5, True or "3" are refused, not rounded)."""
    if isinstance(value, bool) or not hasattr(value, "__index__") and not (
            isinstance(value, float) and value.is_integer()):
        raise ProtocolError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def encode(register: Register, value: int) -> bytes:
    """`value` as the register's bytes (little-endian, sign-magnitude where the register is signed)."""
    value = _whole(value, register.name)
    if register.sign_bit is None:
        limit = (1 << (8 * register.size)) - 1
        if not 0 <= value <= limit:
            raise ProtocolError(f"{register.name} must lie in [0, {limit}], got {value}")
        raw = value
    else:
        limit = (1 << register.sign_bit) - 1
        if abs(value) > limit:
            raise ProtocolError(f"{register.name} must lie in [-{limit}, {limit}], got {value}")
        raw = abs(value) | ((1 << register.sign_bit) if value < 0 else 0)
    return raw.to_bytes(register.size, "little")


def decode(register: Register, data: bytes) -> int:
    """The register's bytes as a value (the inverse of `encode`)."""
    if len(data) != register.size:
        raise ProtocolError(f"{register.name} takes {register.size} bytes, got {len(data)}")
    raw = int.from_bytes(data, "little")
    if register.sign_bit is None:
        return raw
    magnitude = raw & ((1 << register.sign_bit) - 1)  # bits above the sign carry nothing (as the firmware reads them)
    return -magnitude if raw & (1 << register.sign_bit) else magnitude


def checksum(body: bytes) -> int:
    """The checksum of a packet whose bytes after the header are `body` (id, length, instruction or error,
    parameters)."""
    return ~sum(body) & 0xFF


def packet(servo_id: int, code: int, parameters: bytes = b"") -> bytes:
    """An instruction packet (`code` an Instruction) or a status packet (`code` the servo's error byte)."""
    if not 0 <= _whole(servo_id, "servo id") <= BROADCAST_ID:
        raise ProtocolError(f"servo id must lie in [0, {BROADCAST_ID}], got {servo_id}")
    if not 0 <= _whole(code, "instruction or error code") <= 0xFF:
        raise ProtocolError(f"an instruction or error code is one byte, got {code}")
    if len(parameters) > MAX_PARAMETERS:
        raise ProtocolError(f"a packet carries at most {MAX_PARAMETERS} parameter bytes, got {len(parameters)}")
    body = bytes((int(servo_id), len(parameters) + 2, int(code))) + bytes(parameters)
    return HEADER + body + bytes((checksum(body),))


def write(servo_id: int, register: Register, value: int) -> bytes:
    """WRITE one register of one servo."""
    return write_bytes(servo_id, register, encode(register, value))


def write_bytes(servo_id: int, first: Register, data: bytes) -> bytes:
    """WRITE `data` from register `first` on (consecutive registers in one packet, as the SDK's WritePosEx
    writes acceleration, goal position, goal time and goal speed)."""
    if not first.writable:
        raise ProtocolError(f"{first.name} is read-only")
    return packet(servo_id, Instruction.WRITE, bytes((first.address,)) + bytes(data))


def read(servo_id: int, first: Register, size: int | None = None) -> bytes:
    """READ `size` bytes (the register's own size by default) from `first` on."""
    size = first.size if size is None else _whole(size, "read size")
    if not 1 <= size <= MAX_PARAMETERS - 1:  # the answer carries them as parameters
        raise ProtocolError(f"read size must lie in [1, {MAX_PARAMETERS - 1}], got {size}")
    return packet(servo_id, Instruction.READ, bytes((first.address, size)))


def sync_read(first: Register, size: int, servo_ids: Iterable[int]) -> bytes:
    """SYNC_READ `size` bytes from `first` on of several servos (one broadcast packet; each servo answers
    with its own status packet, in the order given)."""
    size = _whole(size, "read size")
    if not 1 <= size <= MAX_PARAMETERS - 1:
        raise ProtocolError(f"read size must lie in [1, {MAX_PARAMETERS - 1}], got {size}")
    ids = [_whole(i, "servo id") for i in servo_ids]
    if not all(0 <= i <= MAX_ID for i in ids):
        raise ProtocolError(f"servo ids must lie in [0, {MAX_ID}], got {ids}")
    return packet(BROADCAST_ID, Instruction.SYNC_READ, bytes((first.address, size, *ids)))


def sync_write(register: Register, values: Mapping[int, int]) -> bytes:
    """SYNC_WRITE one register of several servos in one broadcast packet ({servo id: value})."""
    if not register.writable:
        raise ProtocolError(f"{register.name} is read-only")
    parameters = bytearray((register.address, register.size))
    for servo_id, value in values.items():
        if not 0 <= _whole(servo_id, "servo id") <= MAX_ID:
            raise ProtocolError(f"servo id must lie in [0, {MAX_ID}], got {servo_id}")
        parameters += bytes((int(servo_id),)) + encode(register, value)
    return packet(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(parameters))


@dataclasses.dataclass(frozen=True)
class Packet:
    """A parsed packet: `code` is the instruction (from the host) or the error byte (from a servo)."""

    servo_id: int
    code: int
    parameters: bytes


class PacketReader:
    """Packets from a byte stream of any chunking: bytes before a header, and packets whose checksum fails,
    are skipped (counted in `discarded`), so one corrupt byte costs one packet, not the stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.discarded = 0  # bytes skipped

    def feed(self, data: Iterable[int] | bytes) -> list[Packet]:
        """Add received bytes; the complete packets they finish, in order."""
        self._buffer += bytes(data)
        packets = []
        while True:
            start = self._buffer.find(HEADER)
            if start < 0:  # keep a trailing 0xFF: it may begin the next header
                keep = 1 if self._buffer[-1:] == b"\xff" else 0
                self.discarded += len(self._buffer) - keep
                del self._buffer[:len(self._buffer) - keep]
                return packets
            self.discarded += start
            del self._buffer[:start]
            if len(self._buffer) < 4:
                return packets
            servo_id, length = self._buffer[2], self._buffer[3]
            if servo_id == 0xFF or length < 2:  # 0xFF 0xFF 0xFF: the header starts one byte later
                self.discarded += 1
                del self._buffer[:1]
                continue
            end = 4 + length
            if len(self._buffer) < end:
                return packets
            body = bytes(self._buffer[2:end - 1])
            if checksum(body) != self._buffer[end - 1]:
                self.discarded += 2  # not a packet: look for the next header past this one
                del self._buffer[:2]
                continue
            packets.append(Packet(servo_id, body[2], body[3:]))
            del self._buffer[:end]


def c_header() -> str:
    """The protocol's constants as a C header (firmware/arm/feetech_protocol.h): the header bytes, ids,
    instructions and each register's address, size and sign bit, from the definitions above."""
    lines = [
        "/* feetech_protocol.h: the Feetech SCS/STS servo protocol's constants. Generated from",
        " * robo_rl/export/feetech.py by `python -m robo_rl.export.feetech`; do not edit (a test holds the two equal). */",
        "#ifndef FEETECH_PROTOCOL_H",
        "#define FEETECH_PROTOCOL_H",
        "",
        f"#define FEETECH_HEADER_BYTE 0x{HEADER[0]:02X}u",
        f"#define FEETECH_BROADCAST_ID 0x{BROADCAST_ID:02X}u",
        f"#define FEETECH_MAX_ID 0x{MAX_ID:02X}u",
        f"#define FEETECH_MAX_PARAMETERS {MAX_PARAMETERS}u",
        f"#define FEETECH_POSITION_STEPS_PER_TURN {POSITION_STEPS_PER_TURN}u",
        "",
    ]
    lines += [f"#define FEETECH_INST_{i.name} 0x{i.value:02X}u" for i in Instruction]
    lines += [f"#define FEETECH_ERROR_{name.upper().replace(' ', '_')} 0x{bit:02X}u" for bit, name in ERROR_NAMES.items()]
    lines.append("")
    for r in REGISTERS.values():
        name = f"FEETECH_REG_{r.name.upper()}"
        lines.append(f"#define {name} {r.address}u")
        lines.append(f"#define {name}_SIZE {r.size}u")
        if r.sign_bit is not None:
            lines.append(f"#define {name}_SIGN_BIT {r.sign_bit}u")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(c_header(), end="")
