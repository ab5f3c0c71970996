"""Shared helpers for the simulator tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim  # noqa: F401  (registers the gymnasium ids)

NO_RANDOMIZATION: dict[str, Any] = {"randomization": {"enabled": False}}


def fixed_randomization(**values: Any) -> dict[str, Any]:
    """Randomization enabled but with every range collapsed to the nominal value, except `values`."""
    base: dict[str, Any] = {
        "enabled": True, "mass_scale": (1, 1), "inertia_scale": (1, 1), "thrust_scale": (1, 1),
        "yaw_torque_scale": (1, 1), "motor_tau_scale": (1, 1), "disturbance_force": 0.0,
        "disturbance_torque": 0.0, "latency_steps": (0, 0),
        "observation_noise": {"position": 0, "orientation": 0, "velocity": 0, "angular_velocity": 0},
    }
    return {"randomization": {**base, **values}}


@pytest.fixture
def excitation() -> np.ndarray:
    """200 steps (2 s) of motor commands that wobble around hover without leaving a 30 m high arena."""
    rng = np.random.default_rng(0)
    t = np.arange(200)[:, None]
    return np.clip(0.68 + 0.05 * np.sin(0.1 * t + np.arange(4)) + rng.normal(0, 0.02, (200, 4)), 0, 1)


def native_and_eager(config: Any, num_envs: int, seed: int) -> tuple[Any, Any]:
    """The same torch-backend batch (in-step restarts, privileged observations) on the native step and on the
    eager step, both reset: what the tests that compare the two step side by side."""
    from sim.quadrotor.core import QuadrotorBatch

    made = []
    for compile in ("native", False):
        batch = QuadrotorBatch(config, num_envs, "torch", seed=seed, compile=compile, autoreset=True, privileged=True)
        batch.reset()
        made.append(batch)
    return made[0], made[1]
