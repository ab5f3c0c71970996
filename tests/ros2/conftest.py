"""Tests of the ROS 2 package. The core's tests run here, in the main .venv (numpy, onnxruntime, the
simulator); those under runtime/ need rclpy and run in .venv-ros (make ros-test), not in this session."""

from pathlib import Path

import pytest

HOVER_BUNDLE = Path(__file__).resolve().parent / "data" / "hover_bundle"

collect_ignore = ["runtime"]


@pytest.fixture(scope="session")
def hover_bundle():
    """The committed bundle of a trained hover policy: bench/results/hover_run_seed1 (99% success over 100
    seeded episodes), of the three training seeds the one with the smallest steady hover offset (2.0 cm;
    seed 0: 3.8 cm)."""
    from robo_rl_ros.core.bundle import load_bundle

    return load_bundle(HOVER_BUNDLE)
