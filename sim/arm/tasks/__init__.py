"""The arm tasks, one module each (an `ArmTask`); `ARM_TASKS` names them for configs and env ids."""

from __future__ import annotations

from sim.arm.tasks.base import ArmTask
from sim.arm.tasks.pick_cube import PickCube
from sim.arm.tasks.reach import Reach
from sim.errors import ConfigError

ARM_TASKS: dict[str, ArmTask] = {task.name: task for task in (Reach(), PickCube())}


def arm_task_named(name: str) -> ArmTask:
    """The arm task called `name`; ConfigError naming the known ones otherwise."""
    if not isinstance(name, str) or name not in ARM_TASKS:
        raise ConfigError(f"unknown arm task {name!r}; known: {', '.join(ARM_TASKS)}")
    return ARM_TASKS[name]


__all__ = ["ARM_TASKS", "ArmTask", "arm_task_named"]
