"""Velocity and body rates from consecutive poses, for robots that publish pose only (crazyswarm2's
`/<cf>/pose`): finite differences over the poses' own timestamps."""

from __future__ import annotations

import numpy as np

from robo_rl_ros.core.rotations import quat_to_matrix, relative_rotation_vector


class PoseDifferentiator:
    """Estimates world velocity and body rates from a stream of stamped poses (first-order low-pass
    with time constant `smoothing` seconds; 0 keeps the raw finite difference)."""

    def __init__(self, smoothing: float = 0.0, max_gap: float = 0.1):
        self.smoothing, self.max_gap = smoothing, max_gap
        self._last: tuple[float, np.ndarray, np.ndarray] | None = None
        self.velocity, self.body_rates = np.zeros(3), np.zeros(3)
        self.refused_gap: float | None = None  # the stamp difference of the last pair refused [s]

    def reset(self) -> None:
        """Forget previous poses."""
        self._last = None
        self.velocity, self.body_rates = np.zeros(3), np.zeros(3)

    def update(self, stamp: float, position: np.ndarray, quaternion: np.ndarray) -> bool:
        """Take a pose; True once velocity and body rates are estimated from two poses at most
        `max_gap` seconds apart."""
        rotation = quat_to_matrix(quaternion)
        last, self._last = self._last, (stamp, np.asarray(position, dtype=np.float64), rotation)
        if last is None:
            return False
        dt = stamp - last[0]
        if not 0.0 < dt <= self.max_gap:
            self.refused_gap = dt
            return False
        self.refused_gap = None
        velocity = (self._last[1] - last[1]) / dt
        rates = relative_rotation_vector(last[2], rotation) / dt
        alpha = 1.0 if self.smoothing <= 0 else min(1.0, dt / (self.smoothing + dt))
        self.velocity = self.velocity + alpha * (velocity - self.velocity)
        self.body_rates = self.body_rates + alpha * (rates - self.body_rates)
        return True
