"""The simulated SO-ARM100's servos on their bus: the MuJoCo arm (sim.arm.joint_position.SimulatedArm) behind
Feetech STS3215 register tables that answer the STS protocol byte for byte, so that the host's bus client and
the firmware talk to it as to the real arm.

Each servo is a 256-byte register table laid out as `feetech.REGISTERS`. The bus parses the controller's
bytes with `feetech.PacketReader` (a corrupt packet is dropped unanswered, as a servo drops it) and answers
PING, READ and WRITE addressed to one of its servos with a status packet, SYNC_READ with one status packet per
listed servo in the order listed, and SYNC_WRITE and anything broadcast not at all. A goal position written
becomes the arm's command (the gripper's for the gripper servo); torque_enable 0 leaves that joint limp.
The present_* registers are the plant's state, refreshed before each answer. Time passes only through
`advance`, so the caller sets the lockstep of bus and physics; `bus_time_us` adds up what the traffic
would take on the wire.

What is simulated of the servo, and what is not: the goal is clipped to the angle limits (as the servo
bounds its motion range); acceleration, goal_time, goal_speed, position_offset, mode, dead bands, baud rate
changes, the lock and present_current are stored or read as zero but have no effect.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from robo_rl.export import feetech
from robo_rl.export.errors import ExportError
from robo_rl.export.feetech import BROADCAST_ID, REGISTERS, Instruction, Packet, PacketReader
from robo_rl.export.servo_calibration import ServoJoint
from robo_rl.export.feetech import ERROR_INSTRUCTION
from sim.arm.joint_position import ArmState, JointGains, SimulatedArm

# Model number the STS3215 reports at register 3 (LeRobot's lerobot/motors/feetech/tables.py,
# MODEL_NUMBER_TABLE["sts3215"] = 777)
STS3215_MODEL_NUMBER = 777
# baud_rate register codes (SCServo SDK SMS_STS.h: SMS_STS_1M 0 ... SMS_STS_38400 7)
BAUD_CODES = {1_000_000: 0, 500_000: 1, 250_000: 2, 128_000: 3, 115_200: 4, 76_800: 5, 57_600: 6, 38_400: 7}
SUPPLY_DECIVOLTS = 120  # present_voltage in 0.1 V: a 12 V supply
TEMPERATURE_C = 30  # present_temperature: a servo warm from running
MOVING_STEPS_PER_S = 5  # |present_speed| above which `moving` reads 1
# present_load in 0.1 % of the actuator's limit: the motors' ctrlrange (the 12 V STS3215's 30 kg cm stall
# torque, 2.94 N m), the gripper actuator's forcerange
LOAD_FULL_SCALE = 1000

# Joint PD gains standing in for the STS3215's position loop on the SO-ARM100 (SimulatedArm adds gravity
# compensation). kp 60 N m/rad reaches the 2.94 N m stall torque (the MJCF's ctrlrange) at 0.05 rad (about
# 3 degrees, 32 steps) of error and leaves at most 0.052 / 60 rad (0.6 step) of error to the MJCF's friction
# loss; of kd 1 and 2 N m s/rad, 1 overshot by 10-17 steps, 2 by under one: from home, a step of 0.2-0.5 rad
# on every joint at once settles within 0.3 step in 0.5 s.
SO_ARM100_SERVO_GAINS = JointGains(kp=(60.0,) * 5, kd=(2.0,) * 5)

_R = REGISTERS
_WRITABLE_BYTES = frozenset(a for r in _R.values() if r.writable for a in range(r.address, r.address + r.size))
_TABLE_SIZE = 256


class _Servo:
    """One servo: its joint, register table and the faults the tests give it."""

    def __init__(self, joint: ServoJoint, index: int, baud_code: int):
        self.joint, self.index = joint, index  # index into SimulatedArm.names
        self.table = bytearray(_TABLE_SIZE)
        self.plugged = True
        self.error_bits = 0
        self.registered: tuple[int, bytes] | None = None  # a REG_WRITE waiting for ACTION
        for name, value in (("model", STS3215_MODEL_NUMBER), ("id", joint.servo_id), ("baud_rate", baud_code),
                            ("min_angle_limit", joint.min_steps), ("max_angle_limit", joint.max_steps),
                            ("torque_enable", 0), ("present_voltage", SUPPLY_DECIVOLTS),
                            ("present_temperature", TEMPERATURE_C)):
            self.set(name, value)

    @property
    def servo_id(self) -> int:
        return self.table[_R["id"].address]

    def get(self, name: str) -> int:
        r = _R[name]
        return feetech.decode(r, bytes(self.table[r.address:r.address + r.size]))

    def set(self, name: str, value: int) -> None:
        r = _R[name]
        self.table[r.address:r.address + r.size] = feetech.encode(r, value)


class SimulatedServoBus:
    """The arm's servos on one half-duplex bus, one servo per calibration entry (arm joints and gripper).

    At power-up (construction) every servo's torque is off, so its joint is limp until the controller writes
    torque_enable 1, and its goal is the step it stands at, so that switching torque on holds the arm where it
    is: a controller that forgets to switch torque on sees the arm fall, not work. The angle limits hold the
    calibration's bounds, as its builders would have written them."""

    def __init__(self, arm: SimulatedArm, calibration: Sequence[ServoJoint], baud: int = 1_000_000,
                 return_delay_us: float = 0.0):
        model = arm.env.model
        gripper_actuator = model.actuator(arm.config.spec.gripper_actuator).id
        gripper_joint = model.joint(int(model.actuator_trnid[gripper_actuator, 0])).name
        expected = sorted((*arm.joints, gripper_joint))
        if sorted(j.joint for j in calibration) != expected:
            raise ExportError(f"the servo calibration's joints are {[j.joint for j in calibration]}, "
                              f"the simulated arm's are {[*arm.joints, gripper_joint]}")
        ids = [j.servo_id for j in calibration]
        if len(set(ids)) != len(ids) or not all(0 <= i <= feetech.MAX_ID for i in ids):
            raise ExportError(f"servo ids {ids} must be distinct and in [0, {feetech.MAX_ID}]")
        if baud not in BAUD_CODES:
            raise ExportError(f"baud must be one of the STS rates {sorted(BAUD_CODES)}, got {baud}")
        if not (math.isfinite(return_delay_us) and return_delay_us >= 0):
            raise ExportError(f"return_delay_us must be finite and >= 0, got {return_delay_us}")
        self.arm, self.baud, self.return_delay_us = arm, baud, float(return_delay_us)
        self.gripper_joint = gripper_joint
        self.servos = [_Servo(j, arm.names.index(j.joint), BAUD_CODES[baud]) for j in calibration]
        # full scale of present_load: the motors' torque limit, the gripper actuator's force limit
        self._load_limit = {arm.joints[i]: float(model.actuator_ctrlrange[model.actuator(a).id, 1])
                            for i, a in enumerate(arm.config.spec.actuators)}
        self._load_limit[gripper_joint] = float(np.max(np.abs(model.actuator_forcerange[gripper_actuator]))) or 1.0
        self._reader = PacketReader()
        self._cached_key: tuple | None = None
        self._cached_state: ArmState | None = None
        self._idles = 0
        self.bus_time_us = 0.0
        state = arm.state()
        for servo in self.servos:  # at power-up the goal is where the servo stands, torque off (limp)
            servo.set("goal_position", self._present_steps(servo, state))
        self._apply()

    # ----------------------------------------------------------------- the wire
    def feed(self, data: bytes) -> bytes:
        """Take the bytes the controller put on the bus; the status packets the servos answer, in order."""
        data = bytes(data)
        answers = b"".join(self._handle(p) for p in self._reader.feed(data))
        self.bus_time_us += self.transaction_us(data, answers)
        return answers

    def transaction_us(self, request: bytes, reply: bytes) -> float:
        """Microseconds on the wire: 10 bits per byte (start, 8 data, stop) at `baud`, and the return delay
        before each status packet of the reply."""
        statuses = len(PacketReader().feed(reply))
        return 10.0 * (len(request) + len(reply)) * 1e6 / self.baud + self.return_delay_us * statuses

    def advance(self, seconds: float) -> None:
        """Run the plant for `seconds` (round(seconds / dt) physics steps) under the servos' held goals; the
        bus idles meanwhile (`idle`)."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"advance needs a finite, non-negative time, got {seconds}")
        steps = round(seconds / self.arm.dt)
        if steps > 0:
            self.idle()
        for _ in range(steps):
            self.arm.step()

    def _state(self) -> ArmState:
        """The plant's state, read once per physics step and bus silence (every servo reads the same instant)."""
        key = (self.arm.steps, self._idles)
        if self._cached_key != key:
            self._cached_state, self._cached_key = self.arm.state(), key
        return self._cached_state

    def idle(self) -> None:
        """The bus went quiet for longer than a servo's byte timeout: a packet begun and not finished is
        dropped, as the servos' receivers drop it (a controller's next request then starts afresh). Call it too
        after changing the plant other than through `advance` (a reset)."""
        self._reader = PacketReader()
        self._idles += 1

    # ----------------------------------------------------------------- faults
    def unplug(self, servo_id: int) -> None:
        """Cut the servo's data line: it hears nothing and answers nothing, and holds its last goal."""
        self._servo(servo_id).plugged = False

    def plug(self, servo_id: int) -> None:
        """Connect an unplugged servo again."""
        self._servo(servo_id).plugged = True

    def set_error(self, servo_id: int, bits: int) -> None:
        """Report `bits` (ERROR_* of robo_rl.export.feetech) in every status packet of the servo until
        set to 0; only reported, the servo goes on working."""
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 0 <= bits <= 0xFF:
            raise feetech.ProtocolError(f"error bits are one byte, got {bits!r}")
        self._servo(servo_id).error_bits = int(bits)

    def _servo(self, servo_id: int) -> _Servo:
        for servo in self.servos:
            if servo.servo_id == servo_id:
                return servo
        raise feetech.ProtocolError(f"no servo {servo_id} on the bus (ids {[s.servo_id for s in self.servos]})")

    def _listening(self, servo_id: int) -> _Servo | None:
        return next((s for s in self.servos if s.servo_id == servo_id and s.plugged), None)

    # ----------------------------------------------------------------- instructions
    def _handle(self, p: Packet) -> bytes:
        """The status packets that answer one instruction packet."""
        if p.servo_id == BROADCAST_ID:
            return self._broadcast(p)
        servo = self._listening(p.servo_id)
        if servo is None:
            return b""
        ok, data = True, b""
        if p.code == Instruction.PING and not p.parameters:
            pass
        elif p.code == Instruction.READ and len(p.parameters) == 2:
            ok, data = self._read(servo, p.parameters[0], p.parameters[1], self._state())
        elif p.code == Instruction.WRITE:
            ok = self._write(servo, p.parameters)
        elif p.code == Instruction.REG_WRITE and _writable(p.parameters):
            servo.registered = (p.parameters[0], p.parameters[1:])
        elif p.code == Instruction.ACTION and not p.parameters:
            ok = self._action(servo)
        else:  # an unknown instruction, a malformed one, or a refused REG_WRITE
            ok = False
        return self._status(servo, ok, data)

    def _broadcast(self, p: Packet) -> bytes:
        """SYNC_READ (each listed servo answers, in the order listed), SYNC_WRITE, and WRITE, REG_WRITE or
        ACTION for every servo (no answer)."""
        listening = [s for s in self.servos if s.plugged]
        if p.code == Instruction.SYNC_READ and len(p.parameters) >= 3:
            address, size, state = p.parameters[0], p.parameters[1], self._state()
            answers = bytearray()
            for servo in filter(None, map(self._listening, p.parameters[2:])):
                answers += self._status(servo, *self._read(servo, address, size, state))
            return bytes(answers)
        if p.code == Instruction.SYNC_WRITE and len(p.parameters) >= 2:
            address, size, blocks = p.parameters[0], p.parameters[1], p.parameters[2:]
            if size and len(blocks) % (size + 1) == 0:  # a malformed one is dropped whole
                for start in range(0, len(blocks), size + 1):
                    servo = self._listening(blocks[start])
                    if servo is not None:
                        self._write(servo, bytes((address,)) + blocks[start + 1:start + 1 + size])
        elif p.code == Instruction.WRITE:
            for servo in listening:
                self._write(servo, p.parameters)
        elif p.code == Instruction.REG_WRITE and _writable(p.parameters):
            for servo in listening:
                servo.registered = (p.parameters[0], p.parameters[1:])
        elif p.code == Instruction.ACTION:
            for servo in listening:
                self._action(servo)
        return b""

    def _read(self, servo: _Servo, address: int, size: int, state: ArmState) -> tuple[bool, bytes]:
        """(True, the bytes) with the present_* registers refreshed; (False, b"") past the table's end."""
        if not 1 <= size <= feetech.MAX_PARAMETERS or address + size > _TABLE_SIZE:
            return False, b""
        self._refresh(servo, state)
        return True, bytes(servo.table[address:address + size])

    def _write(self, servo: _Servo, parameters: bytes) -> bool:
        """Write (first address, bytes...) into the table if every byte lands in a writable register, and
        pass the new goals and torque switches to the plant."""
        if not _writable(parameters):
            return False
        first, id_address = parameters[0], _R["id"].address
        if first <= id_address < first + len(parameters) - 1 and parameters[1 + id_address - first] > feetech.MAX_ID:
            return False  # an id no packet could address
        servo.table[parameters[0]:parameters[0] + len(parameters) - 1] = parameters[1:]
        self._apply()
        return True

    def _action(self, servo: _Servo) -> bool:
        """Carry out the servo's REG_WRITE; False (an instruction error, as Dynamixel 1.0 has it) without one."""
        if servo.registered is None:
            return False
        address, data = servo.registered
        servo.registered = None
        return self._write(servo, bytes((address,)) + data)

    def _status(self, servo: _Servo, ok: bool, data: bytes = b"") -> bytes:
        return feetech.packet(servo.servo_id, servo.error_bits | (0 if ok else ERROR_INSTRUCTION), data)

    # ----------------------------------------------------------------- the plant
    def _apply(self) -> None:
        """The registers' goals and torque switches as the arm's commands."""
        by_joint = {s.joint.joint: s for s in self.servos}
        goal = {name: s.joint.to_value(_clip_to_limits(s)) for name, s in by_joint.items()}
        self.arm.command_arm(np.array([goal[name] for name in self.arm.joints]))
        self.arm.command_gripper(goal[self.gripper_joint])
        drives = (*self.arm.joints, self.gripper_joint)
        self.arm.set_torque([by_joint[name].get("torque_enable") != 0 for name in drives])

    def _present_steps(self, servo: _Servo, state: ArmState) -> int:
        # the magnetic encoder reads one turn: a position past either end wraps round, it is not clipped
        steps = servo.joint.zero_steps + servo.joint.steps_per_unit * state.positions[servo.index]
        return round(steps) % feetech.POSITION_STEPS_PER_TURN

    def _refresh(self, servo: _Servo, state: ArmState) -> None:
        """present_position, present_speed, present_load and moving from the plant's state."""
        joint, i = servo.joint, servo.index
        speed = _bounded(joint.steps_per_unit * state.velocities[i], (1 << 15) - 1)
        # load along the servo's own direction of rotation, in 0.1 % of what the actuator can give
        direction = math.copysign(1.0, joint.steps_per_unit)
        load = _bounded(LOAD_FULL_SCALE * direction * state.efforts[i] / self._load_limit[joint.joint], LOAD_FULL_SCALE)
        servo.set("present_position", self._present_steps(servo, state))
        servo.set("present_speed", speed)
        servo.set("present_load", load)
        servo.set("moving", int(abs(speed) > MOVING_STEPS_PER_S))


