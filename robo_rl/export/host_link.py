"""The arm firmware's host link, defined once: a framed, checksummed protocol on the board's second UART that
carries what the microcontroller cannot sense itself (the cube's pose from a camera, the reach target, the
person's enable; its INPUTS frames are the host's heartbeat) and brings back what it decided. The firmware's C header is generated from this module
(`python -m robo_rl.export.host_link > firmware/arm/host_protocol.h`).

Frame: 0xA5 0x5A, type, sequence, payload length, payload, CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF,
little-endian) over type, sequence, length and payload. Payloads are packed little-endian structs:

- INPUTS (host to board, one per control tick: it also clocks the loop and is the heartbeat): the object's
  position [m, world], the goal [m, world] (the reach target; pick-cube derives its goal on the board) and
  flags: NEW_EPISODE (the scene was reset: the policy starts over), ENABLE (the host allows motion).
- BOOT (board to host, once): self-test failures and worst error, servos found, and the SysTick ticks of a
  400,000-instruction loop (to turn the tick counts below into instructions).
- TELEMETRY (board to host, one per tick): tick, safety state and its reason, the policy's status, the
  action, the joint command (arm joints [rad], gripper opening [m]), and the SysTick ticks the tick spent
  deciding (observation, policy, kinematics) and building and parsing servo packets (waits excluded), and
  the deepest stack used since reset.
"""

from __future__ import annotations

import binascii
import dataclasses
import enum
import math
import struct
from typing import ClassVar, Iterable

SYNC = b"\xa5\x5a"
MAX_PAYLOAD = 64
CRC_POLY, CRC_INIT = 0x1021, 0xFFFF
JOINT_SLOTS = 7  # joint commands in TELEMETRY (up to 6 arm joints, then the gripper; unused slots 0)
CALIBRATION_INSTRUCTIONS = 400_000  # the boot's timing loop: 200,000 iterations of subs + bne


class LinkError(ValueError):
    """A message or frame the host link cannot carry."""


class MessageType(enum.IntEnum):
    """Frame types: host to board below 0x80, board to host from 0x80."""

    INPUTS = 0x01
    BOOT = 0x80
    TELEMETRY = 0x81


class InputFlag(enum.IntFlag):
    """INPUTS flags."""

    NEW_EPISODE = 0x01
    ENABLE = 0x02


class SafetyState(enum.IntEnum):
    """What the board does with the arm."""

    RUN = 0        # the policy commands the servos
    HOLD = 1       # goals held at the positions where holding began, torque on
    TORQUE_OFF = 2  # torque off (latched: a servo reported a fault); the host's ENABLE after a disable re-arms


class Reason(enum.IntEnum):
    """Why the board is in its state (OK while running)."""

    OK = 0
    BOOT = 1               # no INPUTS yet
    HOST_TIMEOUT = 2       # no valid INPUTS within the host timeout (stale, corrupt or missing frames)
    HOST_DISABLED = 3      # INPUTS without ENABLE
    BAD_HOST_DATA = 4      # non-finite or out-of-workspace object or goal
    SERVO_TIMEOUT = 5      # a servo did not answer in time (or answered garbage)
    SERVO_ERROR = 6        # a servo's status packet carried error bits
    BAD_SERVO_DATA = 7     # a position outside the calibrated travel
    POLICY_FAULT = 8       # the generated policy returned a non-OK status
    SELF_TEST_FAILED = 9   # the boot self-test over the bundle's recorded pairs failed: never runs


@dataclasses.dataclass(frozen=True)
class Inputs:
    """INPUTS: one control tick's outside information."""

    object_position: tuple[float, float, float]
    goal: tuple[float, float, float]
    flags: int
    TYPE: ClassVar[MessageType] = MessageType.INPUTS
    FORMAT: ClassVar[str] = "<3f3fB"
    FIELDS: ClassVar[tuple[tuple[str, str, int], ...]] = (("object_position", "float", 3), ("goal", "float", 3),
                                                          ("flags", "uint8_t", 1))

    def pack(self) -> bytes:
        """The payload."""
        return struct.pack(self.FORMAT, *self.object_position, *self.goal, self.flags)

    @classmethod
    def unpack(cls, payload: bytes) -> "Inputs":
        """From a payload (LinkError for a wrong length)."""
        v = _unpack(cls, payload)
        return cls(tuple(v[0:3]), tuple(v[3:6]), v[6])


