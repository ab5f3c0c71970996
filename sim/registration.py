"""Gymnasium registration of the robo-rl environments."""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym

from sim.quadrotor.tasks import TASKS

QUADROTOR_ENV_IDS = {task.env_id: name for name, task in TASKS.items()}  # one per task module


ARM_ENV_IDS = {
    "robo_rl/ArmPickCube-v0": "pick_cube",
    "robo_rl/ArmReach-v0": "reach",
    "robo_rl/SOArm100PickCube-v0": {"task": "pick_cube", "robot": "so_arm100"},
    "robo_rl/SOArm100Reach-v0": {"task": "reach", "robot": "so_arm100"},
}


# (ids -> task, single-env entry point, vector-env entry point)
FAMILIES = (
    (QUADROTOR_ENV_IDS, "sim.quadrotor.env:QuadrotorEnv", "sim.quadrotor.env:QuadrotorVectorEnv"),
    (ARM_ENV_IDS, "sim.arm.env:ArmEnv", "sim.arm.env:ArmVectorEnv"),
)


def register_envs() -> None:
    """Register every robo-rl environment id (idempotent)."""
    for ids, entry_point, vector_entry_point in FAMILIES:
        for env_id, task in ids.items():
            if env_id in gym.registry:
                continue
            kwargs = task if isinstance(task, dict) else {"task": task}  # a task name, or constructor kwargs
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point,
                         kwargs=kwargs, max_episode_steps=None, disable_env_checker=False)


def make_env_config(env_id: str, *layers: Mapping[str, Any]) -> Any:
    """The validated config of registered env `env_id`: its task's defaults with each layer of overrides
    (nested mappings, as Hydra gives them) merged over the last (`sim.validation.merge`), checked by the
    env's own `make_config`; ConfigError naming the field for a bad value."""
    from sim.arm.env import make_arm_config
    from sim.quadrotor.config import make_config
    from sim.validation import merge

    if env_id in QUADROTOR_ENV_IDS:
        def make(config: Any) -> Any:
            return make_config(QUADROTOR_ENV_IDS[env_id], config)
    else:
        task = ARM_ENV_IDS[env_id]

        def make(config: Any) -> Any:
            return make_arm_config(**(task if isinstance(task, dict) else {"task": task}), config=config)
    config = make(dict(layers[0]) if layers else None)
    for layer in layers[1:]:
        config = make(merge(config, layer))
    return config
