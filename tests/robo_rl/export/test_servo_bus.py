"""The simulated SO-ARM100 servo bus (robo_rl.export.servo_sim) against packets worked out by hand from
Feetech's SCServo SDK (protocol_packet_handler.py's ping, readTxRx, writeTxRx, syncReadTx, syncWriteTxOnly),
and the host's bus client (robo_rl.export.servo_client) on it, on the real MuJoCo arm."""

from __future__ import annotations

import numpy as np
import pytest

from robo_rl.export.feetech import Instruction, PacketReader, ProtocolError, packet
from robo_rl.export.kinematics import arm_kinematics, arm_task_config
from robo_rl.export.servo_calibration import default_calibration
from robo_rl.export.feetech import ERROR_OVERHEAT
from robo_rl.export.servo_client import ServoBusClient, ServoError, ServoTimeout
from robo_rl.export.servo_sim import SO_ARM100_SERVO_GAINS, SimulatedSerialPort, SimulatedServoBus
from sim.arm.env import make_arm_config
from sim.arm.joint_position import SimulatedArm
from sim.arm.robot import SO_ARM100_LIKE, load_arm

CALIBRATION = default_calibration(arm_kinematics(load_arm(SO_ARM100_LIKE), SO_ARM100_LIKE))  # ids 1-5, gripper 6
ENV_CONFIG = arm_task_config(make_arm_config("reach", "so_arm100"))
STEPS = np.array([j.steps_per_unit for j in CALIBRATION])


class RecordingPort(SimulatedSerialPort):
    """The simulated port, counting what is written, and able to flip a bit of the next request on the line."""

    def __init__(self, bus: SimulatedServoBus, echo: bool = False):
        super().__init__(bus, echo)
        self.written, self.corrupt_next = bytearray(), False

    def write(self, data: bytes) -> int:
        data = bytearray(data)
        if self.corrupt_next:
            data[5] ^= 0x10  # the first parameter byte: the checksum no longer matches
            self.corrupt_next = False
        self.written += data
        return super().write(bytes(data))


@pytest.fixture
def bus() -> SimulatedServoBus:
    return SimulatedServoBus(SimulatedArm(ENV_CONFIG, SO_ARM100_SERVO_GAINS, seed=0), CALIBRATION)


@pytest.fixture
def port(bus: SimulatedServoBus) -> RecordingPort:
    return RecordingPort(bus)


@pytest.fixture
def client(port: RecordingPort) -> ServoBusClient:
    return ServoBusClient(port, CALIBRATION)


def test_the_servos_answer_the_sdks_packets(bus):
    # ping(1): FF FF 01 len=02 PING=01, ~(1+2+1) = FB; the status: FF FF 01 02 error=00, ~(1+2) = FC
    assert bus.feed(bytes.fromhex("FFFF010201FB")) == bytes.fromhex("FFFF010200FC")
    # readTxRx(1, 56, 2) (SMS_STS::ReadPos): shoulder_pan at home, 0 rad, is the centre step 2048 = 0x0800:
    # FF FF 01 len=04 00 00 08, ~(1+4+0+0+8) = F2
    assert bus.feed(bytes.fromhex("FFFF0104023802BE")) == bytes.fromhex("FFFF0104000008F2")
    # shoulder_lift (id 2, zero 3073) at home, -1.57 rad: 3073 - 1.57 * 4096 / 2 pi = 2049.5 -> 2050 = 0x0802
    shoulder = bytes.fromhex("FFFF0204000208EF")  # ~(2+4+0+2+8) = EF
    assert bus.feed(bytes.fromhex("FFFF0204023802BD")) == shoulder
    # syncReadTx(56, 2, [1, 2]): FF FF FE len=2+4=06 82 38 02 01 02, ~(FE+06+82+38+02+01+02) & FF = 3C;
    # each servo answers as to a READ, in the order listed
    assert bus.feed(bytes.fromhex("FFFFFE0682380201023C")) == bytes.fromhex("FFFF0104000008F2") + shoulder
    assert bus.feed(bytes.fromhex("FFFFFE0682380202013C")) == shoulder + bytes.fromhex("FFFF0104000008F2")
    # read model number (3, 2 bytes) of servo 1: 777 = 0x0309 -> FF FF 01 04 00 09 03, ~(1+4+9+3) = EE
    assert bus.feed(bytes.fromhex("FFFF0104020302F3")) == bytes.fromhex("FFFF0104000903EE")
    # broadcast ping, and a servo that is not on the bus: no answer
    assert bus.feed(bytes.fromhex("FFFFFE0201FE")) == b""
    assert bus.feed(bytes.fromhex("FFFF070201F5")) == b""


