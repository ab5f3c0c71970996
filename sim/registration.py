"""Gymnasium registration of the robo-rl environments."""

from __future__ import annotations

import gymnasium as gym

QUADROTOR_ENV_IDS = {
    "robo_rl/CrazyflieHover-v0": "hover",
    "robo_rl/CrazyflieReach-v0": "reach",
    "robo_rl/CrazyflieFigureEight-v0": "figure_eight",
}


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
