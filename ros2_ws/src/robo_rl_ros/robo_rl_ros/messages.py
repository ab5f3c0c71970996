"""Conversions between ROS 2 messages and the core's types (the only ROS-aware part besides the nodes).

Frames follow REP 103/105 and crazyswarm2: poses in the world frame; an Odometry's twist in its
child (body) frame, so its linear velocity is rotated to the world frame the observation uses.
"""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry

from robo_rl_ros.core.crazyflie import LegacyCommand
from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.core.rotations import body_to_world, world_to_body


def pose_arrays(msg: PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    """(position, quaternion (w, x, y, z)) of a PoseStamped."""
    p, q = msg.pose.position, msg.pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([q.w, q.x, q.y, q.z])


def odometry_to_state(msg: Odometry) -> VehicleState:
    """The vehicle state of an Odometry (twist in the body frame, as REP 105 says)."""
    pose, twist = msg.pose.pose, msg.twist.twist
    p, q, v, w = pose.position, pose.orientation, twist.linear, twist.angular
    quaternion = [q.w, q.x, q.y, q.z]
    norm = math.sqrt(sum(c * c for c in quaternion))
    unit = [c / norm for c in quaternion] if math.isfinite(norm) and norm > 0 else quaternion
    return VehicleState(np.array([p.x, p.y, p.z]), np.array(quaternion), body_to_world(unit, [v.x, v.y, v.z]),
                        np.array([w.x, w.y, w.z]))


def fill_odometry(msg: Odometry, state: VehicleState) -> Odometry:
    """Write `state` into an Odometry (twist rotated into the body frame)."""
    fill_pose(msg.pose.pose, state.position, state.quaternion)
    v = world_to_body(state.quaternion, state.velocity)
    msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.linear.z = (float(x) for x in v)
    w = state.angular_velocity
    msg.twist.twist.angular.x, msg.twist.twist.angular.y, msg.twist.twist.angular.z = (float(x) for x in w)
    return msg


def fill_pose(pose, position: np.ndarray, quaternion: np.ndarray) -> None:
    """Write position and quaternion (w, x, y, z) into a geometry_msgs/Pose."""
    pose.position.x, pose.position.y, pose.position.z = (float(x) for x in position)
    o = pose.orientation
    o.w, o.x, o.y, o.z = (float(x) for x in quaternion)


def legacy_twist(command: LegacyCommand, msg: Twist | None = None) -> Twist:
    """crazyswarm2's cmd_vel_legacy Twist for a command (written into `msg` if given)."""
    msg = Twist() if msg is None else msg
    msg.linear.y, msg.linear.x = command.roll_deg, command.pitch_deg
    msg.angular.z, msg.linear.z = command.yaw_rate_deg, command.thrust_pwm
    return msg


def twist_legacy(msg: Twist) -> LegacyCommand:
    """The command in a cmd_vel_legacy Twist."""
    return LegacyCommand(msg.linear.y, msg.linear.x, msg.angular.z, msg.linear.z)


def stamp_seconds(stamp: Time) -> float:
    """A builtin_interfaces/Time in seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def time_msg(seconds: float) -> Time:
    """Seconds as builtin_interfaces/Time."""
    nanoseconds = int(round(seconds * 1e9))
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)
