"""MuJoCo's offscreen renderer for the simulators' frames, with one clear error where no OpenGL is to be had."""

from __future__ import annotations

import os
from typing import Any


def offscreen_renderer(model: Any, height: int, width: int) -> Any:
    """A `mujoco.Renderer` of `model`; RuntimeError saying what to set where MuJoCo finds no OpenGL (a machine
    without a display and MUJOCO_GL unset: GLFW's warnings, then "an OpenGL platform library has not been loaded")."""
    import warnings

    import mujoco

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GLFW's "DISPLAY missing", said again below in one line
        try:
            return mujoco.Renderer(model, height, width)
        except mujoco.FatalError as error:
            if "OpenGL" not in str(error):
                raise
            raise RuntimeError(f"MuJoCo found no OpenGL to render with (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}, "
                               f"DISPLAY={os.environ.get('DISPLAY')!r}): on a machine without a display set "
                               "MUJOCO_GL=egl (or osmesa) before mujoco is imported, e.g. MUJOCO_GL=egl python ...") \
                from None
