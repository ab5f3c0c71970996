"""The quadrotor tasks, one module each (a `QuadrotorTask`); `TASKS` names them for configs and env ids."""

from __future__ import annotations

from sim.errors import ConfigError
from sim.quadrotor.tasks.base import QuadrotorTask, StepValues
from sim.quadrotor.tasks.figure_eight import FigureEight
from sim.quadrotor.tasks.hover import Hover
from sim.quadrotor.tasks.reach import Reach

TASKS: dict[str, QuadrotorTask] = {task.name: task for task in (Hover(), Reach(), FigureEight())}


def task_named(name: str) -> QuadrotorTask:
    """The task called `name`; ConfigError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in TASKS:
        raise ConfigError(f"unknown quadrotor task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


__all__ = ["TASKS", "QuadrotorTask", "StepValues", "task_named"]
