"""A robo-rl policy flying a real Crazyflie through crazyswarm2 (start crazyswarm2's server separately).

ros2 launch robo_rl_ros crazyflie_policy.launch.py bundle:=/path/to/export [params:=my.yaml] [backend:=cflib]

`backend` must be what crazyswarm2's own launch file was given (its default is cpp): the two backends
disagree on the sign of cmd_vel_legacy's pitch.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """The policy node with config/quadrotor_policy.yaml (or `params`) and the bundle folder `bundle`."""
    config = os.path.join(get_package_share_directory("robo_rl_ros"), "config", "quadrotor_policy.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="policy bundle folder (policy.json, policy.onnx)"),
        DeclareLaunchArgument("params", default_value=config, description="parameter file"),
        DeclareLaunchArgument("backend", default_value="cpp",
                              description="crazyswarm2's backend (cpp or cflib), as given to its launch file"),
        Node(package="robo_rl_ros", executable="quadrotor_policy_node", name="quadrotor_policy_node",
             output="screen",
             parameters=[LaunchConfiguration("params"), {"bundle_path": LaunchConfiguration("bundle"),
                                                         "crazyswarm2_backend": LaunchConfiguration("backend")}]),
    ])
