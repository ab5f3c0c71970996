"""The action safety filter and the position geofence, between the policy and the robot."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class FilterResult:
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
        # a limit at least the whole range never binds: skip it (this runs every control tick)
        self._rate_limits = bool(np.any(self.max_delta < self.high - self.low))
        self._previous: np.ndarray | None = None

    def reset(self, previous: np.ndarray | None = None) -> None:
        """Start over: the next action is rate limited against `previous` (no limit if None)."""
        self._previous = None if previous is None else np.asarray(previous, dtype=np.float64).copy()

    def __call__(self, action: np.ndarray) -> FilterResult:
        """The action to command for the policy's `action`."""
        action = np.asarray(action, dtype=np.float64)
        rejected = action.shape != self.low.shape or not np.isfinite(action).all()
        candidate = self.safe_action if rejected else action
        in_range = np.minimum(np.maximum(candidate, self.low), self.high)
        clipped = not rejected and bool((in_range != candidate).any())
        limited, rate_limited = in_range, False
        if self._previous is not None and self._rate_limits:  # the tighter of the range and the rate limit
            low = np.maximum(self.low, self._previous - self.max_delta)
            high = np.minimum(self.high, self._previous + self.max_delta)
            limited = np.minimum(np.maximum(candidate, low), high)
            rate_limited = bool((limited != in_range).any())
        self._previous = limited
        return FilterResult(limited, rejected, clipped, rate_limited)


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
        return all(lo <= float(p) <= hi for p, lo, hi in zip(position, self.low, self.high))
