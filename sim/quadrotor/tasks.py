"""Quadrotor tasks: reference trajectories and initial states for hover, reach and figure-eight."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.rotations import random_tilted_quats


def sample_targets(rng: np.random.Generator, config: QuadrotorEnvConfig, n: int) -> np.ndarray:
    """Per-episode target points (n, 3): the centre, or for reach a uniform point around it."""
    center = np.asarray(config.center, dtype=np.float64)
    if config.task == "reach":
        return center + rng.uniform(-1.0, 1.0, size=(n, 3)) * np.asarray(config.reach_range)
    return np.tile(center, (n, 1))


def reference(xp: Any, config: QuadrotorEnvConfig, targets: Any, time: Any) -> tuple[Any, Any]:
    """Reference position and velocity (3, N) at episode time `time` (N,) [s], for targets (3, N)."""
    if config.task != "figure_eight":
        return targets, xp.zeros_like(targets)
    omega = 2.0 * math.pi / config.figure_eight_period
    amplitude = config.figure_eight_amplitude
    phase = omega * time
    zero = xp.zeros_like(time)
    offset = xp.stack([amplitude * xp.sin(phase), 0.5 * amplitude * xp.sin(2.0 * phase), zero], 0)
    velocity = xp.stack([amplitude * omega * xp.cos(phase), amplitude * omega * xp.cos(2.0 * phase), zero], 0)
    return targets + offset, velocity


def sample_initial_states(
    rng: np.random.Generator, config: QuadrotorEnvConfig, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Initial (position, quaternion, velocity, angular velocity) around the start point, learning-to-fly style."""
    init = config.initial_state
    start = np.asarray(config.center, dtype=np.float64)
    pos = start + rng.uniform(-init.position_range, init.position_range, size=(n, 3))
    quat = random_tilted_quats(rng, n, math.radians(init.max_tilt_deg))
    vel = rng.uniform(-init.velocity_range, init.velocity_range, size=(n, 3))
    angvel = rng.uniform(-init.angular_velocity_range, init.angular_velocity_range, size=(n, 3))
    at_rest = rng.uniform(size=n) < init.hover_fraction
    pos[at_rest] = start
    quat[at_rest] = (1.0, 0.0, 0.0, 0.0)
    vel[at_rest] = 0.0
    angvel[at_rest] = 0.0
    return pos, quat, vel, angvel
