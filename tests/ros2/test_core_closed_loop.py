"""The policy flown through the cmd_vel_legacy conversion, crazyswarm2's chain for each backend (server, library,
the firmware's RPYT decoder: robo_rl_ros.crazyswarm2_chain) and the simulated onboard attitude controller,
without ROS: the same loop the sim bridge runs, here in-process."""

import numpy as np
import pytest

from robo_rl_ros.core.crazyflie import (LegacyCommand, ThrustLock, VehicleModel, attitude_setpoint, legacy_command,
                                        motor_wrench)
from robo_rl_ros.core.quadrotor import RESUME_STATES, QuadrotorPolicyController, QuadrotorSettings
from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.crazyswarm2_chain import Crazyswarm2Chain
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.onboard_pid import OnboardAttitudeController, inertia_torque_scale

BACKENDS = ["cpp", "cflib"]


def _fly(bundle, seconds, attitude_kp=6.0, direct=False, delay_cycles=0, rate_lead=0.75, tilts=None,
         backend="cpp", vehicle_backend=None, unlock=True):
    """Hover errors [m] per tick; each command reaches the onboard controller `delay_cycles` 2 ms cycles
    after the state it was computed from (the sim bridge over DDS: 0-4); `tilts` collects the commanded
    |roll| and |pitch| [deg] per tick. The node converts for `backend`, the vehicle sits behind
    `vehicle_backend` (default: the same); `unlock`: the node's first command is the zero that releases the
    firmware's thrust lock (core.crazyflie.ThrustLock)."""
    config = make_config(bundle.env_config["task"], dict(bundle.env_config, randomization={"enabled": False},
                                                          control_hz=500.0))
    sim = QuadrotorBatch(config, 1, "mujoco")
    target = np.array(config.center)
    sim.reset(options={"target": target, "initial_state": {"position": target + [0.05, -0.05, 0.05]}})
    controller = QuadrotorPolicyController(bundle, QuadrotorSettings(tuple(target), attitude_kp=attitude_kp,
                                                                    rate_lead=rate_lead, backend=backend))
    onboard = OnboardAttitudeController(500.0, inertia_torque_scale(controller.vehicle.inertia))
    chain = Crazyswarm2Chain(vehicle_backend or backend)
    lock = ThrustLock()
    # the state stream runs before the policy takes over (it waits for RESUME_STATES steady states), as the sim
    # bridge's vehicle holds still until the first command
    pos, quat, vel, angvel = (x[:, 0].copy() for x in sim.physics.state())
    for i in range(RESUME_STATES - 1, 0, -1):
        controller.update_state(-0.01 * i, VehicleState(pos, quat, vel, angvel))
    errors = []
    for tick in range(int(seconds * 100)):
        now = tick * 0.01
        pos, quat, vel, angvel = (x[:, 0].copy() for x in sim.physics.state())
        errors.append(np.linalg.norm(pos - target))
        controller.update_state(now, VehicleState(pos, quat, vel, angvel))
        result = controller.tick(now)
        if not result.flying:  # left the geofence
            break
        c = lock.command(result.legacy, server_listening=True) if unlock else result.legacy
        if tilts is not None:
            tilts.append((abs(c.roll_deg), abs(c.pitch_deg)))
        for cycle in range(5):
            t = now + cycle * 0.002
            if cycle == delay_cycles:
                chain.send(t, c.pitch_deg, c.roll_deg, c.yaw_rate_deg, c.thrust_pwm)  # linear.x, .y, angular.z, linear.z
            setpoint = chain.setpoint(t)
            if setpoint is not None:
                onboard.set_setpoint(*setpoint)
            _, q, _, w = (x[:, 0].copy() for x in sim.physics.state())
            sim.step((result.action if direct else onboard.motor_commands(q, w))[None])
    return np.array(errors)


@pytest.mark.parametrize("backend", BACKENDS)
def test_policy_hovers_through_cmd_vel_legacy_and_onboard_pid(hover_bundle, backend):
    errors = _fly(hover_bundle, 12.0, backend=backend)
    direct = _fly(hover_bundle, 12.0, direct=True)
    assert errors[200:].max() < 0.05, errors[200:].max()  # 10 s after 2 s of settling
    assert abs(errors[-1] - direct[-1]) < 0.005  # the policy's own hover offset, not the conversion's


