"""The policy's observation vector, assembled from the vehicle state exactly as the bundle's layout says.

Quadrotor fields (sim/quadrotor/observation.py, sim/quadrotor/core.py): position_error (3, world, position
minus reference), rotation_matrix (9, body to world, row-major), velocity_error (3, world), angular_velocity
(3, body rates) and action_history (4 k: the last k commanded actions, most recent first, M1..M4 each).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.rotations import all_finite, floats, rotation_entries

STATE_FIELDS = {"position_error": 3, "rotation_matrix": 9, "velocity_error": 3, "angular_velocity": 3}


class VehicleState(NamedTuple):
    """A rigid-body state: position [m] and velocity [m/s] in the world frame, orientation as a unit
    quaternion (w, x, y, z) body to world, body rates [rad/s] in the body frame."""

    position: np.ndarray
    quaternion: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray

    def is_finite(self) -> bool:
        """Whether every entry is a finite number."""
        return all_finite([x for part in self for x in floats(part)])


class ActionHistory:
    """The last `length` actions, most recent first, as the simulator keeps them."""

    def __init__(self, length: int, action_size: int, fill: np.ndarray):
        self._fill = floats(np.asarray(fill, dtype=np.float64).reshape(action_size))
        self._length = length
        self.reset()

    def push(self, action: np.ndarray) -> None:
        """Record the action just commanded."""
        if self._length:
            self._entries = floats(action) + self._entries[:-len(self._fill)]

    def reset(self) -> None:
        """Forget the history (as at an episode start: every entry the fill action)."""
        self._entries = self._fill * self._length

    def entries(self) -> list[float]:
        """All entries as floats, most recent action first."""
        return self._entries

    def flat(self) -> np.ndarray:
        """All entries, most recent action first."""
        return np.array(self._entries, dtype=np.float64)


class QuadrotorObservation:
    """Builds a quadrotor bundle's observation from a `VehicleState`, a reference and the action history."""

    def __init__(self, bundle: PolicyBundle):
        self.size = bundle.observation_size
        self._fields = tuple(entry.name for entry in bundle.layout)  # contiguous, in order (load_bundle checks)
        for entry in bundle.layout:
            if entry.name == "action_history":
                if entry.size % bundle.action_size:
                    raise BundleError(f"action_history has {entry.size} entries, not a multiple of the action "
                                      f"size {bundle.action_size}")
            elif STATE_FIELDS.get(entry.name) != entry.size:
                raise BundleError(f"observation field {entry.name!r} (size {entry.size}) is not a quadrotor field; "
                                  f"known: {STATE_FIELDS} and action_history")
        missing = set(STATE_FIELDS) - set(self._fields)
        if missing:
            raise BundleError(f"the observation layout lacks the quadrotor fields {sorted(missing)}")
        history = [entry.size for entry in bundle.layout if entry.name == "action_history"]
        self.history_length = history[0] // bundle.action_size if history else 0

    def build(self, state: VehicleState, target_position: np.ndarray, target_velocity: np.ndarray,
              history: ActionHistory) -> np.ndarray:
        """The observation vector (float32) for `state` relative to the reference."""
        # one list of Python floats, one conversion: this runs every control tick
        position, velocity = floats(state.position), floats(state.velocity)
        target_p, target_v = floats(target_position), floats(target_velocity)
        values = {
            "position_error": [position[i] - target_p[i] for i in range(3)],
            "rotation_matrix": rotation_entries(state.quaternion),
            "velocity_error": [velocity[i] - target_v[i] for i in range(3)],
            "angular_velocity": floats(state.angular_velocity),
            "action_history": history.entries(),
        }
        return np.array([x for name in self._fields for x in values[name]], dtype=np.float32)
