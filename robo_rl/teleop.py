"""Teleoperation from the keyboard of a terminal: SERL-style end-effector actions for the arm tasks.

Keys: see KEYS_HELP (hold a key and the terminal's key repeat keeps it moving). The terminal is put in raw mode while recording and restored afterwards (also on errors). A key press
moves the tool for `hold_steps` control steps, bridging the gaps of the terminal's key repeat.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import tty
from typing import IO, Callable

import numpy as np

KEYS_HELP = """keys: w/s tool +x/-x, a/d +y/-y, r/f up/down, space close/open the gripper,
      x end the episode now, y/n keep/discard the finished episode, q quit"""
MOVES = {"w": (0, 1.0), "s": (0, -1.0), "a": (1, 1.0), "d": (1, -1.0), "r": (2, 1.0), "f": (2, -1.0)}


class KeyboardTeleop:
    """Reads keys without blocking from a terminal and turns them into actions (dx, dy, dz, gripper).

    Args:
        stream: a terminal (default stdin); it must be a TTY.
        hold_steps: control steps a key press keeps acting.
        speed: |action| of a held direction key (actions are in [-1, 1]).
    """

    def __init__(self, stream: IO | None = None, hold_steps: int = 6, speed: float = 1.0):
        self.stream = stream or sys.stdin
        if not os.isatty(self.stream.fileno()):
            raise RuntimeError("keyboard teleoperation needs a terminal on stdin (run it in a shell, not a pipe)")
        self.hold_steps, self.speed = hold_steps, speed
        self._held = np.zeros(3, dtype=np.int64)  # steps left per axis
        self._direction = np.zeros(3)
        self.gripper = -1.0  # open
        self.end_requested = False
        self.quit_requested = False
        self._saved: list | None = None

    def __enter__(self) -> "KeyboardTeleop":
        fd = self.stream.fileno()
        self._saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)  # keys arrive one by one, unechoed; Ctrl-C still interrupts
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self._saved)
            self._saved = None

    def read_keys(self, timeout: float = 0.0) -> str:
        """Every key typed since the last call (waits up to `timeout` seconds for the first)."""
        fd, keys = self.stream.fileno(), ""
        while select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 64).decode(errors="ignore")
            if not chunk:
                break
            keys += chunk
            timeout = 0.0
        return keys.lower()

    def action(self) -> np.ndarray:
        """The action for this control step from the keys typed since the previous one."""
        for key in self.read_keys():
            if key in MOVES:
                axis, sign = MOVES[key]
                self._direction[axis], self._held[axis] = sign, self.hold_steps
            elif key == " ":
                self.gripper = -self.gripper
            elif key == "x":
                self.end_requested = True
            elif key == "q":
                self.quit_requested = True
        move = np.where(self._held > 0, self._direction * self.speed, 0.0)
        self._held = np.maximum(self._held - 1, 0)
        return np.array([*move, self.gripper], dtype=np.float32)

    def start_episode(self) -> None:
        """Forget held keys and open the gripper."""
        self._held[:] = 0
        self.gripper, self.end_requested = -1.0, False

    def ask_accept(self, prompt: Callable[[str], None] = print) -> bool | None:
        """Wait for y (accept), n (reject) or q (quit: returns None)."""
        prompt("episode finished: y = keep it, n = discard it, q = quit")
        while True:
            for key in self.read_keys(timeout=0.5):
                if key in "yn":
                    return key == "y"
                if key == "q":
                    self.quit_requested = True
                    return None
