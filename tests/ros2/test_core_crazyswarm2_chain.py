"""cmd_vel_legacy through crazyswarm2's two backends, checked against values worked out by hand from the sources.

Sources (commits): IMRCLab/crazyswarm2 f6154e2 (crazyflie/src/crazyflie_server.cpp, the 'cpp' backend;
crazyflie_server_py/crazyflie_server_py/crazyflie_server.py, the 'cflib' backend; crazyflie/launch/launch.py),
whoenig/crazyflie_cpp 72996dc (include/crazyflie_cpp/crtp.h), bitcraze/crazyflie-lib-python 0417fba
(cflib/crazyflie/commander.py), bitcraze/crazyflie-firmware 2a18fc2 (src/modules/src/crtp_commander_rpyt.c).
The expected values below are literals derived line by line in the comments, not computed by the code
under test.
"""

import math

import numpy as np
import pytest

from robo_rl_ros.core.crazyflie import (DEFAULT_BACKEND, AttitudeSetpoint, LegacyCommand, ThrustLock, VehicleModel,
                                        legacy_command)
from robo_rl_ros.crazyswarm2_chain import Crazyswarm2Chain, FirmwareSetpoint, server_packets

# Twist (linear.x, linear.y, angular.z, linear.z) -> the firmware's setpoint (attitude.roll, attitude.pitch,
# attitudeRate.yaw, thrust) once the thrust lock is released, per backend.
#   cpp:   crazyflie_server.cpp:706 roll = linear.y; :707 pitch = -linear.x; :708 yawrate = angular.z;
#          :709 thrust = min<uint16_t>(max<float>(linear.z, 0), 60000) (float -> uint16_t truncates);
#          crtp.h:219-222 packs roll, pitch, yawrate, thrust unchanged.
#   cflib: crazyflie_server.py:1161 roll = linear.y; :1162 pitch = -linear.x; :1163 yawrate = angular.z;
#          :1164 thrust = int(min(max(linear.z, 0), 60000)); commander.py:96 packs (roll, -pitch, yawrate, thrust).
#   firmware: crtp_commander_rpyt.c:194 attitude.roll = roll; :204 attitude.pitch = pitch;
#          :215 attitudeRate.yaw = -yaw; :135-139 thrust 0 if locked or < MIN_THRUST 1000, else min(thrust, 60000).
CHAIN_TABLE = [
    # twist                      cpp setpoint                     cflib setpoint
    # pitch: cpp -(10) packed as is = -10; cflib -(10) packed negated = +10. yaw rate: -(30) on both.
    ((10.0, -5.0, 30.0, 40000.0), (-5.0, -10.0, -30.0, 40000.0), (-5.0, 10.0, -30.0, 40000.0)),
    # nose-down 8.5676 deg (right-handed) as the cpp node sends it (linear.x = +8.5676) and as the cflib node
    # sends it (linear.x = -8.5676): both reach the firmware as the legacy pitch -8.5676 (float32 on the wire)
    ((8.567605512172943, 0.0, 0.0, 30000.0), (0.0, -8.567605972290039, -0.0, 30000.0), (0.0, 8.567605972290039, -0.0, 30000.0)),
    ((-8.567605512172943, 0.0, 0.0, 30000.0), (0.0, 8.567605972290039, -0.0, 30000.0), (0.0, -8.567605972290039, -0.0, 30000.0)),
    # roll 0.1 is float32 0.10000000149011612 on both wires
    ((0.0, 0.1, 0.0, 30000.0), (0.10000000149011612, -0.0, -0.0, 30000.0), (0.10000000149011612, 0.0, -0.0, 30000.0)),
    # 65535 -> the servers' clamp 60000 (:709 / :1164)
    ((0.0, 0.0, 0.0, 65535.0), (0.0, -0.0, -0.0, 60000.0), (0.0, 0.0, -0.0, 60000.0)),
    # 59999.9 truncates to 59999 (cpp: float32 59999.8984 -> uint16_t; cflib: int())
    ((0.0, 0.0, 0.0, 59999.9), (0.0, -0.0, -0.0, 59999.0), (0.0, 0.0, -0.0, 59999.0)),
    # 999 < MIN_THRUST 1000 -> 0 (:135); 1000 passes
    ((0.0, 0.0, 0.0, 999.0), (0.0, -0.0, -0.0, 0.0), (0.0, 0.0, -0.0, 0.0)),
    ((0.0, 0.0, 0.0, 1000.0), (0.0, -0.0, -0.0, 1000.0), (0.0, 0.0, -0.0, 1000.0)),
    # negative thrust -> 0 (max(linear.z, 0))
    ((0.0, 0.0, 0.0, -20.0), (0.0, -0.0, -0.0, 0.0), (0.0, 0.0, -0.0, 0.0)),
    # cflib: min(inf, 60000) = 60000; cpp: inf does not fit uint16_t (undefined: None)
    ((0.0, 0.0, 0.0, math.inf), None, (0.0, 0.0, -0.0, 60000.0)),
    ((0.0, 0.0, 0.0, 1e9), None, (0.0, 0.0, -0.0, 60000.0)),
    # NaN thrust: undefined conversion (cpp), int(nan) raises in the server's callback (cflib)
    ((0.0, 0.0, 0.0, math.nan), None, None),
]


