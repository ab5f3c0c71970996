"""The quadrotor tasks, one module each: every `QuadrotorTask` subclass with a `name` in this package's modules
is a task, found here, registered under its `env_id` (sim.registration) and configured by `configs/env/`."""

from __future__ import annotations

import importlib
import pkgutil

from sim.errors import ConfigError
from sim.quadrotor.tasks.base import QuadrotorTask, StepValues


def _discover() -> dict[str, QuadrotorTask]:
    """An instance of every task class defined in this package's modules, by name."""
    tasks: dict[str, QuadrotorTask] = {}
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        for value in vars(loaded).values():
            if (isinstance(value, type) and issubclass(value, QuadrotorTask) and value.__module__ == loaded.__name__
                    and "name" in vars(value)):
                tasks[value.name] = value()
    return dict(sorted(tasks.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER))))


_ORDER = {"hover": 0, "reach": 1, "figure_eight": 2}  # the first tasks first, as the docs list them
TASKS: dict[str, QuadrotorTask] = _discover()


def task_named(name: str) -> QuadrotorTask:
    """The task called `name`; ConfigError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in TASKS:
        raise ConfigError(f"unknown quadrotor task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


__all__ = ["TASKS", "QuadrotorTask", "StepValues", "task_named"]
