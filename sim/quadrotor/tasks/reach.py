"""Reach: from near the centre, fly to a random point within +-(0.5, 0.5, 0.3) m of it and stay there."""

from __future__ import annotations

import dataclasses
from typing import Any

from sim.quadrotor.config import InitialStateConfig, QuadrotorEnvConfig
from sim.quadrotor.tasks.base import QuadrotorTask, Rows

GENTLE_STARTS = InitialStateConfig(position_range=0.05, max_tilt_deg=10.0, velocity_range=0.1,
                                   angular_velocity_range=0.1, hover_fraction=0.0)


class Reach(QuadrotorTask):
    """Fly to a point drawn per episode around the centre."""

    name = "reach"
    env_id = "robo_rl/CrazyflieReach-v0"

    def default_config(self) -> QuadrotorEnvConfig:
        """Reach's defaults: gentle starts, and a box wide enough for the farthest target."""
        config = super().default_config()
        config.initial_state = dataclasses.replace(GENTLE_STARTS)
        config.max_position_error = 1.5
        return config

    def targets(self, m: Any, u: Rows, config: QuadrotorEnvConfig) -> list[Any]:
        """A uniform point within `reach_range` of the centre, per axis."""
        return [config.center[k] + (2.0 * u[k] - 1.0) * config.reach_range[k] for k in range(3)]
