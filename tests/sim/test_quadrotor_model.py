"""The MJCF is the one source of truth: parameters, vehicles, motor model, hover."""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from sim.quadrotor import motor
from sim.quadrotor.model import MJCF_PATH, VEHICLES, QuadrotorParams, load_model
from sim.quadrotor.physics import TorchPhysics
from tests.sim.conftest import NO_RANDOMIZATION


def test_params_read_from_compiled_mjcf():
    raw = mujoco.MjModel.from_xml_path(str(MJCF_PATH))
    params = QuadrotorParams.from_model(raw)
    assert params.mass == pytest.approx(0.0306)
    np.testing.assert_allclose(params.inertia, [9.416556729130406e-06, 9.644051701582312e-06, 1.745951732253285e-05])
    np.testing.assert_allclose(np.abs(params.rotor_positions[:, :2]), 0.028)
    np.testing.assert_allclose(params.yaw_torque_coefficients, [-4.665e-3, 4.665e-3, -4.665e-3, 4.665e-3])
    np.testing.assert_allclose(params.thrust_curve, [0.00352526, 0.01437313, 0.09223048])
    assert (params.motor_tau_rise, params.motor_tau_fall) == pytest.approx((0.05545454, 0.24939394))
    # hover speed solves 4 T(w) = m g (RLtools' stored 0.726 does not; see crazyflie.xml)
    assert params.hover_rotor_speed == pytest.approx(0.80612, abs=1e-4)


@pytest.mark.parametrize("name", sorted(VEHICLES))
def test_named_vehicles_compile_with_their_published_values(name):
    params = QuadrotorParams.from_model(load_model(name))
    vehicle = VEHICLES[name]
    if vehicle.mass is not None:
        assert params.mass == pytest.approx(vehicle.mass)
        np.testing.assert_allclose(params.inertia, vehicle.inertia)
        np.testing.assert_allclose(np.abs(params.rotor_positions[:, :2]), vehicle.rotor_offset)
        np.testing.assert_allclose(params.thrust_curve, vehicle.thrust_curve)
        np.testing.assert_allclose(np.abs(params.yaw_torque_coefficients), vehicle.yaw_torque_ratio)
    assert 4 * params.thrust_max > params.mass * params.gravity


def test_l2f_paper_vehicle_hovers_at_its_published_rpm():
    params = QuadrotorParams.from_model(load_model("crazyflie_l2f_paper"))
    assert params.hover_rotor_speed * 21702 == pytest.approx(14475.8, abs=0.5)


def test_torch_path_uses_the_compiled_model_parameters():
    params = QuadrotorParams.from_model(load_model("crazyflie_l2f_paper"))
    physics = TorchPhysics(params, 2)
    np.testing.assert_allclose(physics.mass.numpy(), params.mass)
    np.testing.assert_allclose(physics.inertia.numpy().T, np.tile(params.inertia, (2, 1)), rtol=1e-6)
    np.testing.assert_allclose(physics.rotor_x, params.rotor_positions[:, 0])
    np.testing.assert_allclose(physics.rotor_y, params.rotor_positions[:, 1])
    np.testing.assert_allclose(physics.yaw_coefficients.numpy()[:, 0], params.yaw_torque_coefficients, rtol=1e-6)
    assert physics.gravity == params.gravity and physics.timestep == params.timestep


def test_motor_lag_has_separate_rise_and_fall_time_constants():
    tau_rise, tau_fall, h = 0.05, 0.25, 0.002
    rise, fall = motor.lag_factors(np, h, np.array([tau_rise]), np.array([tau_fall]))
    up, end_up = motor.rotor_speed_substeps(np, np.zeros((1, 4)), np.ones((1, 4)), rise, fall, 25)
    down, end_down = motor.rotor_speed_substeps(np, np.ones((1, 4)), np.zeros((1, 4)), rise, fall, 125)
    assert up[0, 0, 0] == 0.0  # zero-order hold: the first substep uses the initial speed
    assert end_up[0, 0] == pytest.approx(1 - np.exp(-1))  # one rise constant: 63.2 %
    assert end_down[0, 0] == pytest.approx(np.exp(-1))  # one fall constant
    assert np.all(np.diff(up[0, :, 0]) > 0) and np.all(np.diff(down[0, :, 0]) < 0)


def test_the_time_constant_is_read_back_from_its_decay_factor():
    """What the expert reads a vehicle's rotor lag from: the batch keeps only the decay factors."""
    tau = np.array([0.0, 0.001, 0.05, 0.15, 0.3])
    rise, _ = motor.lag_factors(np, 0.002, tau, tau)
    np.testing.assert_allclose(motor.lag_time_constant(np, 0.002, rise)[1:], tau[1:], rtol=1e-9)
    assert motor.lag_time_constant(np, 0.002, rise)[0] < 1e-3  # no lag
    assert np.isfinite(motor.lag_time_constant(np, 0.002, np.ones(1))).all()


def test_substep_thrusts_are_the_thrust_curve_at_the_lagged_speeds():
    """The simulators' expanded evaluation (motor.rotor_thrust_substeps) against the definitions."""
    params = QuadrotorParams.from_model(load_model())
    rng = np.random.default_rng(0)
    speed, setpoint, scale = rng.uniform(0, 1, (4, 50)), rng.uniform(0, 1, (4, 50)), rng.uniform(0.8, 1.2, (4, 50))
    rise, fall = motor.lag_factors(np, params.timestep, rng.uniform(0.01, 0.1, 50), rng.uniform(0.01, 0.1, 50))
    thrust, end = motor.rotor_thrust_substeps(np, speed, setpoint, rise, fall, 5, params.thrust_curve, scale)
    speeds, want_end = motor.rotor_speed_substeps(np, speed, setpoint, rise, fall, 5)
    np.testing.assert_allclose(thrust, motor.thrust_from_speed(speeds, params.thrust_curve, scale), rtol=1e-12)
    np.testing.assert_allclose(end, want_end, rtol=1e-12)


def test_thrust_command_maps_to_fraction_of_max_thrust():
    params = QuadrotorParams.from_model(load_model())
    commands = np.linspace(0.05, 1.0, 20)
    speed = motor.rotor_speed_setpoint(np, commands, params.thrust_curve)
    thrust = motor.thrust_from_speed(speed, params.thrust_curve, 1.0)
    # below c0 (the curve's thrust at zero speed) a command cannot be met: the rotor stops
    met = commands * params.thrust_max >= params.thrust_curve[0]
    np.testing.assert_allclose(thrust[met], commands[met] * params.thrust_max, rtol=1e-12)


@pytest.mark.parametrize("vehicle", sorted(VEHICLES))
def test_hover_command_holds_altitude_for_two_seconds(vehicle):
    """Nominal model, the command the parameters say gives thrust = m g: altitude within 1 mm for 2 s."""
    env = gym.make("robo_rl/CrazyflieHover-v0", vehicle=vehicle, **NO_RANDOMIZATION)
    env.reset(seed=0, options={"initial_state": {}})
    command = env.unwrapped.batch.params.hover_command
    start = env.unwrapped.data.qpos[:3].copy()
    for _ in range(200):
        _, _, terminated, truncated, _ = env.step(np.full(4, command, dtype=np.float32))
        assert not terminated
        np.testing.assert_allclose(env.unwrapped.data.qpos[:3], start, atol=1e-3)
