"""A robo-rl policy flying the MuJoCo sim bridge, closed through ROS 2 (no hardware).

ros2 launch robo_rl_ros sim_hover.launch.py bundle:=/path/to/export [backend:=cflib]

`backend`: the crazyswarm2 backend whose cmd_vel_legacy chain the bridge emulates and the node converts for.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """sim_bridge_node (config/sim_bridge.yaml) and quadrotor_policy_node (config/sim_quadrotor_policy.yaml)."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config")
    bundle = {"bundle_path": LaunchConfiguration("bundle"), "crazyswarm2_backend": LaunchConfiguration("backend")}
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="policy bundle folder (policy.json, policy.onnx)"),
        DeclareLaunchArgument("backend", default_value="cpp", description="crazyswarm2 backend: cpp or cflib"),
        Node(package="robo_rl_ros", executable="sim_bridge_node", name="sim_bridge_node", output="screen",
             parameters=[os.path.join(config, "sim_bridge.yaml"), bundle]),
        Node(package="robo_rl_ros", executable="quadrotor_policy_node", name="quadrotor_policy_node",
             output="screen", parameters=[os.path.join(config, "sim_quadrotor_policy.yaml"), bundle]),
    ])
