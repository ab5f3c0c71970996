"""A real arm as an actor of a `runner=ray` learner (start the robot's controllers, its success detector, the
cube tracker and spacenav_node separately).

ros2 launch robo_rl_ros robot_actor.launch.py bundle:=/path/to/export ray_address:=learner-host:6379 inbox:=robot
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """robot_actor_node with config/robot_actor.yaml (or `params`)."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config", "robot_actor.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="bundle folder of the learner's task (policy.json, policy.onnx)"),
        DeclareLaunchArgument("ray_address", default_value="auto", description="the learner's Ray cluster"),
        DeclareLaunchArgument("inbox", description="the learner's runner.inbox"),
        DeclareLaunchArgument("params", default_value=config, description="parameter file"),
        Node(package="robo_rl_ros", executable="robot_actor_node", name="robot_actor_node", output="screen",
             parameters=[LaunchConfiguration("params"), {"bundle_path": LaunchConfiguration("bundle"),
                         "ray_address": LaunchConfiguration("ray_address"), "inbox": LaunchConfiguration("inbox")}]),
    ])
