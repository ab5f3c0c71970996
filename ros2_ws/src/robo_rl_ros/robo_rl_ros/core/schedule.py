"""When a state-driven policy may tick: at the control rate it trained at, whatever rate states come at."""

from __future__ import annotations

# A state up to this much of a period before its tick is due still ticks: a source at the control rate
# jitters around the grid, and skipping its early states would drop ticks.
EARLY_FRACTION = 0.5
# Never two ticks closer than this much of a period, however the grid was caught up with.
MIN_GAP_FRACTION = 0.5


class TickSchedule:
    """Ticks on a grid of control periods, each on the first state within `EARLY_FRACTION` of a period of its
    due time.

    The policy's action and state histories, a recurrent policy's memory and the one-period attitude
    prediction all assume one step per control period: a 1 kHz odometry source ticking a 100 Hz policy on
    every state would fill a 10-step history with 10 ms of flight. States faster than the rate are therefore
    taken at the rate (the latest one at each tick); slower ones tick as they come.
    """

    def __init__(self, period: float):
        if not period > 0:
            raise ValueError(f"the control period must be > 0 s, got {period}")
        self.period = period
        self._due: float | None = None  # when the next tick is due [s]
        self._last = -float("inf")  # the last tick [s]

    def due(self, now: float) -> bool:
        """Whether a state arriving at `now` (seconds) should tick."""
        if self._due is None:
            return True
        return (now >= self._due - EARLY_FRACTION * self.period
                and now - self._last >= MIN_GAP_FRACTION * self.period)

    def wait(self, now: float) -> float:
        """Seconds from `now` until a tick is due (0 if it is)."""
        if self._due is None:
            return 0.0
        return max(0.0, self._due - EARLY_FRACTION * self.period - now,
                   self._last + MIN_GAP_FRACTION * self.period - now)

    def ticked(self, now: float) -> None:
        """A tick ran at `now` (on a state or on the watchdog)."""
        behind = self._due is None or now - self._due >= self.period
        # on the grid while ticks keep up with it; a gap (lost states, a paused source) restarts it from now
        self._due = now + self.period if behind else self._due + self.period
        self._last = now
