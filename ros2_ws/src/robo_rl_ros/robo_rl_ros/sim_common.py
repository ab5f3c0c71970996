"""What the sim bridges (sim_bridge_node, arm_sim_bridge_node) share: `SimulatedRobotNode`, their common
start (parameters, the bundle they simulate, its training env config with randomization off, the simulation
clock on /clock, `~/reset` and the stepping timer)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from std_srvs.srv import Trigger

from robo_rl_ros.core.bundle import BundleError, PolicyBundle, load_bundle
from robo_rl_ros.messages import time_msg
from robo_rl_ros.spin import StartupError

CLOCK_QOS_DEPTH = 10
# every bridge's parameters: the bundle, whether to randomize as in training, the seed, the world frame, /clock
COMMON_PARAMETERS: dict[str, Any] = {"bundle_path": "", "randomization": False, "seed": 0, "frame_id": "world",
                                     "publish_clock": True}


class ClockPublisher:
    """Publishes the simulation time on /clock (after the state, so nodes on /clock find it there)."""

    def __init__(self, node: Node, enabled: bool):
        self._pub = node.create_publisher(Clock, "/clock", CLOCK_QOS_DEPTH) if enabled else None

    def publish(self, seconds: float) -> None:
        """Announce `seconds` of simulated time (nothing if /clock is off)."""
        if self._pub is not None:
            self._pub.publish(Clock(clock=time_msg(seconds)))


class SimulatedRobotNode(Node, ABC):
    """A robo-rl simulator as a ROS 2 robot: the start both bridges share.

    Declares `COMMON_PARAMETERS` and the bridge's own (`parameters`: name -> default or type) into
    `self.params`, loads the bundle (`self.bundle`) and its training env config (`self.env_config`,
    randomization off unless the `randomization` parameter, the cameras' appearance included), and opens /clock (`self.clock`). One
    StartupError if the simulator could not be imported (`simulator_missing`) or the bundle is absent or
    invalid. The bridge then builds its simulation and calls `start`.
    """

    def __init__(self, name: str, parameters: dict[str, Any], simulator_missing: ImportError | None):
        super().__init__(name)
        if simulator_missing is not None:
            raise StartupError(f"{name} needs the robo-rl simulator (pip install -e <robo-rl>): {simulator_missing}")
        defaults = {**COMMON_PARAMETERS, **parameters}
        self.params: dict[str, Any] = {key: self.declare_parameter(key, default).value
                                       for key, default in defaults.items()}
        if not self.params["bundle_path"]:
            raise StartupError(f"{name}: parameter bundle_path is required")
        try:
            self.bundle: PolicyBundle = load_bundle(self.params["bundle_path"])
        except BundleError as error:
            raise StartupError(f"{name}: {error}") from error
        self.env_config: dict[str, Any] = dict(self.bundle.env_config)
        if not self.params["randomization"]:
            self.env_config["randomization"] = {"enabled": False}
            if isinstance(self.env_config.get("cameras"), dict):  # lights, colours and camera poses as modelled
                self.env_config["cameras"] = {**self.env_config["cameras"], "randomization": {"enabled": False}}
        self.clock = ClockPublisher(self, self.params["publish_clock"])

    def start(self, period: float) -> None:
        """Offer `~/reset` and step the simulation every `period` seconds from now on."""
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._timer = self.create_timer(period, self._step)

    @abstractmethod
    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Restart the simulation (the `~/reset` service)."""

    @abstractmethod
    def _step(self) -> None:
        """Advance the simulation one timer period and publish what is due."""
