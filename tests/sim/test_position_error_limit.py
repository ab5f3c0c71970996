"""The observed position error's limit (config.position_error_limit): a reference farther than the limit is
observed at the limit's distance in its own direction, a nearer one as it is, alike on every simulation path
(the native step included); the privileged critic keeps the true error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim.errors import ConfigError
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from tests.sim.conftest import native_and_eager

LIMIT = 0.15
# start offsets from the reference: beyond the limit on one axis, on all three, inside it, exactly on the reference
OFFSETS = np.array([[0.9, 0.0, 0.0], [-0.3, 0.4, -0.2], [0.05, -0.06, 0.04], [0.0, 0.0, 0.0]])


def _batch(backend: str, compile: bool | str, limit: float, n: int = len(OFFSETS)) -> QuadrotorBatch:
    config = make_config("hover", position_error_limit=limit, max_position_error=2.0, randomization={"enabled": False})
    return QuadrotorBatch(config, n, backend, seed=0, compile=compile,
                          autoreset=backend == "torch", privileged=True)


def _offset_starts(batch: QuadrotorBatch, offsets: np.ndarray) -> np.ndarray:
    center = np.asarray(batch.config.center)
    n = len(offsets)
    state = {"position": center + offsets, "quaternion": np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)),
             "velocity": np.zeros((n, 3)), "angular_velocity": np.zeros((n, 3))}
    return np.asarray(batch.reset(options={"initial_state": state}), dtype=np.float64)


@pytest.mark.parametrize("backend, compile", [("mujoco", False), ("mujoco_batch", False), ("torch", False),
                                              ("torch", "native")])
def test_a_far_reference_is_observed_at_the_limit_in_its_direction(backend, compile):
    offsets = OFFSETS[:1] if backend == "mujoco" else OFFSETS
    batch = _batch(backend, compile, LIMIT, len(offsets))
    obs = _offset_starts(batch, offsets)
    norms = np.linalg.norm(offsets, axis=1)
    for row, offset, norm in zip(obs, offsets, norms):
        want = offset * (LIMIT / norm) if norm > LIMIT else offset
        np.testing.assert_allclose(row[:3], want, atol=1e-6)
    privileged = np.asarray(batch.privileged_observation(), dtype=np.float64)
    np.testing.assert_allclose(privileged[:, :3], offsets, atol=1e-6)  # the critic sees how far it really is
    # after a step, still limited: the step's observation goes through the same limit
    step = batch.step(torch.full((len(offsets), 4), 0.45) if backend == "torch" else np.full((len(offsets), 4), 0.45))
    observed = np.asarray(step.observation, dtype=np.float64)[:, :3]
    assert np.all(np.linalg.norm(observed, axis=1) <= LIMIT + 1e-6)
    np.testing.assert_allclose(np.linalg.norm(observed[0]), LIMIT, rtol=1e-5)  # 0.9 m away: at the limit


def test_without_a_limit_the_error_is_observed_as_it_is():
    obs = _offset_starts(_batch("mujoco_batch", False, 0.0), OFFSETS)
    np.testing.assert_allclose(obs[:, :3], OFFSETS, atol=1e-6)


def test_the_native_step_limits_the_noisy_error_as_the_eager_step_does():
    """Observation noise on and the reach task (targets up to 0.77 m away), restarts inside the step."""
    native, eager = native_and_eager(make_config("reach", position_error_limit=0.1), 37, seed=3)
    rng = np.random.default_rng(1)
    limited = 0
    for _ in range(60):
        action = torch.as_tensor(rng.uniform(0.3, 0.6, (37, 4)), dtype=torch.float32)
        got, want = native.step(action), eager.step(action)
        np.testing.assert_allclose(got.observation, want.observation, rtol=1e-4, atol=1e-4)
        limited += int((np.linalg.norm(np.asarray(want.observation)[:, :3], axis=1) > 0.1 - 1e-4).sum())
    assert limited > 100  # the limit was in play


def test_a_negative_limit_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="position_error_limit"):
        make_config("hover", position_error_limit=-0.1)
