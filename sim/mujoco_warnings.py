"""MuJoCo's warnings through Python's logging.

By default MuJoCo prints each warning (a diverging simulation: "Nan, Inf or huge value in QVEL ...") and appends
it to MUJOCO_LOG.TXT in the process's working directory, a file no robo-rl command owns. The envs report what
those warnings mean themselves (the arm's `info["diverged"]`, the quadrotor's termination); the text goes to the
"mujoco" logger, which a Hydra command writes to its run's log.
"""

from __future__ import annotations

import logging

import mujoco

LOGGER = logging.getLogger("mujoco")
# the warnings with which MuJoCo resets a simulation whose positions, velocities or accelerations became
# non-finite or huge: the state read afterwards is the model's initial one, not where the simulation diverged
UNSTABLE_WARNINGS = [int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL),
                     int(mujoco.mjtWarning.mjWARN_BADQACC)]


def _log_warning(message: str) -> None:
    LOGGER.warning(message)


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to the "mujoco" logger instead of stdout and MUJOCO_LOG.TXT, unless the process
    installed a handler of its own (`mujoco.set_mju_user_warning`), which is kept."""
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_log_warning)
