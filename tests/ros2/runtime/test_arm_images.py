"""A policy on camera images picks the cube through ROS 2 (sim_pick_pixels.launch.py's nodes and parameter
files): arm_sim_bridge_node renders the SO-ARM100's wrist and front cameras and publishes them as
sensor_msgs/Image beside the joint states, arm_policy_node reads them, drives the arm by joint position
commands, and republishes the images its policy read. Every one of those equals, pixel for pixel, what the
simulator's own observation shows for the state the bridge published at the same instant."""

import json
import re

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool

from conftest import ROOT
from ros_helpers import NodeProcess, config, spin_until

PIXELS_BUNDLE = ROOT / "tests" / "ros2" / "data" / "pick_pixels_bundle"
MANIFEST = json.loads((PIXELS_BUNDLE / "policy.json").read_text())
TASK = MANIFEST["training"]["env_config"]
CAMERAS = [image["name"] for image in MANIFEST["observation"]["images"]]
PROBE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)


def _stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


@pytest.mark.parametrize("seed", [0, 3])
def test_the_node_picks_from_its_cameras_and_its_image_observation_equals_the_simulators(workspace, probe, seed):
    from sim.arm.joint_position import JointGains, SimulatedArm

    install = workspace["install"]
    bridge_yaml, node_yaml = config(install, "sim_so_arm100_bridge.yaml"), config(install, "sim_so_arm100_pixels_policy.yaml")
    states: dict[int, JointState] = {}
    cubes: dict[int, PoseStamped] = {}
    observed: dict[str, dict[int, Image]] = {camera: {} for camera in CAMERAS}
    succeeded: list[bool] = []
    subs = [probe.create_subscription(JointState, "/joint_states", lambda m: states.setdefault(_stamp(m), m), PROBE_QOS),
            probe.create_subscription(PoseStamped, "/cube/pose", lambda m: cubes.setdefault(_stamp(m), m), PROBE_QOS),
            probe.create_subscription(Bool, "/pick_cube/success", lambda m: m.data and succeeded.append(True), PROBE_QOS)]
    for camera in CAMERAS:
        subs.append(probe.create_subscription(
            Image, f"/arm_policy_node/observation/{camera}",
            lambda m, camera=camera: observed[camera].setdefault(_stamp(m), m), PROBE_QOS))
    episode_ns = int((TASK["episode_seconds"] + 1.0) * 1e9)
    bundle = {"bundle_path": str(PIXELS_BUNDLE)}
    try:
        with NodeProcess(install, "arm_policy_node", [node_yaml], bundle) as node:
            # let the probe discover the node's observation publishers before the episode starts, so that it
            # sees the early frames too (DDS discovery between two processes can take seconds under load)
            topics = [f"/arm_policy_node/observation/{camera}" for camera in CAMERAS]
            assert spin_until(probe, lambda: all(probe.count_publishers(topic) > 0 for topic in topics),
                              timeout=60.0), node.output()
            # the bridge waits for the node's and the probe's /joint_states subscriptions
            with NodeProcess(install, "arm_sim_bridge_node", [bridge_yaml],
                             dict(bundle, seed=seed, wait_for_subscribers=2)) as bridge:
                exited = lambda: bridge.process.poll() is not None or node.process.poll() is not None  # noqa: E731
                over = lambda: succeeded or (states and max(states) > episode_ns)  # noqa: E731
                spin_until(probe, lambda: over() or exited(), timeout=120.0)
                spin_until(probe, lambda: False, timeout=0.3)  # the messages still in flight
                logs = f"\n{bridge.output()}\n{node.output()}"
                assert not exited(), logs
    finally:
        for sub in subs:
            probe.destroy_subscription(sub)
    assert "camera wrist on /wrist/image_raw" in logs and "camera front from /front/image_raw" in logs
    reported = re.search(r"task success: .* ([0-9.]+) s after the first command", logs)
    assert succeeded and reported and float(reported.group(1)) <= TASK["episode_seconds"], logs

    # the simulator, set to each published state, renders its observation as the training env did
    kp, kd = (tuple(_parameter(bridge_yaml, name)) for name in ("kp", "kd"))
    scene = dict(TASK, randomization={"enabled": False})
    scene["cameras"] = {**TASK["cameras"], "randomization": {"enabled": False}}
    sim = SimulatedArm(scene, JointGains(kp, kd), seed=seed)
    stamps = sorted(set(states) & set(cubes) & set.intersection(*(set(frames) for frames in observed.values())))
    poses = []
    try:
        for stamp in stamps:
            state, cube = states[stamp], cubes[stamp].pose
            positions = [state.position[list(state.name).index(name)] for name in sim.names]
            poses.append(positions)
            sim.set_pose(positions, [cube.position.x, cube.position.y, cube.position.z],
                         [cube.orientation.w, cube.orientation.x, cube.orientation.y, cube.orientation.z])
            expected = sim.images()
            for camera in CAMERAS:
                msg = observed[camera][stamp]
                assert (msg.encoding, msg.height, msg.width, msg.step) == ("rgb8", 64, 64, 64 * 3)
                assert msg.header.frame_id == camera  # the bridge's header, passed through
                # rgb8 as sensor_msgs defines it: rows of red, green, blue bytes, top row first
                seen = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(64, 64, 3)
                np.testing.assert_array_equal(seen, expected[camera], err_msg=f"{camera} at {stamp * 1e-9:.3f} s")
    finally:
        sim.close()
    print(f"\nseed {seed}: lifted {float(reported.group(1)):.2f} s after the first command; "
          f"{len(stamps)} observation frames per camera equal the simulator's")
    # most of the episode's ticks were seen (best effort may drop a few), over a moving arm
    assert len(stamps) >= 0.5 * float(reported.group(1)) * MANIFEST["control_hz"]
    assert np.abs(np.diff(np.array(poses), axis=0)).max() > 1e-3


def _parameter(path, name: str) -> list[float]:
    import yaml

    return yaml.safe_load(path.read_text())["arm_sim_bridge_node"]["ros__parameters"][name]