@dataclasses.dataclass(frozen=True)
class Boot:
    """BOOT: the board's self-test verdict."""

    self_test_failures: int
    servos_found: int
    self_test_max_error_e9: int  # worst error over the recorded pairs (policy, and chain in m), in 1e-9
    calibration_ticks: int  # SysTick ticks of CALIBRATION_INSTRUCTIONS instructions
    TYPE: ClassVar[MessageType] = MessageType.BOOT
    FORMAT: ClassVar[str] = "<BBII"
    FIELDS: ClassVar[tuple[tuple[str, str, int], ...]] = (("self_test_failures", "uint8_t", 1),
                                                          ("servos_found", "uint8_t", 1),
                                                          ("self_test_max_error_e9", "uint32_t", 1),
                                                          ("calibration_ticks", "uint32_t", 1))

    def pack(self) -> bytes:
        """The payload."""
        return struct.pack(self.FORMAT, self.self_test_failures, self.servos_found, self.self_test_max_error_e9,
                           self.calibration_ticks)

    def instructions(self, ticks: int) -> float:
        """SysTick ticks as instructions (exact under QEMU -icount, where time advances per instruction)."""
        return ticks * CALIBRATION_INSTRUCTIONS / max(self.calibration_ticks, 1)

    @classmethod
    def unpack(cls, payload: bytes) -> "Boot":
        """From a payload (LinkError for a wrong length)."""
        return cls(*_unpack(cls, payload))


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """TELEMETRY: what one tick decided."""

    tick: int
    state: int
    reason: int
    policy_status: int
    action: tuple[float, ...]  # 4
    joint_command: tuple[float, ...]  # JOINT_SLOTS
    control_ticks: int  # SysTick ticks of the observation, policy and kinematics (Boot.instructions converts)
    bus_ticks: int  # of building and parsing servo packets (waiting for bytes excluded)
    stack_bytes: int  # the deepest stack the board has used since reset (0 where it cannot tell)
    TYPE: ClassVar[MessageType] = MessageType.TELEMETRY
    FORMAT: ClassVar[str] = f"<IBBBx4f{JOINT_SLOTS}fIII"
    FIELDS: ClassVar[tuple[tuple[str, str, int], ...]] = (
        ("tick", "uint32_t", 1), ("state", "uint8_t", 1), ("reason", "uint8_t", 1), ("policy_status", "uint8_t", 1),
        ("_pad", "uint8_t", 1), ("action", "float", 4), ("joint_command", "float", JOINT_SLOTS),
        ("control_ticks", "uint32_t", 1), ("bus_ticks", "uint32_t", 1), ("stack_bytes", "uint32_t", 1))

    def pack(self) -> bytes:
        """The payload."""
        return struct.pack(self.FORMAT, self.tick, self.state, self.reason, self.policy_status, *self.action,
                           *self.joint_command, self.control_ticks, self.bus_ticks, self.stack_bytes)

    @classmethod
    def unpack(cls, payload: bytes) -> "Telemetry":
        """From a payload (LinkError for a wrong length)."""
        v = _unpack(cls, payload)
        return cls(v[0], v[1], v[2], v[3], tuple(v[4:8]), tuple(v[8:8 + JOINT_SLOTS]), v[-3], v[-2], v[-1])


MESSAGES = {m.TYPE: m for m in (Inputs, Boot, Telemetry)}


def _unpack(cls: type, payload: bytes) -> tuple:
    size = struct.calcsize(cls.FORMAT)
    if len(payload) != size:
        raise LinkError(f"{cls.TYPE.name} carries {size} bytes, got {len(payload)}")
    return struct.unpack(cls.FORMAT, payload)


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE of `data` (check value of b"123456789": 0x29B1): the XMODEM polynomial from 0xFFFF,
    which is binascii's crc_hqx started at CRC_INIT."""
    return binascii.crc_hqx(bytes(data), CRC_INIT)


def frame(message_type: int, sequence: int, payload: bytes = b"") -> bytes:
    """One frame around a payload."""
    if not 0 <= message_type <= 0xFF or not 0 <= sequence <= 0xFF:
        raise LinkError(f"frame type and sequence are bytes, got {message_type}, {sequence}")
    if len(payload) > MAX_PAYLOAD:
        raise LinkError(f"a frame carries at most {MAX_PAYLOAD} payload bytes, got {len(payload)}")
    body = bytes((message_type, sequence, len(payload))) + bytes(payload)
    return SYNC + body + struct.pack("<H", crc16(body))


