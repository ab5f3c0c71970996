"""Observation layout of the quadrotor tasks: named fields, sizes, units and frames (see sim.observation).

The layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so its order and meaning change only with a new env version.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from sim.observation import ObservationField, ObservationLayout


# The observation fields a state history holds, per past control step: velocity error and body rates.
STATE_HISTORY_FIELDS = slice(12, 18)
STATE_HISTORY_SIZE = STATE_HISTORY_FIELDS.stop - STATE_HISTORY_FIELDS.start


def quadrotor_layout(action_history: int, state_history: int = 0) -> ObservationLayout:
    """Observation layout for a quadrotor task with `action_history` past actions and `state_history` past
    observed velocity errors and body rates."""
    fields = [
        # (with config.position_error_limit, scaled down to that norm where longer: the layout, which checkpoints
        # and bundles are checked against, stays the same; policy.json records the limit in its env config and
        # deployment constants)
        ObservationField("position_error", 3, "m", "position minus reference position, world frame"),
        ObservationField("rotation_matrix", 9, "1", "body-to-world rotation matrix, row-major"),
        ObservationField("velocity_error", 3, "m/s",
                         "linear velocity minus reference velocity, world frame (the velocity for hover/reach)"),
        ObservationField("angular_velocity", 3, "rad/s", "body rates, body frame (gyro)"),
    ]
    if action_history:
        fields.append(ObservationField(
            "action_history", 4 * action_history, "1",
            "previous normalized thrust commands, most recent first, motors M1..M4 per step",
        ))
    if state_history:
        fields.append(ObservationField(
            "state_history", STATE_HISTORY_SIZE * state_history, "m/s, rad/s",
            "the velocity error (3) and body rates (3) of the previous observations as observed (noise included), "
            "most recent first; at an episode's start (or a policy's take-over) every entry holds the first "
            "observation's",
        ))
    return ObservationLayout(tuple(fields))


def unread_past_states(action_history: int, own: int, observed: int) -> slice:
    """The entries of an observation with `observed` past states (or of a privileged observation, which begins
    with one) that a policy trained on `own` <= `observed` of them, with the same `action_history`, does not
    read: the older past states."""
    start = quadrotor_layout(action_history, own).size
    return slice(start, start + STATE_HISTORY_SIZE * (observed - own))


def limited_position_error(m: Any, error: Sequence[Any], limit: float) -> list[Any]:
    """The position error (3 rows) as observed: scaled down to norm `limit` [m] where it is longer (0: as it is).
    Written against `m` (sim.kernel_expr) so that the native step compiles the same expression."""
    if not limit:
        return list(error)
    squared = error[0] * error[0] + error[1] * error[1] + error[2] * error[2]
    beyond = squared > limit * limit
    # the square root of the larger of the two keeps the division finite where the error is 0
    scale = limit / m.sqrt(m.where(beyond, squared, m.ones_like(squared) * (limit * limit)))
    return [m.where(beyond, e * scale, e) for e in error]


def heading(rotation_matrix: Any) -> Any:
    """The heading [rad] of body-to-world rotation matrices (row-major, 9 entries in the last axis): the yaw of
    their z-y-x Euler angles, the angle of the body x axis about world z."""
    if isinstance(rotation_matrix, torch.Tensor):
        return torch.atan2(rotation_matrix[..., 3], rotation_matrix[..., 0])
    rotation_matrix = np.asarray(rotation_matrix)
    return np.arctan2(rotation_matrix[..., 3], rotation_matrix[..., 0])


def in_heading_frame(obs: Any, yaw: Any, action_history: int, state_history: int = 0) -> Any:
    """Observations (last axis: `quadrotor_layout(action_history, state_history)`) as seen in a frame turned
    about world z by `yaw` [rad, one per observation]: the world-frame fields (position error, rotation matrix,
    velocity error and the state history's velocity errors) turned by -yaw, the body-frame ones as they are.

    The deployment targets observe in the frame of the heading the policy took over at, so that a vehicle
    facing any way starts as a training episode starting level at heading 0 does: the dynamics do not depend
    on heading (gravity and thrust do not turn with it). This is their reference."""
    if isinstance(obs, torch.Tensor):
        yaw = torch.as_tensor(yaw, dtype=obs.dtype, device=obs.device)
        cos, sin, out = torch.cos(yaw), torch.sin(yaw), obs.clone()
    else:
        obs = np.asarray(obs)
        yaw = np.asarray(yaw, dtype=np.float64)
        cos, sin, out = np.cos(yaw).astype(obs.dtype), np.sin(yaw).astype(obs.dtype), obs.copy()
    layout = quadrotor_layout(action_history, state_history)
    offsets = {name: part.start for name, part in layout.slices().items()}
    # the x index of each world-frame vector (its y follows): position error, velocity error, the rotation
    # matrix's columns (x row, y row: 3 apart) and each past step's velocity error
    rows = [(offsets["position_error"], 1), (offsets["velocity_error"], 1)]
    rows += [(offsets["rotation_matrix"] + column, 3) for column in range(3)]
    if state_history:
        rows += [(offsets["state_history"] + STATE_HISTORY_SIZE * step, 1) for step in range(state_history)]
    pairs = [(x, x + apart) for x, apart in rows]
    for x, y in pairs:
        out[..., x] = cos * obs[..., x] + sin * obs[..., y]
        out[..., y] = -sin * obs[..., x] + cos * obs[..., y]
    return out
