"""A host's client for the SO-ARM100's Feetech STS servo bus over a serial port (pyserial): the same code talks
to the real arm through a USB serial adapter and to the simulated one (servo_sim.SimulatedSerialPort).

Joint values are in the calibration's units (rad for hinges, m of opening per finger for the gripper) and go
through `ServoJoint`'s map to and from position steps. Positions are read with one SYNC_READ for all servos,
as LeRobot reads an STS bus: one request instead of one per servo saves six request packets and turnarounds
per read, and a missing servo still shows as the status packet that does not come. A servo that does not
answer within the timeout raises `ServoTimeout`, one that answers with error bits `ServoError`, both naming it.
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple, Sequence

import numpy as np

from robo_rl.export import feetech
from robo_rl.export.errors import ExportError
from robo_rl.export.feetech import (BROADCAST_ID, ERROR_NAMES, MAX_ID, REGISTERS, Instruction, PacketReader,
                                    ProtocolError, Register)
from robo_rl.export.servo_calibration import ServoJoint

STATUS_OVERHEAD = 6  # header (2), id, length, error, checksum around a status packet's data


class ServoTimeout(ProtocolError):
    """A servo (or the adapter's echo) did not answer in time; `servo_id` names it."""

    def __init__(self, servo_id: int, message: str):
        super().__init__(message)
        self.servo_id = servo_id


class ServoError(ProtocolError):
    """A servo answered with error bits set; `servo_id` and `bits` say which and what."""

    def __init__(self, servo_id: int, bits: int):
        names = [name for bit, name in ERROR_NAMES.items() if bits & bit] or ["unknown"]
        super().__init__(f"servo {servo_id} reports error bits 0x{bits:02X} ({', '.join(names)})")
        self.servo_id, self.bits = servo_id, bits


class BusState(NamedTuple):
    """Joint positions and velocities, calibration order, in the calibration's units (and per second)."""

    positions: np.ndarray
    velocities: np.ndarray


class ServoBusClient:
    """One servo bus behind a pyserial-like `port` (write, read(n), reset_input_buffer, timeout)."""

    def __init__(self, port: Any, calibration: Sequence[ServoJoint], timeout_s: float = 0.02, echo: bool = False):
        calibration = tuple(calibration)
        ids = [j.servo_id for j in calibration]
        if not ids or len(set(ids)) != len(ids) or not all(0 <= i <= MAX_ID for i in ids):
            raise ExportError(f"servo ids {ids} must be distinct, in [0, {MAX_ID}], and at least one")
        if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ExportError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.port, self.calibration, self.timeout_s, self.echo = port, calibration, float(timeout_s), bool(echo)
        self.port.timeout = self.timeout_s  # so that no read blocks for longer than one answer may take

    @classmethod
    def open(cls, device: str, calibration: Sequence[ServoJoint], baud: int = 1_000_000, timeout_s: float = 0.02,
             echo: bool = False) -> ServoBusClient:
        """A client on the serial device (e.g. /dev/ttyACM0, or a pyserial URL such as socket://host:port)."""
        import serial  # only here: a client on another port object does not need pyserial

        return cls(serial.serial_for_url(device, baudrate=baud, timeout=timeout_s), calibration, timeout_s, echo)

    def close(self) -> None:
        """Close the port."""
        self.port.close()

    # ----------------------------------------------------------------- single servos
    def ping(self, servo_id: int) -> bool:
        """Whether the servo answers a PING (ServoError if it answers with error bits)."""
        try:
            self._transact(feetech.packet(_unicast(servo_id), Instruction.PING), [servo_id], 0)
        except ServoTimeout:
            return False
        return True

    def read_register(self, servo_id: int, name: str) -> int:
        """One register's value (REGISTERS name) from one servo."""
        register = _register(name)
        (data,) = self._transact(feetech.read(_unicast(servo_id), register), [servo_id], register.size)
        return feetech.decode(register, data)

    def write_register(self, servo_id: int, name: str, value: int) -> None:
        """Write one register of one servo and wait for its status packet (BROADCAST_ID: every servo, no
        answer)."""
        register = _register(name)
        request = feetech.write(servo_id, register, value)
        self._transact(request, [] if servo_id == BROADCAST_ID else [servo_id], 0)

    # ----------------------------------------------------------------- the arm
    def read_positions(self) -> np.ndarray:
        """Every joint's position (one SYNC_READ of present_position)."""
        register = REGISTERS["present_position"]
        answers = self._sync_read(register, register.size)
        return np.array([j.to_value(feetech.decode(register, data)) for j, data in zip(self.calibration, answers)])

    def read_state(self) -> BusState:
        """Every joint's position and velocity (one SYNC_READ of present_position and present_speed, which
        are adjacent registers)."""
        position, speed = REGISTERS["present_position"], REGISTERS["present_speed"]
        answers = self._sync_read(position, position.size + speed.size)
        positions = [j.to_value(feetech.decode(position, data[:position.size]))
                     for j, data in zip(self.calibration, answers)]
        velocities = [feetech.decode(speed, data[position.size:]) / j.steps_per_unit
                      for j, data in zip(self.calibration, answers)]
        return BusState(np.array(positions), np.array(velocities))

    def write_goal_positions(self, values: Sequence[float]) -> None:
        """Every joint's goal (calibration order) in one SYNC_WRITE, each rounded to a step and clipped to its
        servo's bounds; ProtocolError, with nothing sent, for a wrong count or a value that is not finite."""
        try:
            goals = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ProtocolError(f"goal positions must be numbers, got {values!r}") from None
        if goals.shape != (len(self.calibration),):
            raise ProtocolError(f"goal positions take one value per joint ({len(self.calibration)}), "
                                f"got shape {goals.shape}")
        if not np.all(np.isfinite(goals)):
            raise ProtocolError(f"goal positions must be finite, got {goals.tolist()}")
        steps = {j.servo_id: j.to_steps(v) for j, v in zip(self.calibration, goals)}
        self._transact(feetech.sync_write(REGISTERS["goal_position"], steps), [], 0)

    def torque(self, enabled: bool) -> None:
        """Switch every servo's torque on or off, one confirmed WRITE each; every servo is tried before the
        first failure is raised, so that one missing servo does not keep the others from going limp."""
        if not isinstance(enabled, (bool, np.bool_)):
            raise ProtocolError(f"torque takes True or False, got {enabled!r}")
        failure: ProtocolError | None = None
        for joint in self.calibration:
            try:
                self.write_register(joint.servo_id, "torque_enable", int(enabled))
            except ProtocolError as error:  # ServoTimeout, ServoError
                failure = failure or error
        if failure is not None:
            raise failure

    # ----------------------------------------------------------------- the wire
    def _sync_read(self, first: Register, size: int) -> list[bytes]:
        ids = [j.servo_id for j in self.calibration]
        request = feetech.sync_read(first, size, ids)
        return self._transact(request, ids, size)

    def _transact(self, request: bytes, ids: list[int], size: int) -> list[bytes]:
        """Send `request`; the data of the status packets of `ids` (each `size` bytes), in that order."""
        self.port.reset_input_buffer()  # a late answer to an earlier request is not this one's
        self.port.write(request)
        deadline = time.monotonic() + self.timeout_s
        if self.echo:  # a half-duplex adapter that hears itself: the request comes back first
            echoed = self._read_bytes(len(request), deadline)
            if echoed != request:
                raise ServoTimeout(request[2], f"the adapter did not echo the request to servo {request[2]} "
                                               f"within {1e3 * self.timeout_s:g} ms (got {echoed.hex()})")
        answers: dict[int, feetech.Packet] = {}
        reader, pending = PacketReader(), len(ids) * (STATUS_OVERHEAD + size)
        while len(answers) < len(ids):
            chunk = self.port.read(max(1, pending))
            if chunk:
                pending -= len(chunk)
                answers.update((p.servo_id, p) for p in reader.feed(chunk) if p.servo_id in ids)
            elif time.monotonic() >= deadline:
                missing = [i for i in ids if i not in answers]
                raise ServoTimeout(missing[0], f"servo{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} "
                                               f"did not answer within {1e3 * self.timeout_s:g} ms")
        for servo_id in ids:
            answer = answers[servo_id]
            if answer.code:
                raise ServoError(servo_id, answer.code)
            if len(answer.parameters) != size:
                raise ProtocolError(f"servo {servo_id} answered {len(answer.parameters)} bytes, expected {size}")
        return [answers[i].parameters for i in ids]

    def _read_bytes(self, count: int, deadline: float) -> bytes:
        received = bytearray()
        while len(received) < count:
            chunk = self.port.read(count - len(received))
            if chunk:
                received += chunk
            elif time.monotonic() >= deadline:
                break
        return bytes(received)


def _register(name: str) -> Register:
    """The register called `name`; ProtocolError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in REGISTERS:
        raise ProtocolError(f"unknown register {name!r}; known: {', '.join(REGISTERS)}")
    return REGISTERS[name]


def _unicast(servo_id: int) -> int:
    """`servo_id` if it addresses one servo (an answer is expected); ProtocolError otherwise."""
    if isinstance(servo_id, bool) or not isinstance(servo_id, (int, np.integer)) or not 0 <= servo_id <= MAX_ID:
        raise ProtocolError(f"servo id must be an integer in [0, {MAX_ID}], got {servo_id!r}")
    return int(servo_id)
