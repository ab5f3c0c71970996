"""The heading frame the deployment targets observe in (sim.quadrotor.observation.in_heading_frame): a vehicle
turned about z, observed in a frame turned with it, flies as the unturned vehicle does, step for step. This is
what lets the Crazyflie app and the ROS 2 node hand a vehicle facing any way to a policy that trained at
headings within 90 degrees of +x."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.observation import heading, in_heading_frame, quadrotor_layout
from sim.quadrotor.rotations import turned_about_z

ACTION_HISTORY, STATE_HISTORY = 8, 2


@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
@pytest.mark.parametrize("yaw", [2.5, -math.pi, 0.7])
def test_a_turned_vehicle_observed_in_its_heading_frame_flies_as_the_unturned_one(backend, yaw):
    config = make_config("hover", action_history=ACTION_HISTORY, state_history=STATE_HISTORY,
                         position_error_limit=0.15, max_position_error=2.0,
                         randomization={"enabled": False})  # (the training box is per world axis: not turned)
    batch = QuadrotorBatch(config, 2, backend, seed=0)
    center = np.asarray(config.center)
    # a tilted, moving, spinning start 0.3 m off the target, and the same start turned by `yaw` about the target
    offset, velocity = np.array([0.2, -0.2, 0.1]), np.array([0.3, -0.4, 0.2])
    quaternion = np.array([0.95, 0.2, -0.15, 0.1])
    quaternion /= np.linalg.norm(quaternion)
    rates = np.array([1.5, -1.0, 0.5])
    turned = turned_about_z(yaw, center, center + offset, quaternion, velocity)
    start = {"position": np.stack([center + offset, turned[0]]), "quaternion": np.stack([quaternion, turned[1]]),
             "velocity": np.stack([velocity, turned[2]]), "angular_velocity": np.stack([rates, rates])}
    obs = np.asarray(batch.reset(options={"initial_state": start}), dtype=np.float64)
    layout = quadrotor_layout(ACTION_HISTORY, STATE_HISTORY)
    rotation = layout.slices()["rotation_matrix"]
    turned_by = float(heading(obs[1, rotation]) - heading(obs[0, rotation]))
    assert math.remainder(turned_by - yaw, 2 * math.pi) == pytest.approx(0.0, abs=1e-6)
    assert np.abs(obs[1] - obs[0]).max() > 0.1  # in the world frame the two differ
    rng = np.random.default_rng(0)
    hover = float(batch.params.hover_command)
    for step in range(60):
        np.testing.assert_allclose(in_heading_frame(obs[1], yaw, ACTION_HISTORY, STATE_HISTORY), obs[0],
                                   atol=2e-4, rtol=0, err_msg=f"step {step}")
        # near hover, different per motor: the vehicle tilts and turns, and stays in the arena
        action = np.tile(hover + rng.uniform(-0.03, 0.03, 4), (2, 1)).astype(np.float32)
        result = batch.step(action)
        obs = np.asarray(result.observation, dtype=np.float64)
        assert not np.asarray(result.terminated).any()


def test_the_heading_frame_of_tensors_and_arrays_agree_and_a_zero_heading_is_the_world_frame():
    rng = np.random.default_rng(1)
    size = quadrotor_layout(ACTION_HISTORY, STATE_HISTORY).size
    obs = rng.standard_normal((5, size)).astype(np.float32)
    yaw = rng.uniform(-math.pi, math.pi, 5)
    array = in_heading_frame(obs, yaw, ACTION_HISTORY, STATE_HISTORY)
    tensor = in_heading_frame(torch.as_tensor(obs), torch.as_tensor(yaw), ACTION_HISTORY, STATE_HISTORY)
    np.testing.assert_allclose(tensor.numpy(), array, atol=1e-6)
    np.testing.assert_array_equal(in_heading_frame(obs, np.zeros(5), ACTION_HISTORY, STATE_HISTORY), obs)
    # body rates and action history are body-frame: untouched at any heading
    slices = quadrotor_layout(ACTION_HISTORY, STATE_HISTORY).slices()
    for name in ("angular_velocity", "action_history"):
        np.testing.assert_array_equal(array[:, slices[name]], obs[:, slices[name]])
