"""The ROS-independent core against the repository's committed hover bundle (tests/ros2/data)."""

import os
import sys
from pathlib import Path

import numpy as np

from robo_rl_ros.core.bundle import load_bundle
from robo_rl_ros.core.inference import OnnxPolicy
from robo_rl_ros.core.quadrotor import RESUME_STATES, QuadrotorPolicyController, QuadrotorSettings
from robo_rl_ros.core.observation import VehicleState

BUNDLE = Path(os.environ.get("ROBO_RL_TEST_BUNDLE",
                             Path(__file__).resolve().parents[4] / "tests" / "ros2" / "data" / "hover_bundle"))


def test_core_imports_neither_torch_nor_mujoco_nor_rclpy():
    assert not {"torch", "mujoco", "rclpy"} & set(sys.modules)


def test_recorded_pairs_in_onnxruntime_and_in_the_numpy_tick():
    bundle = load_bundle(BUNDLE)
    policy = OnnxPolicy(bundle)
    np.testing.assert_allclose(policy.batch(bundle.recorded_observations), bundle.recorded_actions, atol=1e-5, rtol=0)
    assert policy.engine == "numpy"
    np.testing.assert_allclose([policy(obs) for obs in bundle.recorded_observations], bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def test_tick_flies_and_stops():
    controller = QuadrotorPolicyController(load_bundle(BUNDLE), QuadrotorSettings((0.0, 0.0, 1.0)))
    for i in range(RESUME_STATES):  # it takes over on a steady state stream
        controller.update_state(0.01 * i, VehicleState(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0, 0, 0]),
                                                       np.zeros(3), np.zeros(3)))
    assert controller.tick(0.01 * RESUME_STATES).flying
    assert not controller.tick(1.0).flying
