"""Figure-eight: track a lemniscate of Gerono around the centre, two laps per episode."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.tasks.base import QuadrotorTask, Rows
from sim.quadrotor.tasks.reach import GENTLE_STARTS


class FigureEight(QuadrotorTask):
    """Track x = A sin(w t), y = A/2 sin(2 w t) around the centre (A `figure_eight_amplitude`, one lap per
    `figure_eight_period`)."""

    name = "figure_eight"
    env_id = "robo_rl/CrazyflieFigureEight-v0"

    def default_config(self) -> QuadrotorEnvConfig:
        """Figure-eight's defaults: gentle starts, two laps, success held for a whole lap within 0.15 m."""
        config = super().default_config()
        config.initial_state = dataclasses.replace(GENTLE_STARTS)
        config.episode_seconds = 2 * config.figure_eight_period
        config.success_radius = 0.15
        config.success_window_seconds = config.figure_eight_period
        return config

    def reference(self, m: Any, config: QuadrotorEnvConfig, target: Rows, time: Any) -> tuple[list[Any], list[Any]]:
        """The point of the figure-eight at `time` and its velocity."""
        omega = 2.0 * math.pi / config.figure_eight_period
        amplitude = config.figure_eight_amplitude
        phase = omega * time
        zero = m.zeros_like(time)
        position = [target[0] + amplitude * m.sin(phase), target[1] + 0.5 * amplitude * m.sin(2.0 * phase), target[2]]
        velocity = [amplitude * omega * m.cos(phase), amplitude * omega * m.cos(2.0 * phase), zero]
        return position, velocity
