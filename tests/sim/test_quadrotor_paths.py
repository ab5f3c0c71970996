"""Contract: the MuJoCo batch and the torch path reproduce the single MuJoCo env's trajectory.

Tolerances over 2 s (200 control steps, 1000 physics steps) of aggressive open-loop flight:
MuJoCo batch: bit-identical; torch float64: 1e-9 m; torch float32: 1 mm position, 1e-3 for every
observation entry.
"""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np
import pytest
import torch

from sim.quadrotor.env import QuadrotorVectorEnv
from tests.sim.conftest import NO_RANDOMIZATION

INIT = {"position": [0.1, -0.1, 30.1], "quaternion": [0.98, 0.1, -0.05, 0.1],
        "velocity": [0.3, -0.2, 0.1], "angular_velocity": [0.5, -0.8, 1.0]}
ARENA = {"center": (0.0, 0.0, 30.0), "max_position_error": 100.0, "max_speed": 100.0}


def _single(task: str, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    env = gym.make(f"robo_rl/Crazyflie{task}-v0", **ARENA, **NO_RANDOMIZATION)
    env.reset(seed=0, options={"initial_state": INIT})
    pos, obs, rewards = [], [], []
    for a in actions:
        o, r, terminated, _, _ = env.step(a)
        assert not terminated
        pos.append(env.unwrapped.data.qpos[:3].copy())
        obs.append(o)
        rewards.append(r)
    return np.array(pos), np.array(obs), np.array(rewards)


def _batched(task: str, actions: np.ndarray, backend: str, dtype: torch.dtype) -> tuple[np.ndarray, ...]:
    n = 3
    env = QuadrotorVectorEnv({"Hover": "hover", "FigureEight": "figure_eight"}[task], num_envs=n,
                             backend=backend, **({"dtype": dtype, "device": "cpu"} if backend == "torch" else {}), **ARENA,
                             **NO_RANDOMIZATION)  # MuJoCo steps in float64
    env.reset(seed=0, options={"initial_state": INIT})
    pos, obs, rewards = [], [], []
    for a in actions:
        o, r, terminated, _, _ = env.step(np.tile(a, (n, 1)))
        assert not np.asarray(terminated).any()
        state = env.batch.physics.state()[0].T  # (N, 3)
        pos.append(state.cpu().numpy().copy() if isinstance(state, torch.Tensor) else state.copy())
        obs.append(np.asarray(o))
        rewards.append(np.asarray(r))
    pos, obs, rewards = np.array(pos), np.array(obs), np.array(rewards)
    for k in range(1, n):  # every env of the batch flies the same trajectory
        np.testing.assert_array_equal(pos[:, k], pos[:, 0])
    return pos[:, 0], obs[:, 0], rewards[:, 0]


@pytest.mark.parametrize("task", ["Hover", "FigureEight"])
@pytest.mark.parametrize(
    "backend, dtype, pos_tol, obs_tol",
    [("mujoco_batch", torch.float64, 0.0, 0.0), ("torch", torch.float64, 1e-9, 1e-6),
     ("torch", torch.float32, 1e-3, 1e-3)],
)
def test_batched_paths_reproduce_the_single_env(excitation, task, backend, dtype, pos_tol, obs_tol):
    ref_pos, ref_obs, ref_rew = _single(task, excitation)
    assert np.linalg.norm(ref_pos[-1] - ref_pos[0]) > 1.0  # the flight is not trivial
    pos, obs, rew = _batched(task, excitation, backend, dtype)
    np.testing.assert_allclose(pos, ref_pos, rtol=0, atol=pos_tol)
    np.testing.assert_allclose(obs, ref_obs, rtol=0, atol=max(obs_tol, 1e-6))  # single env obs are float32
    np.testing.assert_allclose(rew, ref_rew, rtol=1e-5, atol=max(obs_tol, 1e-5))


def test_batch_detects_contacts_only_when_the_vehicle_can_touch_the_floor():
    flying = QuadrotorVectorEnv("hover", num_envs=2, backend="mujoco_batch", **NO_RANDOMIZATION)
    reach = flying.batch.params.reach
    assert flying.config.min_altitude > reach  # default tasks end before any geom reaches the floor
    assert flying.batch.physics.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    # without contacts nothing in the model makes constraints: the solver is skipped (bit-identical results
    # above), but not where the floor can be touched
    assert flying.batch.physics.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    landing = QuadrotorVectorEnv("hover", num_envs=2, backend="mujoco_batch", min_altitude=-1.0,
                                 max_position_error=5.0, **NO_RANDOMIZATION)
    assert not landing.batch.physics.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    landing.reset(options={"initial_state": {"position": (0, 0, 0.2)}})
    for _ in range(100):  # motors off: it falls and rests on the floor
        landing.step(np.zeros((2, 4)))
    assert np.asarray(landing.batch.physics.state()[0])[2, 0] == pytest.approx(0.006, abs=2e-3)


@pytest.mark.parametrize("extra, constraint_off, passive_off", [
    ("", True, True),
    ('<joint name="hinge" type="hinge" damping="0.1"/>', True, False),  # a damper acts
    ('<joint name="hinge" type="hinge" range="-1 1"/>', False, True),  # a joint limit makes constraints
    ('<joint name="hinge" type="hinge" frictionloss="0.1"/>', False, True),
])
def test_inactive_stages_skips_only_what_cannot_act(extra, constraint_off, passive_off):
    from sim.quadrotor.physics import inactive_stages

    xml = f"""<mujoco><option><flag contact="disable"/></option><worldbody>
      <body><freejoint/><geom size="0.1"/></body>
      <body pos="1 0 0">{extra}<geom size="0.1"/></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    flags = inactive_stages(model)
    bits = mujoco.mjtDisableBit
    assert bool(flags & bits.mjDSBL_CONSTRAINT) == constraint_off
    assert bool(flags & bits.mjDSBL_DAMPER) == bool(flags & bits.mjDSBL_SPRING) == passive_off
    model.opt.disableflags &= ~int(bits.mjDSBL_CONTACT)  # with contacts the solver is always needed
    assert not inactive_stages(model) & bits.mjDSBL_CONSTRAINT
