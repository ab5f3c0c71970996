"""Episode starts packed one row per episode: initial state, target and the episode's parameters.

A batch keeps every env's current and next start as rows of one float64 array (N, START_SIZE), so that
restarting k envs is one gather and one scatter instead of one per field, and the torch path can hold
the next starts as a (START_SIZE, N) tensor and restart finished envs inside its compiled step. Starts
are drawn from the seeded generator in chunks (`StartQueue`), amortizing numpy's per-call cost.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sim.quadrotor.randomization import EpisodeParams

START_FIELDS: tuple[tuple[str, int], ...] = (
    ("position", 3), ("quaternion", 4), ("velocity", 3), ("angular_velocity", 3), ("target", 3),
    ("mass", 1), ("inertia", 3), ("yaw_torque_coefficients", 4), ("disturbance_force", 3),
    ("disturbance_torque", 3), ("thrust_scale", 4), ("motor_tau_rise", 1), ("motor_tau_fall", 1),
    ("latency_steps", 1),
)
START_SIZE = sum(size for _, size in START_FIELDS)
_INDEX: dict[str, int | slice] = {}
_offset = 0
for _name, _size in START_FIELDS:
    _INDEX[_name] = _offset if _size == 1 else slice(_offset, _offset + _size)
    _offset += _size
PARAM_NAMES = tuple(name for name, _ in START_FIELDS[5:])


def field(starts: Any, name: str, feature_axis: int = -1) -> Any:
    """View of field `name` in packed starts: rows (n, START_SIZE) by default, or feature-major
    (START_SIZE, n) arrays or tensors with feature_axis=0. Scalar fields lose their feature axis."""
    index = _INDEX[name]
    return starts[index] if feature_axis == 0 else starts[..., index]


def pack(params: EpisodeParams, position: np.ndarray, quaternion: np.ndarray, velocity: np.ndarray,
         angular_velocity: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Rows (n, START_SIZE) from per-field arrays with a leading episode axis."""
    values = dict(params.as_dict(), position=position, quaternion=quaternion, velocity=velocity,
                  angular_velocity=angular_velocity, target=target)
    n = len(position)
    return np.concatenate([np.asarray(values[name], dtype=np.float64).reshape(n, size)
                           for name, size in START_FIELDS], 1)


def params_view(starts: np.ndarray) -> EpisodeParams:
    """The parameters in rows (n, START_SIZE) as an `EpisodeParams` of live views (latency as float)."""
    return EpisodeParams(**{name: field(starts, name) for name in PARAM_NAMES})


class StartQueue:
    """Episode starts in draw order, drawn `chunk` at a time with `draw(k) -> rows (k, START_SIZE)`."""

    def __init__(self, draw: Callable[[int], np.ndarray], chunk: int):
        self._draw, self._chunk = draw, chunk
        self._rows = np.zeros((0, START_SIZE))
        self._next = 0

    def take(self, k: int) -> np.ndarray:
        """The next k starts, (k, START_SIZE) (a view, valid until the next call)."""
        if self._next + k > len(self._rows):
            rest = self._rows[self._next:]
            self._rows = np.concatenate([rest, self._draw(max(self._chunk, k - len(rest)))])
            self._next = 0
        rows = self._rows[self._next : self._next + k]
        self._next += k
        return rows