def test_writes_reach_the_plant_and_read_only_registers_refuse_them(bus):
    # writeTxRx(1, 40, 1, [1]): torque on: FF FF 01 len=04 WRITE=03 28 01, ~(1+4+3+0x28+1) = CE
    assert bus.feed(bytes.fromhex("FFFF0104032801CE")) == bytes.fromhex("FFFF010200FC")
    assert bus.arm.torque.tolist() == [True, False, False, False, False, False]
    # the SDK's syncWrite of goal_position 2048 to servo 1, 1024 to servo 2 (test_feetech): no answer;
    # servo 2's 1024 steps are (1024 - 3073) / (4096 / 2 pi) rad
    assert bus.feed(bytes.fromhex("FFFFFE0A832A0201000802000439")) == b""
    assert bus.arm.arm_command[1] == pytest.approx((1024 - 3073) * 2 * np.pi / 4096)
    # WRITE 2048 to present_position (56, read-only): FF FF 01 05 03 38 00 08, ~(1+5+3+0x38+8) = B6; the status
    # packet carries the instruction error bit 0x40: FF FF 01 02 40, ~(1+2+0x40) = BC, and nothing is written
    before = bus.feed(bytes.fromhex("FFFF0104023802BE"))
    assert bus.feed(bytes.fromhex("FFFF0105033800 08B6")) == bytes.fromhex("FFFF010240BC")
    assert bus.feed(bytes.fromhex("FFFF0104023802BE")) == before
    # REG_WRITE of servo 1's goal, 3000 = 0x0BB8: FF FF 01 05 04 2A B8 0B, ~(1+5+4+0x2A+0xB8+0x0B) = 08, acts
    # only on ACTION (broadcast: FF FF FE 02 05, ~(FE+2+5) = FA)
    goal = bus.arm.arm_command[0]
    assert bus.feed(bytes.fromhex("FFFF0105042AB80B08")) == bytes.fromhex("FFFF010200FC")
    assert bus.arm.arm_command[0] == goal
    assert bus.feed(bytes.fromhex("FFFFFE0205FA")) == b""
    assert bus.arm.arm_command[0] == pytest.approx((3000 - 2048) * 2 * np.pi / 4096)


def test_goal_positions_are_tracked_through_the_client(bus, client):
    assert all(client.ping(j.servo_id) for j in CALIBRATION) and not client.ping(7)
    assert client.read_register(1, "model") == 777 and client.read_register(2, "torque_enable") == 0
    client.torque(True)
    assert all(client.read_register(j.servo_id, "torque_enable") == 1 for j in CALIBRATION)
    home = client.read_positions()
    np.testing.assert_allclose(home[:5], SO_ARM100_LIKE.home, atol=1.0 / STEPS[0])
    goal = home + np.array([0.3, 0.2, -0.3, -0.3, 0.5, -0.02])
    client.write_goal_positions(goal)
    bus.advance(1.0)
    state = client.read_state()
    assert np.all(np.abs(state.positions - goal) * STEPS <= 2.0), (state.positions - goal) * STEPS
    assert np.all(np.abs(state.velocities) * STEPS < 5.0)  # settled
    assert client.read_register(3, "moving") == 0 and abs(bus.arm.time - 1.0) < 1e-9
    assert client.read_register(3, "present_voltage") == 120


