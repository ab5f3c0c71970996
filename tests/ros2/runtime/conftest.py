"""Tests against the real ROS 2 runtime (rclpy Jazzy from PyPI wheels), run by `make ros-test` in
.venv-ros inside a loopback-only network namespace (ros2_ws/scripts/netns_run.sh).

Session fixtures: the package built by colcon into a temporary directory, and an rclpy context with a
probe node for the test's own publishers and subscriptions.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HOVER_BUNDLE = ROOT / "tests" / "ros2" / "data" / "hover_bundle"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "ros2_ws" / "src" / "robo_rl_ros"))  # the QoS profiles and message helpers


def pytest_configure(config):
    if not os.environ.get("ROBO_RL_IN_NETNS"):
        raise pytest.UsageError("run these tests through ros2_ws/scripts/netns_run.sh (make ros-test): "
                                "DDS traffic must stay inside a loopback-only network namespace")
    # pytest-xdist workers share the namespace: each gets its own DDS domain (its nodes inherit it), so that
    # two tests' nodes of the same names and topics never see each other
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        os.environ["ROS_DOMAIN_ID"] = str(10 + int(worker[2:]))


@pytest.fixture(scope="session")
def workspace():
    """colcon build of ros2_ws into a temporary directory: {"base": Path, "install": Path, "colcon": str}."""
    base = Path(tempfile.mkdtemp(prefix="robo_rl_ros_ws-"))
    colcon = str(Path(sys.executable).with_name("colcon"))
    result = subprocess.run(
        [colcon, "--log-base", str(base / "log"), "build", "--base-paths", str(ROOT / "ros2_ws" / "src"),
         "--build-base", str(base / "build"), "--install-base", str(base / "install")],
        cwd=base, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    yield {"base": base, "install": base / "install", "colcon": colcon}
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def probe():
    """An rclpy context and a node for the test's own publishers and subscriptions."""
    import rclpy

    rclpy.init()
    node = rclpy.create_node("robo_rl_test_probe")
    yield node
    node.destroy_node()
    rclpy.shutdown()
