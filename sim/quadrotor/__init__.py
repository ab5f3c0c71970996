"""Crazyflie 2.x quadrotor: MJCF model, tasks, domain randomization and batched simulation paths.

The names below load on first use (PEP 562), so that importing `sim` (which registers the env ids from the
task modules) does not import torch: the arm's render workers and every command's argument checks start
without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"QuadrotorEnvConfig": "config", "default_config": "config", "make_config": "config",
          "QuadrotorEnv": "env", "QuadrotorVectorEnv": "env",
          "VEHICLES": "model", "QuadrotorParams": "model", "load_model": "model"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
