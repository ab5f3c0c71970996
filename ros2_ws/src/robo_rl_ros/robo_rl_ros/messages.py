"""Conversions between ROS 2 messages and the core's types (the only ROS-aware part besides the nodes).

Frames follow REP 103/105 and crazyswarm2: poses in the world frame. Odometry comes in two conventions
(`ODOM_CONVENTIONS`), told apart by the node's `odom_convention` and checked on each message's frame ids:
- "rep105": the twist in the child (body) frame, named by `child_frame_id`; its linear velocity is rotated to
  the world frame the observation uses;
- "crazyswarm2": crazyswarm2's `/<cf>/odom` (IMRCLab/crazyswarm2 crazyflie/src/crazyflie_server.cpp
  `on_logging_odom`): header.frame_id the robot's name, no child_frame_id, position and twist.linear from the
  firmware's stateEstimateZ.x..z and .vx..vz in mm and mm/s (its state.velocity, in the world frame:
  stabilizer.c `compressState`), and no body rates (their log variables are commented out there).
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


ODOM_CONVENTIONS = ("crazyswarm2", "rep105")


def odometry_frames_problem(msg: Odometry, convention: str) -> str:
    """Why `msg`'s frame ids do not fit odometry `convention` (one of `ODOM_CONVENTIONS`); "" if they do."""
    child, parent = msg.child_frame_id, msg.header.frame_id
    if convention == "rep105" and (not child or child == parent):
        return (f"odometry with child_frame_id {child!r} and frame_id {parent!r}: odom_convention 'rep105' reads "
                "the twist in the body frame child_frame_id names; crazyswarm2's /odom names none "
                "(odom_convention 'crazyswarm2')")
    if convention == "crazyswarm2" and child:
        return (f"odometry with child_frame_id {child!r}: crazyswarm2's /odom names none and has its velocity "
                "in the world frame; a REP 105 source (twist in child_frame_id) needs odom_convention 'rep105'")
    return ""


def crazyswarm2_odometry_arrays(msg: Odometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position, quaternion (w, x, y, z), world-frame velocity) of a crazyswarm2 /odom message (no body rates:
    crazyswarm2 sends none)."""
    position, quaternion = pose_arrays(msg.pose)
    v = msg.twist.twist.linear
    return position, quaternion, np.array([v.x, v.y, v.z])


def odometry_to_state(msg: Odometry) -> VehicleState:
    """The vehicle state of a REP 105 Odometry (twist in the body frame, child_frame_id)."""
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


def fill_crazyswarm2_odometry(msg: Odometry, state: VehicleState) -> Odometry:
    """Write `state` into an Odometry as crazyswarm2's server fills its /odom: position and world-frame
    velocity in the firmware log's whole millimetres (int16 mm and mm/s), no body rates; frame ids are the
    caller's (crazyswarm2: frame_id the robot's name, no child_frame_id)."""
    fill_pose(msg.pose.pose, np.round(np.asarray(state.position) * 1e3) / 1e3, state.quaternion)
    v = np.round(np.asarray(state.velocity) * 1e3) / 1e3
    msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.linear.z = (float(x) for x in v)
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
