"""HIL-SERL on the simulated arm: the arm sim bridge as the robot, robot_actor_node collecting for a
`runner=ray` learner, a scripted person at a (simulated) SpaceMouse.

ros2 launch robo_rl_ros sim_hil.launch.py bundle:=/path/to/export ray_address:=127.0.0.1:6379 inbox:=robot
(start the learner first: README, "A robot as an actor")
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """arm_sim_bridge_node (config/sim_arm_bridge.yaml, a new cube placement per reset), robot_actor_node
    (config/sim_robot_actor.yaml) and scripted_spacenav_node (config/scripted_spacenav.yaml)."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config")
    bundle = {"bundle_path": LaunchConfiguration("bundle")}
    learner = {"ray_address": LaunchConfiguration("ray_address"), "inbox": LaunchConfiguration("inbox")}
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="bundle folder of the learner's task (policy.json, policy.onnx)"),
        DeclareLaunchArgument("ray_address", default_value="auto", description="the learner's Ray cluster"),
        DeclareLaunchArgument("inbox", description="the learner's runner.inbox"),
        Node(package="robo_rl_ros", executable="arm_sim_bridge_node", name="arm_sim_bridge_node", output="screen",
             parameters=[os.path.join(config, "sim_arm_bridge.yaml"), bundle, {"new_placement_on_reset": True}]),
        Node(package="robo_rl_ros", executable="robot_actor_node", name="robot_actor_node", output="screen",
             parameters=[os.path.join(config, "sim_robot_actor.yaml"), bundle, learner]),
        Node(package="robo_rl_ros", executable="scripted_spacenav_node", name="scripted_spacenav_node",
             output="screen", parameters=[os.path.join(config, "scripted_spacenav.yaml"), bundle]),
    ])
