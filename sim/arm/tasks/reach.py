"""Reach: bring the tool to a point drawn per episode in `reach_box`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.arm.tasks.base import ArmTask
from sim.observation import ObservationLayout

if TYPE_CHECKING:
    from sim.arm.env import ArmTaskConfig


class Reach(ArmTask):
    """The tool within `success_radius` of the goal: success."""

    name = "reach"
    reward_scales = {"reach": 1.0, "success": 0.0}  # reach: exp(-20 |goal - tool|)

    def goals(self, rng: np.random.Generator, cube: np.ndarray, config: ArmTaskConfig) -> np.ndarray:
        """A uniform point in `reach_box` per episode."""
        box = np.array(config.reach_box).T
        return rng.uniform(box[0], box[1], (len(cube), 3))

    def terms(self, obs: np.ndarray, layout: ObservationLayout, cube_start: np.ndarray,
              config: ArmTaskConfig) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`reach`, and `success` where the tool is within the radius."""
        distance = np.linalg.norm(obs[:, layout.slices()["goal_minus_tool"]], axis=1)
        success = distance < config.success_radius
        return {"reach": np.exp(-20.0 * distance), "success": success * 1.0}, success

    def expert(self, obs: np.ndarray, layout: ObservationLayout, action_scale: float,
               cube_half_size: float | np.ndarray) -> np.ndarray:
        """Straight to the goal, gripper open."""
        actions = np.zeros((len(obs), 4))
        actions[:, :3] = obs[:, layout.slices()["goal_minus_tool"]] / action_scale
        actions[:, 3] = -1.0
        return np.clip(actions, -1.0, 1.0)
