"""Odometry in crazyswarm2's convention and in REP 105's, against what crazyswarm2's own server writes.

IMRCLab/crazyswarm2 crazyflie/src/crazyflie_server.cpp `on_logging_odom`: `msg.header.frame_id = name_`, no
child_frame_id, `position.x = data->x / 1000.0f` and `twist.twist.linear.x = data->vx / 1000.0f` from the log
variables stateEstimateZ.x and stateEstimateZ.vx (int16, mm and mm/s), the angular twist left at zero (its
rateRoll..rateYaw lines are commented out). The firmware fills stateEstimateZ.vx with state.velocity.x * 1000
(src/modules/src/stabilizer.c `compressState`), its estimate's velocity in the world frame.
"""

import math

import numpy as np
from nav_msgs.msg import Odometry

from robo_rl_ros.messages import (crazyswarm2_odometry_arrays, fill_crazyswarm2_odometry, odometry_frames_problem,
                                  odometry_to_state)
from robo_rl_ros.core.observation import VehicleState

YAW_90 = (math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4))  # (w, x, y, z): nose along world +y


def _crazyswarm2_odometry(position_mm, velocity_mm_s, quaternion_wxyz) -> Odometry:
    """An Odometry as crazyswarm2's server builds it from a logOdom packet (int16 mm, mm/s)."""
    msg = Odometry()
    msg.header.frame_id = "cf231"  # name_
    p, v = msg.pose.pose.position, msg.twist.twist.linear
    p.x, p.y, p.z = (np.float32(x) / np.float32(1000.0) for x in position_mm)
    v.x, v.y, v.z = (np.float32(x) / np.float32(1000.0) for x in velocity_mm_s)
    q = msg.pose.pose.orientation
    q.w, q.x, q.y, q.z = quaternion_wxyz
    return msg


def test_crazyswarm2_odometry_is_read_with_its_velocity_in_the_world_frame():
    # yawed 90 degrees, flying along world +x at 0.5 m/s: the firmware logs vx = 500 mm/s
    msg = _crazyswarm2_odometry((100, -200, 1000), (500, 0, -30), YAW_90)
    assert odometry_frames_problem(msg, "crazyswarm2") == ""
    position, quaternion, velocity = crazyswarm2_odometry_arrays(msg)
    assert np.allclose(position, [0.1, -0.2, 1.0]) and np.allclose(velocity, [0.5, 0.0, -0.03], atol=1e-7)
    # read as REP 105 (the twist in the body frame) it would have been rotated to world +y: refused instead
    assert np.allclose(odometry_to_state(msg).velocity, [0.0, 0.5, -0.03], atol=1e-6)
    problem = odometry_frames_problem(msg, "rep105")
    assert "child_frame_id ''" in problem and "odom_convention 'crazyswarm2'" in problem


def test_rep105_odometry_is_refused_in_the_crazyswarm2_convention():
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "world", "cf231"
    assert odometry_frames_problem(msg, "rep105") == ""
    assert "odom_convention 'rep105'" in odometry_frames_problem(msg, "crazyswarm2")
    msg.child_frame_id = "world"  # a twist "in the world frame" under REP 105's field: ambiguous, refused
    assert odometry_frames_problem(msg, "rep105")


def test_the_sim_bridge_writes_crazyswarm2_odometry_as_its_server_does():
    state = VehicleState(np.array([0.1234, -0.2, 1.0006]), np.array(YAW_90), np.array([0.5004, 0.0, -0.0304]),
                         np.array([1.0, 2.0, 3.0]))
    msg = fill_crazyswarm2_odometry(Odometry(), state)
    expected = _crazyswarm2_odometry((123, -200, 1001), (500, 0, -30), YAW_90)
    assert msg.pose.pose == expected.pose.pose
    for axis in "xyz":  # whole mm/s, as the int16 log variable carries them; no body rates
        assert math.isclose(getattr(msg.twist.twist.linear, axis), getattr(expected.twist.twist.linear, axis),
                            abs_tol=1e-7)
        assert getattr(msg.twist.twist.angular, axis) == 0.0
