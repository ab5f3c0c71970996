"""A policy on camera images through ROS 2: arm_sim_bridge_node renders the bundle's cameras and publishes them
as sensor_msgs/Image, arm_policy_node reads them (and the joint states) and drives the arm, and republishes the
images its policy read. Each of those equals, pixel for pixel, what the simulator's own observation shows for
the state the bridge published at the same instant."""

import json

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, JointState

from conftest import ROOT
from ros_helpers import NodeProcess, spin_until

PIXELS_BUNDLE = ROOT / "tests" / "ros2" / "data" / "pick_pixels_bundle"
MANIFEST = json.loads((PIXELS_BUNDLE / "policy.json").read_text())
CAMERAS = [image["name"] for image in MANIFEST["observation"]["images"]]
PROBE_QOS = QoSProfile(depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
# the SO-ARM100's joints under the bridge's joint PD [N m/rad], [N m s/rad]: enough to hold and follow it
KP, KD = [20.0] * 5, [0.5] * 5
FRAMES = 10  # observation frames compared per camera


def _stamp(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_the_nodes_image_observation_equals_the_simulators_for_the_same_state(workspace, probe):
    from sim.arm.joint_position import JointGains, SimulatedArm

    install = workspace["install"]
    states: dict[int, JointState] = {}
    cubes: dict[int, PoseStamped] = {}
    observed: dict[str, dict[int, Image]] = {camera: {} for camera in CAMERAS}
    subs = [probe.create_subscription(JointState, "/joint_states", lambda m: states.setdefault(_stamp(m), m), PROBE_QOS),
            probe.create_subscription(PoseStamped, "/cube/pose", lambda m: cubes.setdefault(_stamp(m), m), PROBE_QOS)]
    for camera in CAMERAS:
        subs.append(probe.create_subscription(
            Image, f"/arm_policy_node/observation/{camera}",
            lambda m, camera=camera: observed[camera].setdefault(_stamp(m), m), PROBE_QOS))

    def matched() -> list[int]:
        """Stamps at which the node's observation of every camera and the bridge's state are all there."""
        common = set(states) & set(cubes)
        for frames in observed.values():
            common &= set(frames)
        return sorted(common)

    bundle = {"bundle_path": str(PIXELS_BUNDLE)}
    try:
        with NodeProcess(install, "arm_policy_node", [], dict(bundle, use_sim_time=True,
                                                              publish_observation_images=True)) as node:
            with NodeProcess(install, "arm_sim_bridge_node", [], dict(bundle, seed=3, wait_for_subscribers=2,
                                                                      kp=KP, kd=KD)) as bridge:
                exited = lambda: bridge.process.poll() is not None or node.process.poll() is not None  # noqa: E731
                enough = spin_until(probe, lambda: len(matched()) >= FRAMES or exited(), timeout=120.0)
                logs = f"\n{bridge.output()}\n{node.output()}"
                assert enough and not exited(), f"{len(matched())} matched frames{logs}"
    finally:
        for sub in subs:
            probe.destroy_subscription(sub)
    assert "camera wrist on /wrist/image_raw" in logs and "camera front from /front/image_raw" in logs

    # the simulator, set to each published state, renders its observation as the training env did
    config = dict(MANIFEST["training"]["env_config"], randomization={"enabled": False})
    config["cameras"] = {**config["cameras"], "randomization": {"enabled": False}}
    sim = SimulatedArm(config, JointGains(tuple(KP), tuple(KD)), seed=3)
    try:
        stamps = matched()
        poses = []
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
                assert expected[camera].std() > 0
                np.testing.assert_array_equal(seen, expected[camera], err_msg=f"{camera} at {stamp * 1e-9:.3f} s")
    finally:
        sim.close()
    # the policy drove the arm meanwhile: the frames are of different states
    assert np.abs(np.diff(np.array(poses), axis=0)).max() > 1e-4
