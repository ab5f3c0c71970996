"""A robo-rl arm policy driving an arm through ros2_control (start the robot's controllers separately).

ros2 launch robo_rl_ros arm_policy.launch.py bundle:=/path/to/export
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """The arm policy node with config/arm_policy.yaml (or `params`) and the bundle folder `bundle`."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config", "arm_policy.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="policy bundle folder (policy.json, policy.onnx)"),
        DeclareLaunchArgument("params", default_value=config, description="parameter file"),
        Node(package="robo_rl_ros", executable="arm_policy_node", name="arm_policy_node", output="screen",
             parameters=[LaunchConfiguration("params"), {"bundle_path": LaunchConfiguration("bundle")}]),
    ])
