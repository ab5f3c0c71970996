"""Crazyflie 2.x quadrotor: MJCF model, tasks, domain randomization and batched simulation paths."""

from sim.quadrotor.config import QuadrotorEnvConfig, default_config, make_config
from sim.quadrotor.env import QuadrotorEnv, QuadrotorVectorEnv
from sim.quadrotor.model import VEHICLES, QuadrotorParams, load_model

__all__ = [
    "QuadrotorEnv", "QuadrotorVectorEnv", "QuadrotorEnvConfig", "QuadrotorParams",
    "VEHICLES", "default_config", "load_model", "make_config",
]
