"""Observation layout of the quadrotor tasks: named fields, sizes, units and frames (see sim.observation).

The layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so its order and meaning change only with a new env version.
"""

from __future__ import annotations

from sim.observation import ObservationField, ObservationLayout


# The observation fields a state history holds, per past control step: velocity error and body rates.
STATE_HISTORY_FIELDS = slice(12, 18)
STATE_HISTORY_SIZE = STATE_HISTORY_FIELDS.stop - STATE_HISTORY_FIELDS.start


def quadrotor_layout(action_history: int, state_history: int = 0) -> ObservationLayout:
    """Observation layout for a quadrotor task with `action_history` past actions and `state_history` past
    observed velocity errors and body rates."""
    fields = [
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
