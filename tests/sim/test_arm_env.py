"""The arm tasks: gymnasium API, seeding, the scripted expert, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sim  # noqa: F401
from sim.arm.env import ArmTaskConfig, ArmVectorEnv
from sim.arm.expert import expert_actions
from sim.errors import ConfigError


@pytest.mark.parametrize("env_id", ["robo_rl/ArmPickCube-v0", "robo_rl/ArmReach-v0"])
def test_gymnasium_env_checker_passes_and_make_vec_gives_the_batch(env_id):
    check_env(gym.make(env_id).unwrapped)
    venv = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", nthread=1)
    assert isinstance(venv, ArmVectorEnv) and venv.observation_space.shape == (3, venv.layout.size)


def test_same_seed_same_episodes_and_placements_vary():
    def rollout(seed):
        env = ArmVectorEnv("pick_cube", num_envs=4, nthread=1)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(1)
        frames = [obs]
        for _ in range(20):
            frames.append(env.step(rng.uniform(-1, 1, (4, 4)))[0])
        return np.stack(frames)

    a, b, c = rollout(7), rollout(7), rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], c[0])
    cubes = a[0][:, 7:10]
    assert len({tuple(np.round(x, 4)) for x in cubes}) == 4  # each env its own cube placement


@pytest.mark.parametrize("task", ["pick_cube", "reach"])
def test_scripted_expert_succeeds(task):
    env = ArmVectorEnv(task, num_envs=24, nthread=1)
    obs, _ = env.reset(seed=0)
    success = np.zeros(env.num_envs, dtype=bool)
    for _ in range(env.config.episode_steps):
        obs, reward, terminated, truncated, info = env.step(expert_actions(obs, env.layout, env.config.action_scale, task))
        success |= info["is_success"]
    assert success.mean() >= 0.9, success.mean()
    assert truncated.all() and "final_obs" in info  # every episode ended at the time limit and restarted


def test_bad_actions_and_configs_raise_clear_errors():
    env = ArmVectorEnv("reach", num_envs=2, nthread=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.full((2, 4), np.nan))
    with pytest.raises(ConfigError, match="unknown arm task"):
        ArmVectorEnv("stack", num_envs=1)
    with pytest.raises(ConfigError, match="substeps"):
        ArmVectorEnv(config=ArmTaskConfig(substeps=7), num_envs=1)


def test_config_overrides_arrive_as_dicts_from_hydra():
    env = ArmVectorEnv(num_envs=1, nthread=1, config={"task": "reach", "gains": {"translation_stiffness": 3000.0},
                                                      "spec": {"ee_site": "tcp"}})
    assert env.config.task == "reach" and env.config.gains.translation_stiffness == 3000.0
    with pytest.raises(ConfigError, match="unknown arm task options"):
        ArmVectorEnv(num_envs=1, config={"cube_colour": "red"})
    with pytest.raises(ConfigError, match="mujoco_batch"):
        ArmVectorEnv(num_envs=1, backend="torch")
