"""Quadrotor tasks: reference trajectories and initial states for hover, reach and figure-eight."""

from __future__ import annotations

import math
from typing import Any, Mapping

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.rotations import tilted_quats


def sample_targets(xp: Any, u: Mapping[str, Any], config: QuadrotorEnvConfig) -> Any:
    """Per-episode target points (3, n): the centre, or for reach a uniform point around it (uniforms `u`
    named by `episode_starts.UNIFORM_FIELDS`)."""
    zero = u["target"][:1] * 0.0
    target = xp.concatenate([zero + c for c in config.center], 0)
    if config.task == "reach":
        target = target + (2.0 * u["target"] - 1.0) * xp.concatenate([zero + r for r in config.reach_range], 0)
    return target


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


def sample_initial_states(xp: Any, u: Mapping[str, Any], config: QuadrotorEnvConfig) -> tuple[Any, Any, Any, Any]:
    """Initial (position, quaternion, velocity, angular velocity), feature-major (k, n), around the start
    point, learning-to-fly style, from uniforms `u` (named by `episode_starts.UNIFORM_FIELDS`)."""
    init = config.initial_state
    zero = u["at_rest"] * 0.0
    center = xp.concatenate([zero + c for c in config.center], 0)
    at_rest = u["at_rest"] < init.hover_fraction  # (1, n): exactly at rest at the start point
    pos = center + (2.0 * u["position"] - 1.0) * init.position_range
    quat = tilted_quats(xp, u["tilt_axis"], u["tilt_angle"][0], math.radians(init.max_tilt_deg))
    vel = (2.0 * u["velocity"] - 1.0) * init.velocity_range
    angvel = (2.0 * u["angular_velocity"] - 1.0) * init.angular_velocity_range
    identity = xp.concatenate([zero + 1.0, zero, zero, zero], 0)
    return (xp.where(at_rest, center, pos), xp.where(at_rest, identity, quat), xp.where(at_rest, 0.0, vel),
            xp.where(at_rest, 0.0, angvel))

