"""A quick training configuration for tests: small networks, easy starts, frequent small evaluations.

Pinned to the settings its assertions were calibrated on (the RLtools vehicle, dense shaping, SAC
temperature 0.1 with the default target entropy), so that changing the task's defaults for long runs
does not silently change what the short tests measure.
"""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
QUICK = [
    "agent=sac_quadrotor", "agent.actor_hidden=[32,32]", "agent.critic_hidden=[32,32]",
    "agent.actor_lr=1e-3", "agent.critic_lr=1e-3", "agent.temperature_lr=1e-3", "agent.critic_updates_per_actor_update=1",
    "agent.init_temperature=0.1", "agent.target_entropy=null",
    # eager: each test process would compile for 10-30 s; test_sac holds the compiled update to the eager one
    # and test_train.py's resume test trains compiled
    "agent.compile=false",
    "env.backend=mujoco_batch", "num_envs=16", "torch_threads=1", "learning_starts=2000", "updates_per_iteration=2",
    "eval.episodes=20", "start_from_nominal_action=false", "logging.progress_bar=false", "logging.log_interval_env_steps=2000",
    "+env.overrides.vehicle=crazyflie_rltools",
    "+env.overrides.initial_state={position_range: 0.05, max_tilt_deg: 10.0, velocity_range: 0.1, "
    "angular_velocity_range: 0.1, hover_fraction: 0.0}",
    # dense shaping whose short-run gains are steady across seeds (the task defaults pay off over longer runs)
    "+env.overrides.reward_scales={position: -1.0, distance: 0.0, proximity: 0.0, orientation: -0.5, velocity: -0.05, speed: 0.0, "
    "angular_velocity: -0.005, action: -0.2, action_rate: -0.5, alive: 1.0, termination: -10.0}",
]


def quick_config(*overrides: str) -> DictConfig:
    """configs/train.yaml composed with QUICK and `overrides`."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="train", overrides=[*QUICK, *overrides])
