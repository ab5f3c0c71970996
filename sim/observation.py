"""Observation layouts: named fields of a flat observation vector, with sizes, units and descriptions.

A layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so a task's order and meaning change only with a new env version.
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