class SimulatedSerialPort:
    """The part of pyserial's Serial that ServoBusClient uses, on a SimulatedServoBus: `write` puts the bytes
    on the bus and queues the servos' answers (after an echo of the request with `echo`, as some half-duplex
    adapters give), `read(n)` returns up to n queued bytes at once. Nothing waits: the simulated servos
    answer within the write."""

    def __init__(self, bus: SimulatedServoBus, echo: bool = False):
        self.bus, self.echo = bus, echo
        self.timeout: float | None = 0.0
        self._received = bytearray()

    def write(self, data: bytes) -> int:
        """Send `data`; the number of bytes sent."""
        data = bytes(data)
        answer = self.bus.feed(data)
        self._received += (data if self.echo else b"") + answer
        return len(data)

    def read(self, size: int = 1) -> bytes:
        """Up to `size` received bytes (none if none are queued)."""
        out = bytes(self._received[:size])
        del self._received[:size]
        return out

    @property
    def in_waiting(self) -> int:
        """Received bytes not read yet."""
        return len(self._received)

    def reset_input_buffer(self) -> None:
        """Drop the received bytes not read yet."""
        self._received.clear()

    def flush(self) -> None:
        """Wait until written bytes are out (they are at once: `write` delivers them)."""

    def close(self) -> None:
        """Nothing to release."""


def _writable(parameters: bytes) -> bool:
    """Whether a WRITE's parameters (first address, bytes...) carry data and land in writable registers only."""
    if len(parameters) < 2:
        return False
    return all(a in _WRITABLE_BYTES for a in range(parameters[0], parameters[0] + len(parameters) - 1))


def _clip_to_limits(servo: _Servo) -> int:
    """The goal position within the angle limits (both 0: the limits are off, as in the STS multi-turn mode)."""
    low, high, goal = servo.get("min_angle_limit"), servo.get("max_angle_limit"), servo.get("goal_position")
    return goal if low == high == 0 else min(max(goal, low), high)


def _bounded(value: float, limit: int) -> int:
    """`value` rounded and clipped to [-limit, limit]."""
    return int(min(max(round(value), -limit), limit))
