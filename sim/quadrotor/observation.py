"""Observation layout of the quadrotor tasks: named fields, sizes, units and frames.

The layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so its order and meaning change only with a new env version.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ObservationField:
    """One named slice of the observation vector."""

    name: str
    size: int
    unit: str
    description: str


@dataclasses.dataclass(frozen=True)
class ObservationLayout:
    """Ordered fields of a flat observation vector."""

    fields: tuple[ObservationField, ...]

    @property
    def size(self) -> int:
        """Total length of the observation vector."""
        return sum(f.size for f in self.fields)

    def slices(self) -> dict[str, slice]:
        """Field name -> slice of the observation vector."""
        out, start = {}, 0
        for f in self.fields:
            out[f.name] = slice(start, start + f.size)
            start += f.size
        return out

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON-serializable description: name, offset, size, unit, description per field."""
        return [
            {**dataclasses.asdict(f), "offset": s.start}
            for f, s in zip(self.fields, self.slices().values())
        ]


def quadrotor_layout(action_history: int) -> ObservationLayout:
    """Observation layout for a quadrotor task with `action_history` past actions."""
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
    return ObservationLayout(tuple(fields))
