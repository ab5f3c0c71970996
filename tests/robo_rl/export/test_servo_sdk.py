"""The servo protocol against Feetech's own Python SDK (PyPI feetech-servo-sdk, `scservo_sdk`, which LeRobot's
Feetech motors bus is built on): the SDK's packets equal robo_rl.export.feetech's, and the SDK, as a host
would run it, talks to the simulated SO-ARM100 bus (servo_sim) through its PortHandler: ping, reads, writes,
group sync read and write. A sign or byte-order error shared by our sender and our simulated receiver would
pass our own round trips; here the other end is Feetech's code."""

from __future__ import annotations

import pytest
import scservo_sdk as scs  # Feetech's SDK: the dev extra feetech-servo-sdk (make test installs it)

from robo_rl.export import feetech
from robo_rl.export.kinematics import arm_kinematics, arm_task_config
from robo_rl.export.servo_calibration import default_calibration
from robo_rl.export.servo_sim import SO_ARM100_SERVO_GAINS, SimulatedSerialPort, SimulatedServoBus

R = feetech.REGISTERS


class RecordingSerial:
    """What the SDK writes, kept; nothing answers."""

    def __init__(self):
        self.written = b""
        self.in_waiting = 0

    def write(self, data):
        self.written += bytes(data)
        return len(data)

    def read(self, size=1):
        return b""

    def flush(self):
        pass


def sdk_port(serial) -> "scs.PortHandler":
    port = scs.PortHandler("simulated")
    port.ser, port.is_open = serial, True
    port.tx_time_per_byte = 10.0 / 1_000_000 * 1000.0  # [ms] at 1 Mbaud, as setupPort would set it
    return port


def test_the_sdks_packets_are_ours():
    handler = scs.PacketHandler(0)  # STS: little-endian, as LeRobot opens it
    serial = RecordingSerial()
    port = sdk_port(serial)

    def sent(call) -> bytes:
        serial.written, port.is_using = b"", False  # a read's Tx leaves the port busy until its Rx
        call()
        return serial.written
    assert sent(lambda: handler.write2ByteTxOnly(port, 1, R["goal_position"].address, 2048)) == \
        feetech.write(1, R["goal_position"], 2048)
    assert sent(lambda: handler.write1ByteTxOnly(port, 3, R["torque_enable"].address, 1)) == \
        feetech.write(3, R["torque_enable"], 1)
    assert sent(lambda: handler.readTx(port, 2, R["present_position"].address, 4)) == \
        feetech.read(2, R["present_position"], 4)
    group = scs.GroupSyncWrite(port, handler, R["goal_position"].address, 2)
    goals = {1: 1024, 2: 3000, 6: 2500}
    for servo_id, steps in goals.items():
        group.addParam(servo_id, [scs.SCS_LOBYTE(steps), scs.SCS_HIBYTE(steps)])
    assert sent(group.txPacket) == feetech.sync_write(R["goal_position"], goals)
    reader = scs.GroupSyncRead(port, handler, R["present_position"].address, 4)
    for servo_id in (1, 2, 3, 4, 5, 6):
        reader.addParam(servo_id)
    assert sent(reader.txPacket) == feetech.sync_read(R["present_position"], 4, range(1, 7))


@pytest.fixture
def bus():
    from sim.arm.env import make_arm_config
    from sim.arm.joint_position import SimulatedArm
    from sim.arm.robot import load_arm

    config = make_arm_config("reach", "so_arm100")
    arm = SimulatedArm(arm_task_config(config), SO_ARM100_SERVO_GAINS, seed=0)
    calibration = default_calibration(arm_kinematics(load_arm(config.spec), config.spec))
    return SimulatedServoBus(arm, calibration), calibration


def test_the_sdk_drives_the_simulated_arm(bus):
    bus, calibration = bus
    handler = scs.PacketHandler(0)
    port = sdk_port(SimulatedSerialPort(bus))
    model, result, error = handler.ping(port, 1)
    assert (model, result, error) == (777, scs.COMM_SUCCESS, 0)  # the STS3215's model number
    assert handler.ping(port, 42)[1] == scs.COMM_RX_TIMEOUT  # nobody there
    home = [joint.to_steps(q) for joint, q in zip(calibration, (*bus.arm.config.spec.home, bus.arm.gripper_range[1]))]
    for joint, steps in zip(calibration, home):
        position, result, error = handler.read2ByteTxRx(port, joint.servo_id, R["present_position"].address)
        assert result == scs.COMM_SUCCESS and error == 0 and abs(position - steps) <= 1, joint.joint

    # LeRobot's way: torque on, a group sync write of goals, a group sync read of positions
    for joint in calibration:
        assert handler.write1ByteTxRx(port, joint.servo_id, R["torque_enable"].address, 1)[0] == scs.COMM_SUCCESS
    goals = {joint.servo_id: steps + (100 if i == 0 else 0) for i, (joint, steps) in enumerate(zip(calibration, home))}
    writer = scs.GroupSyncWrite(port, handler, R["goal_position"].address, 2)
    for servo_id, steps in goals.items():
        writer.addParam(servo_id, [scs.SCS_LOBYTE(steps), scs.SCS_HIBYTE(steps)])
    assert writer.txPacket() == scs.COMM_SUCCESS
    bus.advance(1.0)
    reader = scs.GroupSyncRead(port, handler, R["present_position"].address, 2)
    for servo_id in goals:
        reader.addParam(servo_id)
    assert reader.txRxPacket() == scs.COMM_SUCCESS
    positions = {i: reader.getData(i, R["present_position"].address, 2) for i in goals}
    assert abs(positions[1] - goals[1]) <= 2  # the pan servo turned 100 steps, as the SDK asked
    assert all(abs(positions[i] - goals[i]) <= 2 for i in goals)
    # a negative speed reaches the SDK as sign-magnitude, which it decodes as SMS_STS does
    writer.clearParam()
    writer.addParam(1, [scs.SCS_LOBYTE(home[0]), scs.SCS_HIBYTE(home[0])])
    writer.txPacket()
    bus.advance(0.05)
    speed, result, _ = handler.read2ByteTxRx(port, 1, R["present_speed"].address)
    assert result == scs.COMM_SUCCESS and speed & (1 << 15) and scs.SCS_TOHOST(speed, 15) < 0
