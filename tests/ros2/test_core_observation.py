"""The node's observation, built by the core from the vehicle state, equals the simulator's."""

import math

import numpy as np
import pytest

from robo_rl_ros.core.observation import ActionHistory, QuadrotorObservation, StateHistory, VehicleState
from robo_rl_ros.core.rotations import body_to_world, world_to_body
from sim.quadrotor.env import QuadrotorEnv


def _env(bundle, **overrides):
    config = dict(bundle.env_config, randomization={"enabled": False}, **overrides)
    return QuadrotorEnv(config=config)


@pytest.mark.parametrize("task", ["hover", "reach"])
def test_observation_equals_simulator(hover_bundle, task):
    env = _env(hover_bundle, task=task)
    builder = QuadrotorObservation(hover_bundle)
    assert builder.history_length == env.config.action_history == 8
    rng = np.random.default_rng(3)
    target = np.array([0.1, -0.2, 1.1])
    sim_obs, _ = env.reset(seed=1, options={"target": target, "initial_state": {
        "position": [0.2, -0.1, 1.0], "quaternion": [0.9, 0.2, -0.3, 0.1], "velocity": [0.5, -0.3, 0.2],
        "angular_velocity": [1.0, -2.0, 0.5]}})
    history = ActionHistory(builder.history_length, 4, np.full(4, hover_bundle.vehicle_parameters["hover_command"]))
    for step in range(12):
        pos, quat, vel, angvel = (x[:, 0].copy() for x in env.batch.physics.state())
        # what an Odometry message carries: twist in the body frame (child_frame_id); the node rotates it back
        body_velocity = world_to_body(quat, vel)
        state = VehicleState(pos, quat, body_to_world(quat, body_velocity), angvel)
        obs = builder.build(state, target, np.zeros(3), history)
        np.testing.assert_allclose(obs, sim_obs, atol=2e-6, rtol=0, err_msg=f"step {step}")
        action = rng.uniform(0.2, 0.7, size=4)
        sim_obs, *_ = env.step(action)
        history.push(action)
    # the history really is most recent first: the last action sits right after the body rates
    np.testing.assert_allclose(sim_obs[18:22], action, atol=1e-6)


def test_observation_in_a_heading_frame_is_the_simulators_reference(state_history_policy):
    """In the frame of a heading (the policy's take-over heading) the observation is what
    sim.quadrotor.observation.in_heading_frame makes of the world-frame one."""
    from sim.quadrotor.observation import in_heading_frame

    builder = QuadrotorObservation(state_history_policy)
    lengths = builder.history_length, builder.state_history_length
    assert builder.state_history_length and builder.position_error_limit
    rng = np.random.default_rng(4)
    history = ActionHistory(builder.history_length, 4, np.full(4, 0.4))
    history.push(rng.uniform(0, 1, 4))
    for yaw in (2.9, -1.2, math.pi):
        quat = rng.standard_normal(4)
        state = VehicleState(rng.normal(0, 0.3, 3) + [0, 0, 1], quat / np.linalg.norm(quat), rng.normal(0, 0.5, 3),
                             rng.normal(0, 2.0, 3))
        # (fresh state histories: each holds its observation's own velocity error, in its frame)
        args = (state, np.array([0.1, 0.0, 1.1]), np.array([0.1, -0.2, 0.0]), history)
        world = builder.build(*args, StateHistory(builder.state_history_length))
        framed = builder.build(*args, StateHistory(builder.state_history_length), yaw)
        np.testing.assert_allclose(framed, in_heading_frame(world, yaw, *lengths), atol=2e-6, rtol=0)
        assert np.abs(framed - world).max() > 0.05


