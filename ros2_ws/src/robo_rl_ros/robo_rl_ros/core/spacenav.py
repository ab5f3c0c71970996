"""A person's intervention from a 3Dconnexion SpaceMouse through ROS 2's spacenav_node, as an arm action.

What spacenav_node (ros-drivers/joystick_drivers, spacenav/src/spacenav.cpp) publishes, and what this
relies on:
- `spacenav/twist` (geometry_msgs/Twist): the cap's displacement normalised by `full_scale` (512 by
  default) to about [-1, 1], times the node's `linear_scale` / `angular_scale` (1 by default), in ROS axes
  (x forward, y left, z up: it maps libspnav's (z, -x, y)); all zero once the cap rests (`zero_when_static`).
- `spacenav/joy` (sensor_msgs/Joy): the same six normalised values, unscaled, as axes; its `buttons` carry one
  button event each: a message made for a button event has buttons[0..bnum] with only the last entry meaningful
  (bnum's press), and a message made for motion has no buttons at all. So a button's state is the last event
  for it, never "absent means released".

The action is robo_rl.teleop's (the same convention as recording demos with a SpaceMouse on hidraw): the
tool's displacement (x, y, z) in [-1, 1] (times the task's action_scale metres) in the robot's base frame,
+x away from the base, +y to its left, +z up, which are spacenav_node's axes for an operator standing behind
the robot facing the way it faces, from the twist's linear part divided by
`linear_scale`, and the gripper from two buttons (`close_button` closes: +1, `open_button` opens: -1, the
last one pressed holds). The person intervenes while the cap is displaced beyond `deadband` or a gripper
button is held, and for `hold_s` after the last such input (so a brief pause does not hand the arm back
mid-grasp). spacenav_node keeps publishing while the cap rests (its zeros every `static_count_threshold`
polls, 30 ms by default), so no message for `timeout_s` means the driver is gone: then nobody intervenes,
whatever button was last held.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class SpacenavSettings:
    """What a deployment chooses (node parameters)."""

    linear_scale: tuple[float, float, float] = (1.0, 1.0, 1.0)  # spacenav_node's, to undo
    deadband: float = 0.05      # normalised displacement below which the cap counts as at rest
    close_button: int = 0
    open_button: int = 1
    hold_s: float = 0.5         # the person keeps control this long after their last input
    timeout_s: float = 0.25     # no message for this long: the driver is gone


class SpacenavTeleop:
    """The latest SpaceMouse input and whether, and with which action, the person intervenes."""

    def __init__(self, settings: SpacenavSettings):
        if any(s == 0 for s in settings.linear_scale):
            raise ValueError(f"linear_scale {settings.linear_scale} must be non-zero on every axis")
        self.settings = settings
        self.linear = np.zeros(3)
        self.gripper = -1.0  # open until told otherwise
        self.pressed: dict[int, bool] = {}
        self._last_input = -np.inf   # when the person last moved the cap or held a gripper button
        self._last_message = -np.inf

    def on_twist(self, now: float, linear: tuple[float, float, float]) -> None:
        """A spacenav/twist message's linear part."""
        values = np.asarray(linear, dtype=np.float64) / np.asarray(self.settings.linear_scale)
        if not np.all(np.isfinite(values)):
            return
        self.linear = np.clip(values, -1.0, 1.0)
        self._last_message = now
        if np.max(np.abs(self.linear)) > self.settings.deadband:
            self._last_input = now

    def on_joy(self, now: float, buttons: list[int]) -> None:
        """A spacenav/joy message's buttons: one button event, or none (see the module docstring)."""
        self._last_message = now
        if not buttons:
            return
        button, pressed = len(buttons) - 1, bool(buttons[-1])
        self.pressed[button] = pressed
        if pressed and button == self.settings.close_button:
            self.gripper = 1.0
        elif pressed and button == self.settings.open_button:
            self.gripper = -1.0
        if pressed:
            self._last_input = now

    def new_episode(self) -> None:
        """A new episode began: the hold after the person's last input does not carry over into it (a cap
        still displaced or a button still held takes over again at once)."""
        self._last_input = -np.inf

    def action(self, now: float) -> np.ndarray | None:
        """The person's action (dx, dy, dz, gripper) if they intervene now, else None."""
        s = self.settings
        if now - self._last_message > s.timeout_s:
            return None  # spacenav_node publishes ~30 times a second even at rest: quiet means gone
        holding = any(self.pressed.get(b, False) for b in (s.close_button, s.open_button))
        if holding:
            self._last_input = now
        if now - self._last_input > s.hold_s:
            return None
        moving = np.max(np.abs(self.linear)) > s.deadband
        return np.array([*(self.linear if moving else np.zeros(3)), self.gripper])
