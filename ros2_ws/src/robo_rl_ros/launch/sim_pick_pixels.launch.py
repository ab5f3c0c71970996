"""A robo-rl pick-cube policy on camera images picking in the MuJoCo arm sim bridge (SO-ARM100 with its wrist and
front cameras), closed through ROS 2 (no hardware): the bridge renders the cameras as training did.

ros2 launch robo_rl_ros sim_pick_pixels.launch.py bundle:=/path/to/export [seed:=3]
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description() -> LaunchDescription:
    """arm_sim_bridge_node (config/sim_so_arm100_bridge.yaml) and arm_policy_node
    (config/sim_so_arm100_pixels_policy.yaml)."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config")
    bundle = {"bundle_path": LaunchConfiguration("bundle")}
    seed = {"seed": ParameterValue(LaunchConfiguration("seed"), value_type=int)}
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="pick-cube policy bundle on camera images (policy.json, policy.onnx, recorded_images.npz)"),
        DeclareLaunchArgument("seed", default_value="0", description="cube placement seed"),
        Node(package="robo_rl_ros", executable="arm_sim_bridge_node", name="arm_sim_bridge_node", output="screen",
             parameters=[os.path.join(config, "sim_so_arm100_bridge.yaml"), bundle, seed]),
        Node(package="robo_rl_ros", executable="arm_policy_node", name="arm_policy_node", output="screen",
             parameters=[os.path.join(config, "sim_so_arm100_pixels_policy.yaml"), bundle]),
    ])