def test_history_order():
    history = ActionHistory(3, 2, np.array([0.5, 0.5]))
    history.push(np.array([1.0, 2.0]))
    history.push(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(history.flat(), [3.0, 4.0, 1.0, 2.0, 0.5, 0.5])
    history.reset()
    np.testing.assert_array_equal(history.flat(), [0.5] * 6)


def test_rotation_helpers_agree_with_the_matrix():
    # the tick's float-arithmetic rotations against the rotation matrix (and its Euler angles)
    from robo_rl_ros.core.rotations import matrix_to_euler_zyx, quat_to_matrix
    rng = np.random.default_rng(0)
    for _ in range(20):
        quat = rng.standard_normal(4)
        quat /= np.linalg.norm(quat)
        vector = rng.standard_normal(3)
        matrix = quat_to_matrix(quat)
        assert np.allclose(body_to_world(quat, vector), matrix @ vector)
        assert np.allclose(world_to_body(quat, matrix @ vector), vector)
        roll, pitch, yaw = matrix_to_euler_zyx(matrix)
        cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
        rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
        ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
        rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
        assert np.allclose(rz @ ry @ rx, matrix)


@pytest.fixture(scope="module")
def state_history_policy(state_history_bundle):
    """The state-history bundle (4 past velocity errors and body rates) as the node loads it."""
    from robo_rl_ros.core.bundle import load_bundle

    return load_bundle(state_history_bundle)


def test_observation_with_a_state_history_equals_the_simulators_and_starts_over_with_an_episode(state_history_policy):
    env = _env(state_history_policy)
    builder = QuadrotorObservation(state_history_policy)
    assert builder.state_history_length == env.config.state_history == 4
    hover = np.full(4, state_history_policy.vehicle_parameters["hover_command"])
    history, states = ActionHistory(builder.history_length, 4, hover), StateHistory(builder.state_history_length)
    limit = builder.position_error_limit
    assert limit == env.config.position_error_limit == 0.15
    rng = np.random.default_rng(4)
    farthest = 0.0
    # the second: a take-over, where both histories start over; its setpoint 0.5 m away is observed at the limit
    for episode, target in enumerate([np.array([0.1, -0.2, 1.1]), np.array([0.5, -0.3, 1.2])]):
        sim_obs, _ = env.reset(seed=episode, options={"target": target, "initial_state": {
            "position": [0.2, -0.1, 1.0], "quaternion": [0.9, 0.2, -0.3, 0.1], "velocity": [0.5, -0.3, 0.2 * episode],
            "angular_velocity": [1.0, -2.0, 0.5 + episode]}})
        history.reset()
        states.reset()
        first = sim_obs[12:18]
        np.testing.assert_array_equal(sim_obs[50:], np.tile(first, 4))  # the simulator's definition, at a start
        for step in range(10):
            state = VehicleState(*(x[:, 0].copy() for x in env.batch.physics.state()))
            obs = builder.build(state, target, np.zeros(3), history, states)
            np.testing.assert_allclose(obs, sim_obs, atol=2e-6, rtol=0, err_msg=f"episode {episode} step {step}")
            farthest = max(farthest, float(np.linalg.norm(obs[:3])))
            states.push(builder.observed(obs))
            action = rng.uniform(0.2, 0.7, size=4)
            previous = sim_obs
            sim_obs, *_ = env.step(action)
            history.push(action)
            np.testing.assert_array_equal(sim_obs[50:56], previous[12:18])  # ... and later: newest first
    assert farthest == pytest.approx(limit, rel=1e-5)


def test_a_bundle_with_an_unusable_position_error_limit_is_refused_in_one_line(state_history_policy):
    import dataclasses

    from robo_rl_ros.core.bundle import BundleError
    for value in (-0.1, float("nan"), "far", True):
        broken = dataclasses.replace(state_history_policy,
                                     env_config={**state_history_policy.env_config, "position_error_limit": value})
        with pytest.raises(BundleError, match="position_error_limit"):
            QuadrotorObservation(broken)


def test_the_controller_starts_its_state_history_over_when_it_takes_over(state_history_policy):
    from robo_rl_ros.core.quadrotor import RESUME_STATES, QuadrotorPolicyController, QuadrotorSettings

    controller = QuadrotorPolicyController(state_history_policy, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05))

    def state(vx: float, rate: float) -> VehicleState:
        return VehicleState(np.array([0.0, 0.0, 0.95]), np.array([1.0, 0.0, 0.0, 0.0]), np.array([vx, 0.0, 0.0]),
                            np.array([rate, 0.0, 0.0]))

    for k in range(RESUME_STATES - 1, 0, -1):  # the stream before the policy takes over
        controller.update_state(-0.01 * k, state(0.1, 0.5))
    observations = []
    for k in range(3):
        controller.update_state(0.01 * k, state(0.1 * (k + 1), 0.5 * (k + 1)))
        observations.append(controller.tick(0.01 * k + 0.005).observation)
    own = lambda obs: obs[12:18]  # noqa: E731
    np.testing.assert_array_equal(observations[0][50:], np.tile(own(observations[0]), 4))
    np.testing.assert_array_equal(observations[2][50:],
                                  np.concatenate([own(observations[1]), own(observations[0]), own(observations[0]),
                                                  own(observations[0])]))
    assert not controller.tick(0.2).flying  # the state went stale: stopped
    for k in range(RESUME_STATES - 1, 0, -1):  # the state is back: a steady stream again, then the takeover
        controller.update_state(0.3 - 0.01 * k, state(0.3, 0.3))
    controller.update_state(0.3, state(-0.2, -1.0))
    resumed = controller.tick(0.305)
    assert resumed.flying
    np.testing.assert_array_equal(resumed.observation[50:], np.tile(own(resumed.observation), 4))
    np.testing.assert_allclose(own(resumed.observation), [-0.2, 0, 0, -1.0, 0, 0], atol=1e-7)