def _unlocked(backend: str) -> Crazyswarm2Chain:
    chain = Crazyswarm2Chain(backend)
    chain.packets(0.0, 0.0, 0.0, 0.0)  # thrust 0: crtp_commander_rpyt.c:128-130 releases the lock
    assert not chain.decoder.thrust_locked
    return chain


@pytest.mark.parametrize("twist, cpp, cflib", CHAIN_TABLE)
def test_twist_to_firmware_setpoint_by_hand(twist, cpp, cflib):
    for backend, expected in (("cpp", cpp), ("cflib", cflib)):
        chain = _unlocked(backend)
        if expected is None:
            with pytest.raises(ValueError):
                chain.packets(*twist)
            continue
        (delay, setpoint), = chain.packets(*twist)
        assert delay == 0.0 and setpoint == FirmwareSetpoint(*expected), (backend, twist, setpoint)
        assert [math.copysign(1.0, a) for a in setpoint[:3]] == [math.copysign(1.0, b) for b in expected[:3]]


def test_thrust_lock_until_a_zero_arrives():
    # crtp_commander_rpyt.c:77 thrustLocked = true at boot; :128-130 released by a packet with thrust 0
    cpp = Crazyswarm2Chain("cpp")
    assert cpp.packets(0.0, 0.0, 0.0, 40000.0) == [(0.0, FirmwareSetpoint(0.0, -0.0, -0.0, 0.0))]
    assert cpp.packets(0.0, 0.0, 0.0, 40000.0)[0][1].thrust == 0.0  # still locked
    assert cpp.packets(0.0, 0.0, 0.0, 0.5)[0][1].thrust == 0.0  # 0.5 truncates to 0: released
    assert cpp.packets(0.0, 0.0, 0.0, 40000.0)[0][1].thrust == 40000.0
    # crazyflie_server.py:1156-1159 sends send_setpoint(0, 0, 0, 0) and sleeps 10 ms before a vehicle's first Twist
    cflib = Crazyswarm2Chain("cflib")
    assert cflib.packets(0.0, 0.0, 0.0, 40000.0) == [(0.0, FirmwareSetpoint(0.0, -0.0, -0.0, 0.0)),
                                                     (0.01, FirmwareSetpoint(0.0, 0.0, -0.0, 40000.0))]
    assert cflib.packets(0.0, 0.0, 0.0, 40000.0) == [(0.0, FirmwareSetpoint(0.0, 0.0, -0.0, 40000.0))]


def test_chain_delivers_in_order_with_cflibs_first_zero():
    chain = Crazyswarm2Chain("cflib")
    assert chain.setpoint(0.0) is None
    chain.send(1.0, 0.0, 0.0, 0.0, 40000.0)
    assert chain.setpoint(1.0).thrust == 0.0 and chain.setpoint(1.008).thrust == 0.0
    chain.send(1.005, 0.0, 0.0, 0.0, 30000.0)  # handled after the server's sleep: does not overtake
    assert chain.setpoint(1.01).thrust == 30000.0
    chain.motors_off(1.02)
    assert chain.setpoint(1.02) == FirmwareSetpoint(0.0, 0.0, 0.0, 0.0)


def test_server_packets_of_an_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of"):
        server_packets("sim", 0.0, 0.0, 0.0, 0.0)


