"""A watchdog on the age of the latest state."""

from __future__ import annotations


class StateWatchdog:
    """Tracks when the last valid state arrived (in the node's clock, seconds) and whether it is too old."""

    def __init__(self, timeout: float):
        if not timeout > 0:
            raise ValueError(f"the state timeout must be > 0 s, got {timeout}")
        self.timeout = timeout
        self._last: float | None = None

    def feed(self, now: float) -> None:
        """A valid state arrived at `now`."""
        self._last = now

    def clear(self) -> None:
        """Forget the last state (an invalid one arrived: nothing is trusted until the next valid one)."""
        self._last = None

    def age(self, now: float) -> float:
        """Seconds since the last valid state (inf if none)."""
        return float("inf") if self._last is None else now - self._last

    def is_fresh(self, now: float) -> bool:
        """Whether a valid state arrived within the timeout. A negative age (the clock stepped back: NTP, a
        simulation's /clock restarting) is not fresh: the last state would count as fresh for as long as the step,
        whether states still came or not."""
        return 0.0 <= self.age(now) <= self.timeout
