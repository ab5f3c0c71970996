"""Gymnasium registration of the robo-rl environments."""

from __future__ import annotations

import gymnasium as gym

QUADROTOR_ENV_IDS = {
    "robo_rl/CrazyflieHover-v0": "hover",
    "robo_rl/CrazyflieReach-v0": "reach",
    "robo_rl/CrazyflieFigureEight-v0": "figure_eight",
}


def register_envs() -> None:
    """Register every robo-rl environment id (idempotent)."""
    for env_id, task in QUADROTOR_ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point="sim.quadrotor.env:QuadrotorEnv",
            vector_entry_point="sim.quadrotor.env:QuadrotorVectorEnv",
            kwargs={"task": task},
            max_episode_steps=None,
            disable_env_checker=False,
        )
