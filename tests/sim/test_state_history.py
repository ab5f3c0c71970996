"""The observation's state history: the previous observations' velocity errors and body rates, newest first,
starting over from the first observation of every episode, alike on every path (the native step included)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim.quadrotor.config import make_config
from sim.quadrotor.env import QuadrotorVectorEnv
from sim.quadrotor.observation import STATE_HISTORY_FIELDS
from tests.sim.conftest import native_and_eager

HISTORY = 3


@pytest.mark.parametrize("backend, compile", [("mujoco_batch", False), ("torch", False), ("torch", "native")])
def test_the_history_holds_the_previous_observations_and_restarts_with_each_episode(backend, compile):
    env = QuadrotorVectorEnv("hover", num_envs=6, backend=backend, device="cpu", compile=compile,
                             state_history=HISTORY, privileged=True)
    obs, info = env.reset(seed=0)
    field = env.layout.slices()["state_history"]
    assert field.stop - field.start == 6 * HISTORY and env.layout.size == field.stop
    previous = np.asarray(obs)
    for i in range(6):  # the first observation's values fill the history
        np.testing.assert_array_equal(previous[i, field], np.tile(previous[i, STATE_HISTORY_FIELDS], HISTORY))
    ended_any = False
    rng = np.random.default_rng(0)
    for _ in range(80):
        obs, _, _, _, info = env.step(rng.uniform(0.2, 0.9, (6, 4)).astype(np.float32))
        obs, ended = np.asarray(obs), info.get("_final_obs", np.zeros(6, dtype=bool))
        expected = np.concatenate([previous[:, STATE_HISTORY_FIELDS], previous[:, field][:, :-6]], 1)
        np.testing.assert_allclose(obs[~ended][:, field], expected[~ended], atol=1e-6)
        if ended.any():
            ended_any = True
            final = np.asarray(info["final_obs"])[ended]
            np.testing.assert_allclose(final[:, field], expected[ended], atol=1e-6)  # the ended episode's own
            np.testing.assert_array_equal(obs[ended][:, field], np.tile(obs[ended][:, STATE_HISTORY_FIELDS], HISTORY))
        privileged = np.asarray(info["privileged_obs"])
        np.testing.assert_allclose(privileged[:, field], obs[:, field], atol=1e-6)  # the critic sees it too
        previous = obs
    assert ended_any


def test_the_native_step_keeps_the_history_as_the_eager_step_does():
    """Noise on, restarts inside the step, resets from Python, 37 envs (a partial block)."""
    config = make_config("hover", state_history=HISTORY, randomization={"latency_steps": (0, 2)})
    native, eager = native_and_eager(config, 37, seed=3)
    rng = np.random.default_rng(1)
    restarts = 0
    for step in range(150):
        if step == 70:
            for made in (native, eager):
                made.reset(np.arange(0, 37, 4))
        action = torch.as_tensor(rng.uniform(0.2, 0.95, (37, 4)), dtype=torch.float32)
        got, want = native.step(action), eager.step(action)
        done = (want.terminated | want.truncated).numpy()
        restarts += int(done.sum())
        np.testing.assert_allclose(got.observation, want.observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.final_observation[done], want.final_observation[done], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.privileged_observation, want.privileged_observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.final_privileged_observation[done], want.final_privileged_observation[done],
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(native.state_history, eager.state_history, rtol=1e-4, atol=1e-4)
    assert restarts > 10
