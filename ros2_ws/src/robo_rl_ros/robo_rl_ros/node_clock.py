"""The node's clock in seconds, cheap enough to read on every control tick."""

from __future__ import annotations

import time

from rclpy.node import Node
from rclpy.parameter import Parameter


class NodeSeconds:
    """The time of `node`'s clock in seconds: simulated time (/clock) under `use_sim_time`, otherwise the
    system time, which is what the ROS clock reads then (both CLOCK_REALTIME).

    rclpy's `Clock.now()` and even `Clock.ros_time_is_active` take 50-100 us on a cold cache, a large part of
    a control tick, so the system time is read directly and `use_sim_time` is followed through the
    parameter instead of asking the clock.
    """

    def __init__(self, node: Node):
        self._clock = node.get_clock()
        self._sim_time = bool(node.get_parameter("use_sim_time").value)
        node.add_post_set_parameters_callback(self._follow_use_sim_time)

    def _follow_use_sim_time(self, parameters: list[Parameter]) -> None:
        for parameter in parameters:
            if parameter.name == "use_sim_time":
                self._sim_time = bool(parameter.value)

    def __call__(self) -> float:
        """Now, in seconds."""
        return self._clock.now().nanoseconds * 1e-9 if self._sim_time else time.time()
