"""Episode starts drawn from counters: reproducible per env and episode, and distributed as specified."""

import math

import numpy as np
import pytest
import torch

from sim.quadrotor import episode_starts as starts
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.model import QuadrotorParams, load_model
from sim.quadrotor.rotations import quat_to_matrix, tilt_angle, tilted_towards

NOMINAL = QuadrotorParams.from_model(load_model())


def test_a_start_depends_only_on_the_key_env_and_episode():
    """The same (key, env, episode) gives the same start in any batch, in numpy and torch; any other
    key, env or episode gives another."""
    config = make_config("reach")
    env, episode = np.array([3, 7, 7, 500]), np.array([0, 0, 1, 12])
    rows = starts.draw(np, 99, env, episode, NOMINAL, config)
    alone = starts.draw(np, 99, env[2:3], episode[2:3], NOMINAL, config)
    np.testing.assert_array_equal(alone[:, 0], rows[:, 2])
    in_torch = starts.draw(torch, torch.tensor([99]), torch.as_tensor(env), torch.as_tensor(episode), NOMINAL, config)
    np.testing.assert_allclose(in_torch.numpy(), rows, rtol=1e-14, atol=1e-15)
    other_key = starts.draw(np, 98, env, episode, NOMINAL, config)
    assert not np.isclose(other_key, rows).all(0).any()
    assert len({tuple(column) for column in rows.T}) == len(env)


def test_uniforms_are_uniform_and_independent():
    u = starts.uniforms(np, 5, np.arange(50_000), np.zeros(50_000, dtype=np.int64))
    assert u.shape == (starts.UNIFORM_COUNT, 50_000) and u.min() >= 0.0 and u.max() < 1.0
    np.testing.assert_allclose(u.mean(1), 0.5, atol=0.01)
    np.testing.assert_allclose(u.var(1), 1 / 12, atol=0.003)
    correlation = np.corrcoef(u) - np.eye(len(u))
    assert np.abs(correlation).max() < 0.03
    following = starts.uniforms(np, 5, np.arange(50_000), np.ones(50_000, dtype=np.int64))
    assert abs(np.corrcoef(u[0], following[0])[0, 1]) < 0.03  # consecutive episodes of an env


@pytest.mark.parametrize("max_tilt_deg", [90.0, 180.0, 20.0])
def test_tilt_angles_follow_uniform_orientations_within_the_bound(max_tilt_deg):
    """The inverse-CDF tilt sampler against learning-to-fly's rejection sampling of uniform rotations."""
    bound = math.radians(max_tilt_deg)
    rng = np.random.default_rng(0)
    candidates = rng.uniform(0.0, bound, 400_000)
    reference = candidates[rng.uniform(0.0, 1.0 - math.cos(bound), candidates.size) <= 1.0 - np.cos(candidates)]
    angles = tilt_angle(np, rng.uniform(size=100_000), bound)
    assert angles.min() >= 0.0 and angles.max() <= bound + 1e-12
    quantiles = [0.05, 0.25, 0.5, 0.75, 0.95]
    np.testing.assert_allclose(np.quantile(angles, quantiles), np.quantile(reference, quantiles), atol=0.01 * bound)


def test_restarted_episodes_continue_each_envs_sequence():
    """Reset from the host and restart inside the step draw episode e + 1 of the env that ended."""
    batch = QuadrotorBatch(make_config("hover"), 6, "torch", seed=3, autoreset=True)
    batch.reset()
    np.testing.assert_array_equal(batch.episode, 0)
    action = torch.full((6, 4), 0.05)  # every vehicle falls and crashes
    while not bool((batch.episode > 0).all()):
        batch.step(action)
    episodes = batch.episode.numpy()
    current = batch.params_info()
    expected = starts.draw(np, batch.seed_key, np.arange(6), episodes, batch.params, batch.config)
    np.testing.assert_allclose(current["mass"], starts.field(expected, "mass", 0), rtol=1e-12)
    batch.seed(3)
    batch.reset()
    np.testing.assert_array_equal(batch.episode, 0)  # reseeding starts every env's sequence again


def test_a_tilt_towards_a_direction_leans_the_thrust_axis_there_and_turns_the_body_about_it():
    rng = np.random.default_rng(0)
    direction, tilt, heading = rng.uniform(-4.0, 4.0, 64), rng.uniform(0.0, 3.0, 64), rng.uniform(-4.0, 4.0, 64)
    quat = tilted_towards(np, direction, tilt, heading)
    np.testing.assert_allclose(np.linalg.norm(quat, axis=0), 1.0, atol=1e-12)
    rotation = quat_to_matrix(np, quat).T.reshape(-1, 3, 3)  # body to world
    thrust_axis = np.stack([np.sin(tilt) * np.cos(direction), np.sin(tilt) * np.sin(direction), np.cos(tilt)], 1)
    np.testing.assert_allclose(rotation[:, :, 2], thrust_axis, atol=1e-12)
    # heading 0: the body's x axis points down the slope, in the plane of the tilt; a heading turns it about z
    down_slope = np.stack([np.cos(tilt) * np.cos(direction), np.cos(tilt) * np.sin(direction), -np.sin(tilt)], 1)
    across = np.cross(thrust_axis, down_slope)
    np.testing.assert_allclose(rotation[:, :, 0], np.cos(heading)[:, None] * down_slope
                               + np.sin(heading)[:, None] * across, atol=1e-12)
    np.testing.assert_allclose(tilted_towards(torch, *(torch.as_tensor(a) for a in (direction, tilt, heading))).numpy(),
                               quat, atol=1e-12)