@pytest.mark.parametrize("backend, vehicle_backend", [("cflib", "cpp"), ("cpp", "cflib")])
def test_a_node_set_for_the_other_backend_loses_the_vehicle(hover_bundle, backend, vehicle_backend):
    # the pitch sign the node writes must match crazyswarm2's backend: the wrong one turns the pitch loop
    # into positive feedback (what a bridge that inverted the node's own conversion could never show)
    errors = _fly(hover_bundle, 5.0, backend=backend, vehicle_backend=vehicle_backend)
    assert errors.max() > 0.3


def test_without_the_unlocking_zero_the_cpp_backend_never_lifts(hover_bundle):
    # crazyswarm2's C++ server sends no zero before the first Twist: the firmware keeps thrust at 0
    errors = _fly(hover_bundle, 1.0, backend="cpp", unlock=False)
    assert errors.max() > 0.3 or len(errors) < 100  # fell out of the geofence


@pytest.mark.parametrize("delay_cycles", [0, 2, 3, 4])
def test_commands_stay_smooth_when_they_arrive_late(hover_bundle, delay_cycles):
    # DDS and the bridge deliver a command 0-8 ms after its state; the vehicle must hold its hover and the
    # roll/pitch commands must not oscillate (a real Crazyflie would fly that jitter on its motors)
    tilts = []
    errors = _fly(hover_bundle, 6.0, delay_cycles=delay_cycles, tilts=tilts)
    assert errors[200:].max() < 0.05
    assert np.percentile(np.array(tilts[200:]), 95) < 2.0


def test_the_full_rate_lead_oscillates_at_a_few_ms_of_delay(hover_bundle):
    # why rate_lead defaults below 1: with all of w' led in, a 4 ms delay puts the roll/pitch commands into
    # a period-2 oscillation (the position still holds: the onboard loop averages it out)
    tilts = []
    errors = _fly(hover_bundle, 6.0, delay_cycles=2, rate_lead=1.0, tilts=tilts)
    assert errors[200:].max() < 0.05 and np.percentile(np.array(tilts[200:]), 95) > 5.0


def test_without_the_attitude_lead_the_loop_diverges(hover_bundle):
    # the one-period attitude prediction alone is nearly the current attitude: the onboard PID holds it
    # and the policy's torque never reaches the motors (why legacy_command adds w' / attitude_kp)
    errors = _fly(hover_bundle, 5.0, attitude_kp=0.0)
    assert errors.max() > 0.3


def test_mixer_and_prediction_signs(hover_bundle):
    vehicle = VehicleModel.from_bundle(hover_bundle)
    hover = vehicle.hover_fraction
    thrust, torque = motor_wrench(vehicle, np.full(4, hover))
    assert np.isclose(thrust, vehicle.mass * vehicle.gravity) and np.allclose(torque, 0.0, atol=1e-12)
    # left rotors (M3, M4, y > 0) stronger: positive roll torque -> positive roll, legacy roll positive
    more_left = np.array([hover, hover, hover + 0.05, hover + 0.05])
    setpoint = attitude_setpoint(vehicle, np.array([1.0, 0, 0, 0]), np.zeros(3), more_left, 0.01)
    assert setpoint.body_rates[0] > 0 and setpoint.euler[0] > 0
    assert legacy_command(setpoint, vehicle).roll_deg > 0
    # front rotors (M1, M4, x > 0) stronger: nose up = negative right-handed pitch = positive legacy pitch;
    # linear.x is the right-handed pitch for the cpp backend, the legacy pitch for cflib
    more_front = np.array([hover + 0.05, hover, hover, hover + 0.05])
    setpoint = attitude_setpoint(vehicle, np.array([1.0, 0, 0, 0]), np.zeros(3), more_front, 0.01)
    assert setpoint.body_rates[1] < 0 and legacy_command(setpoint, vehicle, backend="cpp").pitch_deg < 0
    assert legacy_command(setpoint, vehicle, backend="cflib").pitch_deg > 0
    assert isinstance(legacy_command(setpoint, vehicle), LegacyCommand)
