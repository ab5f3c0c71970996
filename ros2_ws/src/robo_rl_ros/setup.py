"""ament_python package robo_rl_ros: executables land in lib/robo_rl_ros, where `ros2 run` finds them."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "robo_rl_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools", "numpy", "onnx", "onnxruntime"],
    zip_safe=True,
    maintainer="robo-rl maintainers",
    maintainer_email="robo-rl@example.com",
    description="robo-rl policy bundles as ROS 2 nodes (Crazyflie via crazyswarm2) and a MuJoCo sim bridge",
    license="Apache-2.0",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            f"quadrotor_policy_node = {PACKAGE}.quadrotor_policy_node:main",
            f"sim_bridge_node = {PACKAGE}.sim_bridge_node:main",
            f"mcap_recorder_node = {PACKAGE}.mcap_recorder_node:main",
            f"arm_policy_node = {PACKAGE}.arm_policy_node:main",
            f"arm_sim_bridge_node = {PACKAGE}.arm_sim_bridge_node:main",
            f"robot_actor_node = {PACKAGE}.robot_actor_node:main",
            f"scripted_spacenav_node = {PACKAGE}.scripted_spacenav_node:main",
        ],
    },
)
