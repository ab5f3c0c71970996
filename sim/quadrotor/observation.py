"""Observation layout of the quadrotor tasks: named fields, sizes, units and frames (see sim.observation).

The layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so its order and meaning change only with a new env version.
"""

from __future__ import annotations

from typing import Any, Sequence

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
