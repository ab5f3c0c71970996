"""A scripted pick expert for the arm tasks: demonstrations and scripted interventions come from it.

Stateless and batched: each action follows from the observation alone. Over the cube, descend with the
gripper open; at the cube, close; once the fingers have closed on it, lift. Far from the cube, move above
it first. Reach: move straight to the goal.
"""

from __future__ import annotations

import numpy as np

from sim.observation import ObservationLayout

HOVER_ABOVE = 0.05  # [m] approach height above the cube centre
CLOSED_MARGIN = 0.001  # [m] finger opening beyond the cube's half size once closed on it (contact margin)


def expert_actions(obs: np.ndarray, layout: ObservationLayout, action_scale: float, task: str = "pick_cube",
                   noise: float = 0.0, rng: np.random.Generator | None = None,
                   cube_half_size: float | np.ndarray = 0.02) -> np.ndarray:
    """Actions (N, 4) in [-1, 1] for observations (N, obs); `noise` adds Gaussian noise (std, per entry).

    The expert is privileged: it knows each episode's cube half size (N,) (to tell a closed grasp)."""
    s = layout.slices()
    n = obs.shape[0]
    actions = np.zeros((n, 4))
    if task == "reach":
        actions[:, :3] = obs[:, s["goal_minus_tool"]] / action_scale
        actions[:, 3] = -1.0
    else:
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
    if noise > 0:
        actions[:, :3] += (rng or np.random.default_rng()).normal(0.0, noise, (n, 3))
    return np.clip(actions, -1.0, 1.0)
