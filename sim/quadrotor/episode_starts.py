"""Episode starts: each episode's initial state, target and parameters, a pure function of its counters.

The start of episode `e` of env `i` depends only on (the batch's seed key, i, e): its uniform numbers come
from a counter-based generator (SplitMix64's mixing function applied to the key, the env, the episode
and the number's slot; see `uniforms`). No generator state is shared between envs, so an env can restart
on the host (`QuadrotorBatch.reset`), inside the compiled torch step or inside the generated C++ step
(`native_step.cpp` implements `draw` in double precision) and starts the same episode everywhere, with
no start drawn ahead of time. Starts are feature-major arrays (START_SIZE, n), float64.
"""

from __future__ import annotations

import functools

from typing import Any

import numpy as np

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.model import QuadrotorParams
from sim.quadrotor.randomization import EpisodeParams, sample_params
from sim.kernel_expr import ArrayMath
from sim.quadrotor.tasks import task_named

START_FIELDS: tuple[tuple[str, int], ...] = (
    ("position", 3), ("quaternion", 4), ("velocity", 3), ("angular_velocity", 3), ("target", 3),
    ("mass", 1), ("inertia", 3), ("yaw_torque_coefficients", 4), ("disturbance_force", 3),
    ("disturbance_torque", 3), ("thrust_scale", 4), ("motor_tau_rise", 1), ("motor_tau_fall", 1),
    ("latency_steps", 1), ("arm_scale", 1), ("thrust_curve", 3),
)
START_SIZE = sum(size for _, size in START_FIELDS)
PARAM_NAMES = tuple(name for name, _ in START_FIELDS[5:])
# The uniform numbers of one start, by slot (the order is part of the generator: it fixes which episode
# a seed gives).
UNIFORM_FIELDS: tuple[tuple[str, int], ...] = (
    ("motor_tau_scale", 1), ("mass_scale", 1), ("inertia_scale", 3), ("thrust_scale", 4),
    ("yaw_torque_scale", 1), ("disturbance_force", 3), ("disturbance_torque", 3), ("latency_steps", 1),
    ("position", 3), ("tilt_axis", 2), ("tilt_angle", 1), ("velocity", 3), ("angular_velocity", 3),
    ("at_rest", 1), ("target", 3), ("arm_length_scale", 1), ("thrust_to_weight", 1),
    ("thrust_curve_linear_share", 1), ("motor_tau_rise_scale", 1), ("motor_tau_fall_scale", 1),
    ("inertia_size_scale", 1),
)
UNIFORM_COUNT = sum(size for _, size in UNIFORM_FIELDS)


def _offsets(fields: tuple[tuple[str, int], ...]) -> dict[str, int]:
    offsets, offset = {}, 0
    for name, size in fields:
        offsets[name] = offset
        offset += size
    return offsets


START_OFFSETS = _offsets(START_FIELDS)
UNIFORM_OFFSETS = _offsets(UNIFORM_FIELDS)
_SIZES = dict(START_FIELDS)


def field(starts: Any, name: str, feature_axis: int = -1) -> Any:
    """View of field `name` in packed starts: rows (n, START_SIZE) by default, or feature-major
    (START_SIZE, n) arrays or tensors with feature_axis=0. Scalar fields lose their feature axis."""
    offset, size = START_OFFSETS[name], _SIZES[name]
    index: int | slice = offset if size == 1 else slice(offset, offset + size)
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


# SplitMix64 (Steele, Lea and Flood 2014): the golden-ratio increment and the finalizer's multipliers.
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(value: int) -> int:
    """A 64-bit pattern as the int64 that holds it (arrays do the generator's arithmetic in wrapping int64)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(x: Any, bits: int) -> Any:
    """Logical right shift of int64 bit patterns (>> on int64 is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix(x: Any) -> Any:
    x = (x ^ _shift_right(x, 30)) * _signed(_MIX1)
    x = (x ^ _shift_right(x, 27)) * _signed(_MIX2)
    return x ^ _shift_right(x, 31)


@functools.lru_cache(maxsize=None)
def _increments(count: int) -> tuple[int, ...]:
    """(j + 1) * golden for j < count, wrapped to int64 here rather than computed as arange(...) * golden: compiled
    for CUDA, Inductor folds an arange times a constant into Triton index arithmetic, which is 32-bit."""
    return tuple(_signed(((j + 1) * _GOLDEN) % (1 << 64)) for j in range(count))


def uniforms(xp: Any, key: Any, env: Any, episode: Any, count: int = UNIFORM_COUNT) -> Any:
    """Uniform numbers in [0, 1), (count, n) float64, of episodes `episode` (n,) of envs `env` (n,):
    number j is SplitMix64's mix of base + (j + 1) * golden, base = mix(key ^ mix(env * 2^32 + episode)).

    numpy or torch (`xp`) int64 arrays; `key` an int below 2^63 or an int64 tensor of shape (1,).
    """
    base = _mix(key ^ _mix(env * (1 << 32) + episode))
    increments = _increments(count)
    if xp is np:
        steps = np.array(increments, dtype=np.int64)
    else:
        steps = xp.tensor(increments, device=env.device, dtype=xp.int64)
    bits = _shift_right(_mix(base[None] + steps[:, None]), 11)  # 53 random bits
    return (bits.astype(np.float64) if xp is np else bits.to(xp.float64)) * 2.0**-53


def draw(xp: Any, key: Any, env: Any, episode: Any, nominal: QuadrotorParams, config: QuadrotorEnvConfig) -> Any:
    """The starts (START_SIZE, n) float64 of episodes `episode` of envs `env` (see `uniforms`): parameters
    randomized around `nominal` within `config.randomization`, the task's initial state and target."""
    u = uniforms(xp, key, env, episode)
    slots = {name: u[offset : offset + size] for (name, size), offset in zip(UNIFORM_FIELDS, UNIFORM_OFFSETS.values())}
    params = sample_params(xp, slots, nominal, config.randomization)
    task = task_named(config.task)
    state = task.initial_states(xp, slots, config)
    target = task.targets(ArrayMath(xp), [slots["target"][k : k + 1] for k in range(3)], config)
    values = dict(zip(("position", "quaternion", "velocity", "angular_velocity"), state),
                  target=xp.concatenate(target, 0), **params)
    return xp.concatenate([values[name] for name, _ in START_FIELDS], 0)