def test_torque_off_lets_the_arm_sag(bus, client):
    client.torque(True)
    bus.advance(0.2)
    held = client.read_positions()
    client.torque(False)
    assert bus.arm.torque.tolist() == [False] * 6
    bus.advance(0.5)
    sagged = client.read_positions()
    assert abs(sagged[1] - held[1]) * STEPS[1] > 50  # the shoulder falls away from its goal under gravity
    assert client.read_register(2, "moving") == 1


def test_a_corrupt_request_goes_unanswered_and_the_next_one_works(bus, port, client):
    port.corrupt_next = True
    with pytest.raises(ServoTimeout, match="servo 1 did not answer") as error:
        client.read_register(1, "present_position")
    assert error.value.servo_id == 1 and bus.feed(port.written[-8:]) == b""  # the servo heard no packet
    assert client.read_register(1, "present_position") == 2048


def test_an_unplugged_servo_times_out_and_error_bits_raise(bus, client):
    bus.unplug(3)
    with pytest.raises(ServoTimeout, match="servo 3 did not answer") as error:
        client.read_positions()
    assert error.value.servo_id == 3 and not client.ping(3)
    with pytest.raises(ServoTimeout) as error:  # torque off is tried on every servo, then servo 3's failure raised
        client.torque(False)
    assert error.value.servo_id == 3
    bus.plug(3)
    assert client.ping(3) and client.read_positions().shape == (6,)
    bus.set_error(2, ERROR_OVERHEAT)
    # the status packet of a ping of servo 2: FF FF 02 02 error=04, ~(2+2+4) = F7
    assert bus.feed(bytes.fromhex("FFFF020201FA")) == bytes.fromhex("FFFF020204F7")
    with pytest.raises(ServoError, match=r"servo 2 reports error bits 0x04 \(overheat\)") as error:
        client.read_positions()
    assert (error.value.servo_id, error.value.bits) == (2, ERROR_OVERHEAT)


def test_bad_input_is_refused_before_anything_is_sent(bus, port, client):
    for call, message in ((lambda: client.write_goal_positions([0.0, np.nan, 0, 0, 0, 0]), "finite"),
                          (lambda: client.write_goal_positions(np.zeros(5)), "one value per joint"),
                          (lambda: client.read_register(1, "present_postion"), "unknown register"),
                          (lambda: client.write_register(1, "goal_position", 2047.5), "whole number"),
                          (lambda: client.read_register(0xFE, "model"), "servo id")):
        with pytest.raises(ProtocolError, match=message):
            call()
    assert port.written == b"" and bus.bus_time_us == 0.0


def test_bus_time_and_an_echoing_adapter(bus):
    port = RecordingPort(bus, echo=True)
    client = ServoBusClient(port, CALIBRATION, echo=True)
    client.write_goal_positions([j.to_value(2048) for j in CALIBRATION])
    # SYNC_WRITE of 6 goal positions: header, id, length, instruction, address, size, checksum (8 bytes) plus
    # 6 x (id + 2 bytes) = 26 bytes of 10 bits at 1 Mbaud
    assert len(port.written) == 26 and bus.bus_time_us == pytest.approx(260.0)
    assert client.read_positions().shape == (6,)  # the echo of the SYNC_READ is skipped
    # the SYNC_READ: 8 + 6 ids = 14 bytes out, 6 status packets of 8 bytes back
    assert bus.bus_time_us == pytest.approx(260.0 + 10.0 * (14 + 6 * 8))
    delayed = SimulatedServoBus(bus.arm, CALIBRATION, return_delay_us=20.0)
    assert delayed.transaction_us(b"\x00" * 8, bytes.fromhex("FFFF0104000008F2")) == pytest.approx(160.0 + 20.0)


