"""The action safety filter and the position geofence, between the policy and the robot."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from robo_rl_ros.core.rotations import all_finite, floats


class FilterResult(NamedTuple):
    """A filtered action and why it differs from the policy's, if it does."""

    action: np.ndarray
    rejected: bool  # the policy's action was not finite: `action` is the safe action
    clipped: bool
    rate_limited: bool


class SafetyFilter:
    """Rejects non-finite actions (-> the safe action), clips to [low, high] and limits the change per tick.

    max_delta: largest change of any entry per tick (inf: no rate limit).
    """

    def __init__(self, low: np.ndarray, high: np.ndarray, safe_action: np.ndarray, max_delta: float | np.ndarray):
        self.low, self.high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        self.safe_action = np.clip(np.asarray(safe_action, dtype=np.float64), self.low, self.high)
        self.max_delta = np.broadcast_to(np.asarray(max_delta, dtype=np.float64), self.low.shape)
        if np.any(self.max_delta <= 0):
            raise ValueError(f"max_delta must be > 0, got {max_delta}")
        # a limit at least the whole range never binds: skip it
        self._rate_limits = bool(np.any(self.max_delta < self.high - self.low))
        # Python floats: this runs every control tick on a handful of entries, where numpy's per-call cost dominates
        self._bounds = list(zip(self.low.tolist(), self.high.tolist(), self.max_delta.tolist()))
        self._safe = self.safe_action.tolist()
        self._previous: list[float] | None = None

    def reset(self, previous: np.ndarray | None = None) -> None:
        """Start over: the next action is rate limited against `previous` (no limit if None)."""
        self._previous = None if previous is None else floats(np.asarray(previous, dtype=np.float64))

    def __call__(self, action: np.ndarray) -> FilterResult:
        """The action to command for the policy's `action`."""
        rejected = np.shape(action) != self.low.shape
        if not rejected:
            values = floats(action)
            rejected = not all_finite(values)
        candidate = self._safe if rejected else values
        in_range = [min(max(c, low), high) for c, (low, high, _) in zip(candidate, self._bounds)]
        clipped = not rejected and in_range != candidate
        limited, rate_limited = in_range, False
        if self._previous is not None and self._rate_limits:  # the tighter of the range and the rate limit
            limited = [min(max(c, low, p - delta), high, p + delta)
                       for c, p, (low, high, delta) in zip(candidate, self._previous, self._bounds)]
            rate_limited = limited != in_range
        self._previous = limited
        return FilterResult(np.array(limited), rejected, clipped, rate_limited)


@dataclasses.dataclass(frozen=True)
class Geofence:
    """An axis-aligned box [m] in the world frame; positions outside it are not flown by the policy."""

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def around(cls, center: np.ndarray, half_extent: float | np.ndarray) -> "Geofence":
        """The box `center` +- `half_extent`."""
        center = np.asarray(center, dtype=np.float64)
        return cls(center - half_extent, center + half_extent)

    def contains(self, position: np.ndarray) -> bool:
        """Whether `position` is finite and inside the box."""
        # comparisons with NaN are False, so a NaN entry is outside
        return all(lo <= p <= hi for p, lo, hi in zip(floats(position), self.low.tolist(), self.high.tolist()))
