"""Fuzzed env configs for every env: `gymnasium.make_vec(env_id, config=<mutated dict>)`, then a reset and a
few steps; a config is either refused with one ConfigError or gives finite observations and rewards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import sim  # noqa: F401  (registers the env ids)
from sim.arm.env import ROBOTS, ArmTaskConfig
from sim.quadrotor.config import default_config
from sim.quadrotor.model import VEHICLES
from sim.registration import ARM_ENV_IDS, QUADROTOR_ENV_IDS
from tests.fuzz.harness import SEED, mutate

INPUTS_PER_ENV = 650
STEPS = 3


def jsonable(value):
    """A config dataclass as the nested dicts and lists a user (or Hydra) writes."""
    if dataclasses.is_dataclass(value):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def base_config(env_id: str) -> dict:
    if env_id in QUADROTOR_ENV_IDS:
        config = jsonable(default_config(QUADROTOR_ENV_IDS[env_id]))
        config.pop("task")
        # every vehicle parameter spelled out, so that the mutations reach them too
        vehicle = VEHICLES["crazyflie_l2f_paper"]  # (the only one with every field set)
        config["vehicle_overrides"] = jsonable({f.name: getattr(vehicle, f.name) for f in dataclasses.fields(vehicle)
                                                if f.name != "source" and getattr(vehicle, f.name) is not None})
        return config
    kwargs = ARM_ENV_IDS[env_id]
    task, robot = (kwargs, "panda_like") if isinstance(kwargs, str) else (kwargs["task"], kwargs["robot"])
    config = jsonable(ArmTaskConfig(task=task, **ROBOTS[robot]))
    config.pop("task")
    return config


def make_and_step(env_id: str, config: dict, backend: str, seed: int) -> dict:
    kwargs = {"nthread": 1}
    if env_id in QUADROTOR_ENV_IDS:
        kwargs = {"backend": backend, **({"device": torch.device("cpu"), "compile": False} if backend == "torch" else kwargs)}
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", config=config, **kwargs)
    outputs = {}
    obs, _ = env.reset(seed=seed)
    outputs["reset_obs"] = np.asarray(obs)
    rng = np.random.default_rng(seed)
    for step in range(STEPS):
        actions = rng.uniform(env.single_action_space.low, env.single_action_space.high, (2, env.single_action_space.shape[0]))
        obs, reward, terminated, truncated, info = env.step(actions.astype(np.float32))
        outputs[f"step{step}"] = {"obs": np.asarray(obs), "reward": np.asarray(reward),
                                  "final_obs": np.asarray(info["final_obs"])[np.asarray(info["_final_obs"])]
                                  if "final_obs" in info else None}
    env.close()
    return outputs


@pytest.mark.parametrize("env_id", [*QUADROTOR_ENV_IDS, *ARM_ENV_IDS])
def test_fuzzed_env_configs(env_id, report):
    tally = report.tally(f"env config {env_id}")
    rng = np.random.default_rng([SEED, sorted([*QUADROTOR_ENV_IDS, *ARM_ENV_IDS]).index(env_id)])
    base = base_config(env_id)
    tally.run("defaults", lambda: make_and_step(env_id, base, "torch", 0))
    for index in range(INPUTS_PER_ENV):
        config, what = mutate(base, rng)
        if not isinstance(config, dict):
            config = {"fuzz": config}
        backend = "torch" if index % 2 else "mujoco_batch"
        tally.run(f"#{index} {backend} {what}", lambda: make_and_step(env_id, config, backend, index))