def test_open_builds_a_pyserial_port():
    # pyserial's loop:// hears itself and nothing else: an adapter's echo with no servo on the bus
    client = ServoBusClient.open("loop://", CALIBRATION, timeout_s=0.01, echo=True)
    try:
        assert client.port.timeout == 0.01 and not client.ping(1)
        client.write_goal_positions(np.zeros(6))  # a broadcast: only its echo comes back
    finally:
        client.close()


def test_the_bus_survives_any_packet(bus):
    """Seeded random instruction packets (any instruction code, id and parameters): the bus never raises, and
    what it answers is status packets only."""
    rng = np.random.default_rng(0)
    codes = [int(c) for c in Instruction] + [0x00, 0x06, 0x7F, 0xFF]
    sent = answered = 0
    for _ in range(2000):
        servo_id = int(rng.choice([*range(0, 8), 0xFE]))
        parameters = rng.integers(0, 256, int(rng.integers(0, 12)), dtype=np.uint8).tobytes()
        answer = bus.feed(packet(servo_id, int(rng.choice(codes)), parameters))
        statuses = PacketReader().feed(answer)
        assert b"".join(packet(p.servo_id, p.code, p.parameters) for p in statuses) == answer
        sent, answered = sent + 1, answered + len(statuses)
    bus.advance(0.1)  # and the plant takes whatever goals and torque switches came out of it
    assert np.all(np.isfinite(bus.arm.state().positions)) and 0 < answered < sent


KINEMATICS = arm_kinematics(load_arm(SO_ARM100_LIKE), SO_ARM100_LIKE)


@pytest.mark.parametrize("change, message", [
    # the bus client read positions with it: a ZeroDivisionError, NaN positions, a pan sent to step 100
    ({"steps_per_unit": 0.0}, "steps_per_unit must be a finite non-zero number, got 0.0"),
    ({"steps_per_unit": float("nan")}, "steps_per_unit must be a finite non-zero number, got nan"),
    ({"min_steps": 3000, "max_steps": 100}, r"bounds \[3000, 100\] must be increasing"),
    # invalid C (1.5u, Trueu) that only the compiler refused
    ({"servo_id": 1.5}, "servo_id must be a whole number, got 1.5"),
    ({"servo_id": True}, "servo_id must be a whole number, got True"),
    ({"min_steps": 10.5}, "min_steps must be a whole number, got 10.5"),
])
def test_a_servo_joint_no_servo_can_take_is_refused_where_it_is_made(change, message):
    import dataclasses

    from robo_rl.export.errors import ExportError

    with pytest.raises(ExportError, match=message):
        dataclasses.replace(CALIBRATION[0], **change)


@pytest.mark.parametrize("joint, change, message", [
    # accepted, though the firmware trusts any reading within the bounds as the joint's
    (0, {"min_steps": 0, "max_steps": 4095}, r"servo 1 \(\w+\): bounds \[0, 4095\] steps are joint values"),
    (0, {"zero_steps": -5000}, "beyond the joint's range"),
    (0, {"zero_steps": 1_000_000}, "beyond the joint's range"),
    # mounted the other way round with its bounds unchanged (an asymmetric joint: a symmetric one reads alike)
    (1, {"steps_per_unit": -CALIBRATION[1].steps_per_unit}, "beyond the joint's range"),
    (5, {"min_steps": 0, "max_steps": 4095}, r"servo 6 \(\w+\): bounds \[0, 4095\] steps are joint values"),
    (0, {"steps_per_unit": 1e-9, "zero_steps": 2048, "min_steps": 2047, "max_steps": 2049},
     r"spans the joint's range .* under 16: it could not be commanded"),
])
def test_a_calibration_that_contradicts_the_joints_ranges_is_refused(joint, change, message):
    import dataclasses

    from robo_rl.export.errors import ExportError
    from robo_rl.export.servo_calibration import check_calibration

    check_calibration(CALIBRATION, KINEMATICS)  # the builders' calibration holds
    calibration = list(CALIBRATION)
    calibration[joint] = dataclasses.replace(calibration[joint], **change)
    with pytest.raises(ExportError, match=message):
        check_calibration(calibration, KINEMATICS)
