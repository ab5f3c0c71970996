"""What the sim bridges (sim_bridge_node, arm_sim_bridge_node) share: parameters, the bundle they simulate,
its training env config with randomization off, and the simulation clock on /clock."""

from __future__ import annotations

from typing import Any

from rclpy.node import Node
from rosgraph_msgs.msg import Clock

from robo_rl_ros.core.bundle import BundleError, PolicyBundle, load_bundle
from robo_rl_ros.messages import time_msg
from robo_rl_ros.spin import StartupError

CLOCK_QOS_DEPTH = 10


def declare_parameters(node: Node, defaults: dict[str, Any]) -> dict[str, Any]:
    """Declare every parameter with its default (or type) and return the values given."""
    return {name: node.declare_parameter(name, default).value for name, default in defaults.items()}


def require_simulator(executable: str, missing: ImportError | None) -> None:
    """One startup error if the robo-rl simulator could not be imported."""
    if missing is not None:
        raise StartupError(f"{executable} needs the robo-rl simulator (pip install -e <robo-rl>): {missing}")


def load_sim_bundle(executable: str, path: str) -> PolicyBundle:
    """The bundle whose training environment the bridge simulates; StartupError if absent or invalid."""
    if not path:
        raise StartupError(f"{executable}: parameter bundle_path is required")
    try:
        return load_bundle(path)
    except BundleError as error:
        raise StartupError(f"{executable}: {error}") from error


def sim_env_config(bundle: PolicyBundle, randomization: bool) -> dict[str, Any]:
    """The bundle's training env config; domain randomization off unless `randomization`."""
    env_config = dict(bundle.env_config)
    if not randomization:
        env_config["randomization"] = {"enabled": False}
    return env_config


class ClockPublisher:
    """Publishes the simulation time on /clock (after the state, so nodes on /clock find it there)."""

    def __init__(self, node: Node, enabled: bool):
        self._pub = node.create_publisher(Clock, "/clock", CLOCK_QOS_DEPTH) if enabled else None

    def publish(self, seconds: float) -> None:
        """Announce `seconds` of simulated time (nothing if /clock is off)."""
        if self._pub is not None:
            self._pub.publish(Clock(clock=time_msg(seconds)))