def test_default_backend_is_crazyswarm2s():
    # crazyswarm2 crazyflie/launch/launch.py:127 DeclareLaunchArgument('backend', default_value='cpp')
    assert DEFAULT_BACKEND == "cpp"


# The node's side: an attitude setpoint -> the Twist for each backend, by hand. The setpoint: a right-handed
# pitch of +10 deg (nose down) about body y, body rates (0.1, -0.2, 0.5) rad/s, collective thrust 0.3 N; the
# vehicle's thrust_max 0.148828670064 N per rotor (the committed hover bundle); attitude_kp 6, rate_lead 0.75.
#   roll  = degrees(0 + 0.75 * 0.1 / 6)            = 0.7161972439135291
#   pitch = 10 + degrees(0.75 * (-0.2) / 6)        = 8.567605512172943 (right-handed, nose down positive)
#   angular.z = -degrees(0.5)                      = -28.64788975654116 (the firmware negates it back)
#   linear.z  = 0.3 / (4 * 0.148828670064) * 65535 = 33025.39085974749
# cpp: linear.x = +pitch (the server's -linear.x reaches the firmware as the legacy pitch, nose up positive);
# cflib: linear.x = -pitch (the server negates, cflib negates again).
NODE_TABLE = {
    "cpp": (0.7161972439135291, 8.567605512172943, -28.64788975654116, 33025.39085974749),
    "cflib": (0.7161972439135291, -8.567605512172943, -28.64788975654116, 33025.39085974749),
}


def _pitch_setpoint(thrust: float = 0.3, yaw_rate: float = 0.5) -> AttitudeSetpoint:
    angle = math.radians(10.0)
    rotation = np.array([[math.cos(angle), 0.0, math.sin(angle)], [0.0, 1.0, 0.0],
                         [-math.sin(angle), 0.0, math.cos(angle)]])
    return AttitudeSetpoint(rotation, np.array([0.1, -0.2, yaw_rate]), thrust)


@pytest.mark.parametrize("backend", ["cpp", "cflib"])
def test_node_twist_by_hand(hover_bundle, backend):
    vehicle = VehicleModel.from_bundle(hover_bundle)
    command = legacy_command(_pitch_setpoint(), vehicle, attitude_kp=6.0, rate_lead=0.75, backend=backend)
    np.testing.assert_allclose(command, NODE_TABLE[backend], rtol=0, atol=1e-9)
    # through that backend's chain, the firmware gets the legacy pitch (nose down 8.57 deg -> -8.57) and the
    # right-handed yaw rate +28.65 deg/s, whichever backend
    (_, setpoint), = _unlocked(backend).packets(command.pitch_deg, command.roll_deg, command.yaw_rate_deg,
                                                command.thrust_pwm)
    np.testing.assert_allclose(setpoint, (0.7161972522735596, -8.567605972290039, 28.647890090942383, 33025.0),
                               rtol=0, atol=1e-12)


def test_node_twist_bounds(hover_bundle):
    vehicle = VehicleModel.from_bundle(hover_bundle)
    # 0.7 N -> 77059 PWM, beyond what the servers pass (60000): the node sends 60000
    assert legacy_command(_pitch_setpoint(thrust=0.7), vehicle).thrust_pwm == 60000.0
    # a 1e20 rad/s yaw rate would be 5.7e21 deg/s: controller_pid's capAngle loop could never wrap it
    assert legacy_command(_pitch_setpoint(yaw_rate=1e20), vehicle).yaw_rate_deg == -360.0
    with pytest.raises(ValueError, match="backend must be one of"):
        legacy_command(_pitch_setpoint(), vehicle, backend="sim")


def test_thrust_lock_from_the_sender():
    lock = ThrustLock()
    flying = LegacyCommand(1.0, 2.0, 3.0, 30000.0)
    zero = LegacyCommand(0.0, 0.0, 0.0, 0.0)
    assert lock.command(flying, server_listening=False) == zero  # the server is not there yet
    assert lock.command(flying, server_listening=True) == zero  # the zeros that unlock, on two ticks
    assert not lock.released and lock.command(flying, server_listening=True) == zero
    assert lock.released and lock.command(flying, server_listening=True) == flying
    assert lock.command(flying, server_listening=False) == flying  # once released, stays released
