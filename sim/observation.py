"""Observation layouts: named fields of a flat observation vector, with sizes, units and descriptions.

A layout is the contract the export and every deployment target build observations against
(policy.json records `layout.to_dict()`), so a task's order and meaning change only with a new env version.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np


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

    def subset(self, names: tuple[str, ...] | list[str]) -> tuple["ObservationLayout", list[int]]:
        """The layout of the named fields, in this layout's order, and the indices of their elements here;
        ValueError naming an unknown field."""
        known = {f.name for f in self.fields}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown observation field {unknown[0]!r}; fields: {', '.join(sorted(known))}")
        slices = self.slices()
        kept = tuple(f for f in self.fields if f.name in names)
        return ObservationLayout(kept), [i for f in kept for i in range(slices[f.name].start, slices[f.name].stop)]


# A batch of observations is an array (N, size), or with cameras a dict of arrays (N, ...) by name: the helpers
# below treat both alike (robo_rl.observations does the same for torch tensors).
def as_arrays(obs: Any) -> Any:
    """A batch of observations as numpy: an array, or a dict of arrays."""
    return {k: np.asarray(v) for k, v in obs.items()} if isinstance(obs, Mapping) else np.asarray(obs)


def copy_observation(obs: Any) -> Any:
    """A copy of a batch of observations."""
    return {k: v.copy() for k, v in obs.items()} if isinstance(obs, Mapping) else obs.copy()


def observation_row(obs: Any, index: int) -> Any:
    """A copy of one observation of a batch."""
    return {k: v[index].copy() for k, v in obs.items()} if isinstance(obs, Mapping) else obs[index].copy()


def set_observation_rows(obs: Any, ids: np.ndarray, source: Any) -> None:
    """Rows `ids` of a batch of observations from the same rows of `source`."""
    if isinstance(obs, Mapping):
        for key, value in obs.items():
            value[ids] = source[key][ids]
    else:
        obs[ids] = source[ids]
