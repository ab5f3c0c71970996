"""Pick-cube: grasp the cube and lift it `lift_height` above where it started."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.arm.tasks.base import ArmTask
from sim.observation import ObservationLayout

if TYPE_CHECKING:
    from sim.arm.env import ArmTaskConfig

HOVER_ABOVE = 0.05  # [m] the expert's approach height above the cube centre
CLOSED_MARGIN = 0.001  # [m] finger opening beyond the cube's half size once closed on it (contact margin)


class PickCube(ArmTask):
    """The cube lifted `lift_height` above its start: success."""

    name = "pick_cube"
    # approach: 1 - tanh(3 |cube - tool|) (SERL's exp(-20 d) is below 1e-4 where the tool starts, 0.47 m from
    # the cube: the tanh keeps a gradient towards the cube over the whole workspace, robosuite-style);
    # lift: the share of lift_height the cube has risen, clipped to [0, 1]
    reward_scales = {"approach": 0.3, "lift": 0.7, "success": 0.0}

    def goals(self, rng: np.random.Generator, cube: np.ndarray, config: ArmTaskConfig) -> np.ndarray:
        """The lift goal: `lift_height` above the cube's start."""
        return cube + (0.0, 0.0, config.lift_height)

    def terms(self, obs: np.ndarray, layout: ObservationLayout, cube_start: np.ndarray,
              config: ArmTaskConfig) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """`approach`, `lift`, and `success` once the cube has risen `lift_height`."""
        s = layout.slices()
        lift = obs[:, s["cube_position"]][:, 2] - cube_start[:, 2]
        success = lift >= config.lift_height
        approach = 1.0 - np.tanh(3.0 * np.linalg.norm(obs[:, s["cube_minus_tool"]], axis=1))
        return {"approach": approach, "lift": np.clip(lift / config.lift_height, 0.0, 1.0),
                "success": success * 1.0}, success

    def expert(self, obs: np.ndarray, layout: ObservationLayout, action_scale: float,
               cube_half_size: float | np.ndarray) -> np.ndarray:
        """Stateless, from the observation alone: far from the cube, move above it; over it, descend with the
        gripper open; at it, close; once the fingers have closed on it (the expert knows each cube's half size),
        lift."""
        s = layout.slices()
        actions = np.zeros((len(obs), 4))
        rel = obs[:, s["cube_minus_tool"]]
        opening = obs[:, s["gripper_opening"]][:, 0]
        horizontal = np.linalg.norm(rel[:, :2], axis=1)
        holding = (opening < cube_half_size + CLOSED_MARGIN) & (horizontal < 0.02) & (np.abs(rel[:, 2]) < 0.02)
        at_cube = (horizontal < 0.01) & (np.abs(rel[:, 2]) < 0.01)
        aligned = horizontal < 0.01
        move = np.where(aligned[:, None], rel, rel + (0.0, 0.0, HOVER_ABOVE))
        actions[:, :3] = np.where(holding[:, None], (0.0, 0.0, action_scale), np.where(at_cube[:, None], 0.0, move))
        actions[:, :3] /= action_scale
        actions[:, 3] = np.where(holding | at_cube, 1.0, -1.0)
        return np.clip(actions, -1.0, 1.0)
