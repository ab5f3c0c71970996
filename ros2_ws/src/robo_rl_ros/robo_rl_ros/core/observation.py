"""The policy's observation vector, assembled from the vehicle state exactly as the bundle's layout says.

Quadrotor fields (sim/quadrotor/observation.py, sim/quadrotor/core.py): position_error (3, world, position
minus reference), rotation_matrix (9, body to world, row-major), velocity_error (3, world), angular_velocity
(3, body rates) and action_history (4 k: the last k commanded actions, most recent first, M1..M4 each).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.rotations import quat_to_matrix

STATE_FIELDS = {"position_error": 3, "rotation_matrix": 9, "velocity_error": 3, "angular_velocity": 3}


@dataclasses.dataclass(frozen=True)
class VehicleState:
    """A rigid-body state: position [m] and velocity [m/s] in the world frame, orientation as a unit
    quaternion (w, x, y, z) body to world, body rates [rad/s] in the body frame."""

    position: np.ndarray
    quaternion: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray

    def is_finite(self) -> bool:
        """Whether every entry is a finite number."""
        # a sum is finite only if every term is (NaN and Inf propagate; finite overflow is rejected too)
        parts = (self.position, self.quaternion, self.velocity, self.angular_velocity)
        return math.isfinite(sum(float(np.asarray(part).sum()) for part in parts))


class ActionHistory:
    """The last `length` actions, most recent first, as the simulator keeps them."""

    def __init__(self, length: int, action_size: int, fill: np.ndarray):
        self._fill = np.asarray(fill, dtype=np.float64).reshape(action_size)
        self._actions = np.tile(self._fill, (length, 1))

    def push(self, action: np.ndarray) -> None:
        """Record the action just commanded."""
        if len(self._actions):
            self._actions[1:] = self._actions[:-1]  # numpy copies overlapping slices through a buffer
            self._actions[0] = action

    def reset(self) -> None:
        """Forget the history (as at an episode start: every entry the fill action)."""
        self._actions[:] = self._fill

    def flat(self) -> np.ndarray:
        """All entries, most recent action first."""
        return self._actions.reshape(-1)

    @property
    def latest(self) -> np.ndarray:
        """The most recent action (the fill action if none was pushed)."""
        return self._actions[0].copy() if len(self._actions) else self._fill.copy()


class QuadrotorObservation:
    """Builds a quadrotor bundle's observation from a `VehicleState`, a reference and the action history."""

    def __init__(self, bundle: PolicyBundle):
        self.size = bundle.observation_size
        self._slices: dict[str, slice] = {}
        for entry in bundle.layout:
            if entry.name == "action_history":
                if entry.size % bundle.action_size:
                    raise BundleError(f"action_history has {entry.size} entries, not a multiple of the action "
                                      f"size {bundle.action_size}")
            elif STATE_FIELDS.get(entry.name) != entry.size:
                raise BundleError(f"observation field {entry.name!r} (size {entry.size}) is not a quadrotor field; "
                                  f"known: {STATE_FIELDS} and action_history")
            self._slices[entry.name] = entry.slice
        missing = set(STATE_FIELDS) - set(self._slices)
        if missing:
            raise BundleError(f"the observation layout lacks the quadrotor fields {sorted(missing)}")
        history = self._slices.get("action_history")
        self.history_length = 0 if history is None else (history.stop - history.start) // bundle.action_size

    def build(self, state: VehicleState, target_position: np.ndarray, target_velocity: np.ndarray,
              history: ActionHistory) -> np.ndarray:
        """The observation vector (float32) for `state` relative to the reference."""
        obs = np.empty(self.size, dtype=np.float32)
        obs[self._slices["position_error"]] = np.asarray(state.position) - target_position
        obs[self._slices["rotation_matrix"]] = quat_to_matrix(np.asarray(state.quaternion)).reshape(-1)
        obs[self._slices["velocity_error"]] = np.asarray(state.velocity) - target_velocity
        obs[self._slices["angular_velocity"]] = state.angular_velocity
        if "action_history" in self._slices:
            obs[self._slices["action_history"]] = history.flat()
        return obs
