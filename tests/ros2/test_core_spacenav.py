"""A person's SpaceMouse intervention through spacenav_node's topics (robo_rl_ros.core.spacenav), checked
against what spacenav_node publishes (ros-drivers/joystick_drivers, spacenav/src/spacenav.cpp), not against
an inverse of this module."""

from __future__ import annotations

import numpy as np
import pytest

from robo_rl_ros.core.spacenav import SpacenavSettings, SpacenavTeleop

FULL_SCALE = 512.0  # spacenav_node's default full_scale


def spacenav_twist_linear(motion_x: int, motion_y: int, motion_z: int, linear_scale=(1.0, 1.0, 1.0)):
    """spacenav_node's twist.linear for a libspnav motion event: (z, -x, y) / full_scale * linear_scale."""
    normed = (motion_z / FULL_SCALE, -motion_x / FULL_SCALE, motion_y / FULL_SCALE)
    return tuple(n * s for n, s in zip(normed, linear_scale))


def spacenav_joy_buttons(bnum: int, press: int) -> list[int]:
    """spacenav_node's joy.buttons for one button event: resized to bnum + 1 (zeros), then [bnum] = press."""
    buttons = [0] * (bnum + 1)
    buttons[bnum] = press
    return buttons


def test_the_cap_pushed_moves_the_tool_the_way_spacenav_node_reports_it():
    teleop = SpacenavTeleop(SpacenavSettings(linear_scale=(0.25, 0.25, 0.25)))
    assert teleop.action(0.0) is None  # nothing heard: nobody intervenes
    # libspnav z = +256 (spacenav_node: +x, forward), y = -512 (-z, down), x = +100 (-y, right)
    teleop.on_twist(0.0, spacenav_twist_linear(100, -512, 256, (0.25, 0.25, 0.25)))
    np.testing.assert_allclose(teleop.action(0.01), [0.5, -100 / 512, -1.0, -1.0])  # gripper open by default


def test_gripper_buttons_are_events_and_a_motion_message_without_buttons_releases_nothing():
    teleop = SpacenavTeleop(SpacenavSettings(close_button=0, open_button=1, hold_s=0.5))
    teleop.on_joy(0.0, spacenav_joy_buttons(0, 1))  # close pressed
    assert teleop.action(0.0)[3] == 1.0
    teleop.on_joy(0.1, [])  # a motion message: buttons empty, the close button is still held
    assert teleop.pressed[0] and teleop.action(0.1) is not None
    teleop.on_joy(0.2, spacenav_joy_buttons(1, 1))  # open pressed: [0, 1], entry 0 is not button 0's state
    assert teleop.pressed[0] and teleop.action(0.2)[3] == -1.0
    teleop.on_joy(0.3, spacenav_joy_buttons(0, 0))
    teleop.on_joy(0.3, spacenav_joy_buttons(1, 0))
    assert teleop.action(0.5) is not None and teleop.action(0.81) is None  # released: control returns after hold_s


def test_a_resting_cap_or_a_silent_driver_hands_control_back():
    teleop = SpacenavTeleop(SpacenavSettings(hold_s=0.5, timeout_s=0.25))
    teleop.on_twist(0.0, spacenav_twist_linear(0, 0, 512))
    assert teleop.action(0.0)[0] == 1.0
    teleop.on_twist(0.1, (0.0, 0.0, 0.0))  # zero_when_static: spacenav_node's zeros once the cap rests
    np.testing.assert_array_equal(teleop.action(0.2)[:3], 0.0)  # still the person's (holding), not moving
    assert teleop.action(0.61) is None
    silent = SpacenavTeleop(SpacenavSettings(hold_s=10.0, timeout_s=0.25))
    silent.on_twist(0.0, spacenav_twist_linear(0, 0, 512))
    assert silent.action(0.2) is not None and silent.action(0.3) is None  # the driver died mid-push
    held = SpacenavTeleop(SpacenavSettings(hold_s=10.0, timeout_s=0.25))
    held.on_joy(0.0, spacenav_joy_buttons(0, 1))
    assert held.action(0.2) is not None and held.action(0.3) is None  # died with the close button held


def test_a_takeover_ends_with_its_episode_unless_the_person_still_pushes():
    """Seen on the robot actor: the hold after the person's last push in one episode flew the first ticks of
    the next, an evaluation episode, which then counted as helped."""
    teleop = SpacenavTeleop(SpacenavSettings(hold_s=0.5, timeout_s=0.25))
    teleop.on_twist(0.0, spacenav_twist_linear(0, 0, 512))
    teleop.on_twist(0.1, (0.0, 0.0, 0.0))  # let go at 0.1; the hold would keep it theirs until 0.6
    teleop.new_episode()
    teleop.on_twist(0.2, (0.0, 0.0, 0.0))
    assert teleop.action(0.2) is None
    teleop.on_twist(0.3, spacenav_twist_linear(0, 0, 512))  # pushes in the new episode: theirs at once
    assert teleop.action(0.3)[0] == 1.0
    teleop.on_joy(0.4, spacenav_joy_buttons(0, 1))
    teleop.new_episode()
    assert teleop.action(0.4) is not None  # a button still held down is still an intervention


def test_bad_input_is_ignored_and_bad_settings_refused():
    teleop = SpacenavTeleop(SpacenavSettings())
    teleop.on_twist(0.0, (np.nan, 0.0, 0.0))
    assert teleop.action(0.0) is None
    with pytest.raises(ValueError, match="linear_scale"):
        SpacenavTeleop(SpacenavSettings(linear_scale=(1.0, 0.0, 1.0)))