def inputs_frame(sequence: int, object_position: Iterable[float], goal: Iterable[float], flags: int) -> bytes:
    """An INPUTS frame; LinkError for non-finite numbers (a host must not send them: the board would hold)."""
    message = Inputs(tuple(float(x) for x in object_position), tuple(float(x) for x in goal), int(flags))
    if len(message.object_position) != 3 or len(message.goal) != 3:
        raise LinkError("object_position and goal take 3 numbers each")
    if not all(math.isfinite(x) for x in (*message.object_position, *message.goal)):
        raise LinkError(f"object_position and goal must be finite, got {message.object_position}, {message.goal}")
    if not 0 <= message.flags <= 0xFF:
        raise LinkError(f"flags are one byte, got {message.flags}")
    return frame(MessageType.INPUTS, sequence & 0xFF, message.pack())


@dataclasses.dataclass(frozen=True)
class Frame:
    """A received frame."""

    message_type: int
    sequence: int
    payload: bytes

    def message(self) -> Inputs | Boot | Telemetry | None:
        """The decoded message (None for HEARTBEAT and unknown types); LinkError for a wrong length."""
        kind = MESSAGES.get(self.message_type)
        return None if kind is None else kind.unpack(self.payload)


class FrameReader:
    """Frames from a byte stream of any chunking: bytes before a sync, over-long lengths and frames whose CRC
    fails are skipped (counted in `discarded`) and the search resumes one byte on."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.discarded = 0

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes; the complete frames they finish, in order."""
        self._buffer += data
        frames = []
        while True:
            start = self._buffer.find(SYNC)
            if start < 0:
                keep = 1 if self._buffer[-1:] == SYNC[:1] else 0
                self.discarded += len(self._buffer) - keep
                del self._buffer[:len(self._buffer) - keep]
                return frames
            self.discarded += start
            del self._buffer[:start]
            if len(self._buffer) < 5:
                return frames
            length = self._buffer[4]
            if length > MAX_PAYLOAD:
                self.discarded += 1
                del self._buffer[:1]
                continue
            end = 5 + length + 2
            if len(self._buffer) < end:
                return frames
            body = bytes(self._buffer[2:5 + length])
            if struct.unpack("<H", self._buffer[5 + length:end])[0] != crc16(body):
                self.discarded += 1
                del self._buffer[:1]
                continue
            frames.append(Frame(body[0], body[1], body[3:]))
            del self._buffer[:end]


def c_header() -> str:
    """The link's constants and payload layouts as a C header (firmware/arm/host_protocol.h)."""
    lines = [
        "/* host_protocol.h: the arm firmware's host link (frames, message layouts, safety states). Generated from",
        " * robo_rl/export/host_link.py by `python -m robo_rl.export.host_link`; do not edit (a test holds the two equal). */",
        "#ifndef HOST_PROTOCOL_H",
        "#define HOST_PROTOCOL_H",
        "",
        f"#define HOST_SYNC0 0x{SYNC[0]:02X}u",
        f"#define HOST_SYNC1 0x{SYNC[1]:02X}u",
        f"#define HOST_MAX_PAYLOAD {MAX_PAYLOAD}u",
        f"#define HOST_CRC_POLY 0x{CRC_POLY:04X}u",
        f"#define HOST_CRC_INIT 0x{CRC_INIT:04X}u",
        f"#define HOST_JOINT_SLOTS {JOINT_SLOTS}u",
        f"#define HOST_CALIBRATION_LOOPS {CALIBRATION_INSTRUCTIONS // 2}u",
        "",
    ]
    lines += [f"#define HOST_MSG_{m.name} 0x{m.value:02X}u" for m in MessageType]
    lines += [f"#define HOST_FLAG_{f.name} 0x{f.value:02X}u" for f in InputFlag]
    lines += [f"#define ARM_STATE_{s.name} {s.value}u" for s in SafetyState]
    lines += [f"#define ARM_REASON_{r.name} {r.value}u" for r in Reason]
    sizes = {"float": 4, "uint32_t": 4, "uint8_t": 1}
    for message in (Inputs, Boot, Telemetry):
        prefix = f"HOST_{message.TYPE.name}"
        lines.append("")
        offset = 0
        for name, kind, count in message.FIELDS:
            if not name.startswith("_"):
                lines.append(f"#define {prefix}_{name.upper()} {offset}u /* {kind}[{count}] */")
            offset += sizes[kind] * count
        assert offset == struct.calcsize(message.FORMAT), message
        lines.append(f"#define {prefix}_SIZE {offset}u")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(c_header(), end="")
