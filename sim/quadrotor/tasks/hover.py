"""Hover: from a learning-to-fly start (up to 90 degrees of tilt, 1 m/s, 1 rad/s, 10% at rest) to the centre."""

from __future__ import annotations

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.tasks.base import QuadrotorTask

# the vehicle the hover task's initial-state distribution was made for: learning-to-fly's starts were drawn
# for its own vehicle (thrust-to-weight 2.25); with the RLtools model's 1.47 some 90-degree, 1 m/s starts
# cannot be caught inside the 0.6 m box
HOVER_VEHICLE = "crazyflie_l2f_paper"


class Hover(QuadrotorTask):
    """Fly to the centre and stay within the success radius."""

    name = "hover"
    env_id = "robo_rl/CrazyflieHover-v0"
    # Without the proximity bump, trained hover policies drifted as a whole to a steady offset at the success
    # radius (every evaluation episode 0.11 m high at once, success 95% -> 3%); with it, success rose without
    # such collapses on three of three seeds.
    reward_scales = {**QuadrotorTask.reward_scales, "proximity": 1.0}

    def default_config(self) -> QuadrotorEnvConfig:
        """Hover's defaults: learning-to-fly's vehicle and starts."""
        config = super().default_config()
        config.vehicle = HOVER_VEHICLE
        return config
