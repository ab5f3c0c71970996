"""The policy's observation vector, assembled from the vehicle state exactly as the bundle's layout says.

Quadrotor fields (sim/quadrotor/observation.py, sim/quadrotor/core.py): position_error (3, world, position
minus reference, scaled down to the training env's position_error_limit where longer), rotation_matrix (9, body
to world, row-major), velocity_error (3, world), angular_velocity (3, body rates), action_history (4 k: the last
k commanded actions, most recent first, M1..M4 each) and state_history (6 h: the velocity error and body rates of
the previous h observations, most recent first; at an episode's start, here when the policy takes over, every
entry holds the first observation's).

The world-frame fields are observed in a heading frame, the world turned about z by a heading (the controller
passes the one the policy took over at), as sim.quadrotor.observation.in_heading_frame defines it. Training starts
face within 90 degrees of +x; in the frame of its own heading a vehicle facing any way starts facing +x, and its
dynamics are the same.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.rotations import all_finite, floats, rotation_entries, turned_by_minus

STATE_FIELDS = {"position_error": 3, "rotation_matrix": 9, "velocity_error": 3, "angular_velocity": 3}
STATE_HISTORY_VALUES = 6  # per past observation: velocity_error (3, world), angular_velocity (3, body)


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


class StateHistory:
    """The velocity errors and body rates of the last `length` observations, most recent first, as the
    simulator keeps them: after a reset the first observation's fill every entry."""

    def __init__(self, length: int):
        self._length = length
        self.reset()

    def reset(self) -> None:
        """Start over (an episode start): the next observation sees its own values in every entry."""
        self._entries: list[float] | None = None

    def entries(self, current: list[float]) -> list[float]:
        """All entries, most recent first, for an observation whose own values are `current` (6 floats)."""
        return current * self._length if self._entries is None else self._entries

    def push(self, current: list[float]) -> None:
        """Record the values (6 floats) of the observation the policy was just given."""
        if self._length:
            self._entries = current + self.entries(current)[:-STATE_HISTORY_VALUES]
        else:
            self._entries = []


def limited_position_error(error: list[float], limit: float) -> list[float]:
    """The position error as the simulator observes it: scaled down to norm `limit` [m] where it is longer (a
    setpoint farther away is seen at the limit in its direction); 0: as it is."""
    squared = error[0] * error[0] + error[1] * error[1] + error[2] * error[2]
    if not limit or squared <= limit * limit:
        return error
    scale = limit / math.sqrt(squared)
    return [e * scale for e in error]


def _position_error_limit(env_config: dict) -> float:
    """The bundle's position_error_limit [m] (0 in bundles exported before it existed); BundleError if unusable."""
    value = env_config.get("position_error_limit", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < math.inf:
        raise BundleError(f"training.env_config.position_error_limit is {value!r}; allowed: a number >= 0 [m]")
    return float(value)


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
            elif entry.name == "state_history":
                if entry.size % STATE_HISTORY_VALUES:
                    raise BundleError(f"state_history has {entry.size} entries, not a multiple of "
                                      f"{STATE_HISTORY_VALUES} (velocity error and body rates per step)")
            elif STATE_FIELDS.get(entry.name) != entry.size:
                raise BundleError(f"observation field {entry.name!r} (size {entry.size}) is not a quadrotor field; "
                                  f"known: {STATE_FIELDS}, action_history and state_history")
        missing = set(STATE_FIELDS) - set(self._fields)
        if missing:
            raise BundleError(f"the observation layout lacks the quadrotor fields {sorted(missing)}")
        history = [entry.size for entry in bundle.layout if entry.name == "action_history"]
        self.history_length = history[0] // bundle.action_size if history else 0
        states = [entry.size for entry in bundle.layout if entry.name == "state_history"]
        self.state_history_length = states[0] // STATE_HISTORY_VALUES if states else 0
        # [m] the training env's position_error_limit (0: the error is observed as it is)
        self.position_error_limit = _position_error_limit(bundle.env_config)
        offsets = {entry.name: entry.offset for entry in bundle.layout}
        self._velocity_error = slice(offsets["velocity_error"], offsets["velocity_error"] + 3)
        self._angular_velocity = slice(offsets["angular_velocity"], offsets["angular_velocity"] + 3)

    def build(self, state: VehicleState, target_position: np.ndarray, target_velocity: np.ndarray,
              history: ActionHistory, state_history: StateHistory | None = None, heading: float = 0.0) -> np.ndarray:
        """The observation vector (float32) for `state` relative to the reference, in the frame turned about z by
        `heading` [rad]. With a state history, call `state_history.push` with `observed(obs)` once the policy has
        been given this observation."""
        # one list of Python floats, one conversion: this runs every control tick
        cos, sin = math.cos(heading), math.sin(heading)
        position, velocity = floats(state.position), floats(state.velocity)
        target_p, target_v = floats(target_position), floats(target_velocity)
        velocity_error = turned_by_minus([velocity[i] - target_v[i] for i in range(3)], cos, sin)
        rates = floats(state.angular_velocity)
        rotation = rotation_entries(state.quaternion)
        # the rotation matrix's rows x and y turn as a vector's components do (each column is a body axis)
        rotation[0:3], rotation[3:6] = ([cos * a + sin * b for a, b in zip(rotation[0:3], rotation[3:6])],
                                        [-sin * a + cos * b for a, b in zip(rotation[0:3], rotation[3:6])])
        values = {
            "position_error": limited_position_error(
                turned_by_minus([position[i] - target_p[i] for i in range(3)], cos, sin), self.position_error_limit),
            "rotation_matrix": rotation,
            "velocity_error": velocity_error,
            "angular_velocity": rates,
            "action_history": history.entries(),
        }
        if self.state_history_length:
            if state_history is None:
                raise ValueError("this bundle's observation has a state_history: pass a StateHistory")
            # (the pushed entries come from the float32 observation: the values as the policy observed them)
            values["state_history"] = state_history.entries(velocity_error + rates)
        return np.array([x for name in self._fields for x in values[name]], dtype=np.float32)

    def observed(self, obs: np.ndarray) -> list[float]:
        """The velocity error and body rates of an observation built here, for `StateHistory.push`."""
        return [float(x) for x in obs[self._velocity_error]] + [float(x) for x in obs[self._angular_velocity]]
