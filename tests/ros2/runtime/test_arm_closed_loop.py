"""arm_policy_node picks the cube in arm_sim_bridge_node through ROS 2: joint states (in the bridge's
non-canonical order) and the cube pose from the bridge, joint position commands (forward_command) and the
gripper opening from the node, on the bridge's /clock; the bridge's joint PD stands in for ros2_control's
position interface. Several seeded cube placements, the committed pick bundle."""

import json
import re

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray

from conftest import ROOT
from ros_helpers import NodeProcess, config, spin_until

PICK_BUNDLE = ROOT / "tests" / "ros2" / "data" / "pick_bundle"
TASK = json.loads((PICK_BUNDLE / "policy.json").read_text())["training"]["env_config"]
HOME = TASK["spec"]["home"]
JOINTS = TASK["spec"]["joints"]
EPISODE_S = TASK["episode_seconds"]  # the task's episode: 3 s of simulated time
# deeper than the nodes' depth 1: the test wants every message, even when it spins late
PROBE_QOS = QoSProfile(depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
PROBE_RELIABLE_QOS = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)
# cube placements at y = -0.069, +0.003, +0.092 m; seeds 0-8 are in ros2_ws/README.md (1, 7, 8 marginal)
SEEDS = (0, 4, 5)


class Probe:
    """Everything the loop exchanges, with the simulated time (the latest /clock) it arrived at."""

    def __init__(self, probe):
        self.node, self.now = probe, -1.0
        self.joint_states: list[JointState] = []
        self.commands: list[tuple[float, list[float]]] = []
        self.grippers: list[float] = []
        self.cube: list[np.ndarray] = []
        self.success_at: float | None = None
        self.subs = [
            probe.create_subscription(Clock, "/clock", self._clock, PROBE_RELIABLE_QOS),
            probe.create_subscription(JointState, "/joint_states", self.joint_states.append, PROBE_QOS),
            probe.create_subscription(Float64MultiArray, "/arm_controller/commands",
                                      lambda m: self.commands.append((self.now, list(m.data))), PROBE_RELIABLE_QOS),
            probe.create_subscription(Float64MultiArray, "/gripper_controller/commands",
                                      lambda m: self.grippers.append(m.data[0]), PROBE_RELIABLE_QOS),
            probe.create_subscription(PoseStamped, "/cube/pose", self._cube, PROBE_QOS),
            probe.create_subscription(Bool, "/pick_cube/success", self._success, PROBE_QOS),
        ]

    def state_at(self, t: float) -> JointState:
        """The latest joint state stamped at or before simulated time `t`."""
        return [m for m in self.joint_states if m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 <= t + 1e-9][-1]

    def _clock(self, msg: Clock) -> None:
        self.now = msg.clock.sec + msg.clock.nanosec * 1e-9

    def _cube(self, msg: PoseStamped) -> None:
        self.cube.append(np.array([msg.pose.position.x, msg.pose.position.y, msg.pose.position.z]))

    def _success(self, msg: Bool) -> None:
        if msg.data and self.success_at is None:
            self.success_at = self.now

    def episode_over(self) -> bool:
        """Lifted, or the episode's time (from the first command) has run out."""
        if self.success_at is not None:
            return True
        return bool(self.commands) and self.now > self.commands[0][0] + EPISODE_S + 1.0

    def close(self) -> None:
        for sub in self.subs:
            self.node.destroy_subscription(sub)


def _by_name(msg: JointState, names: list[str]) -> np.ndarray:
    return np.array([msg.position[list(msg.name).index(n)] for n in names])


@pytest.mark.parametrize("seed", SEEDS)
def test_arm_node_picks_the_cube_in_the_sim_bridge(workspace, probe, seed):
    install = workspace["install"]
    bridge_params = yaml.safe_load(config(install, "sim_arm_bridge.yaml").read_text())["arm_sim_bridge_node"]
    order = bridge_params["ros__parameters"]["joint_state_order"]
    node_params = yaml.safe_load(config(install, "sim_arm_policy.yaml").read_text())["arm_policy_node"]
    step = node_params["ros__parameters"]["max_joint_speed"] / 50.0  # per 50 Hz tick
    seen = Probe(probe)
    logs = ""
    bundle = {"bundle_path": str(PICK_BUNDLE)}
    try:
        with NodeProcess(install, "arm_policy_node", [config(install, "sim_arm_policy.yaml")], bundle) as node:
            # without a joint state the node commands nothing: let the probe discover its command publishers
            # before the bridge starts, so that it sees every command (DDS discovery can take seconds under load)
            assert spin_until(probe, lambda: all(probe.count_publishers(topic) > 0 for topic in
                                                 ("/arm_controller/commands", "/gripper_controller/commands")),
                              timeout=60.0), node.output()
            assert not seen.commands, "the node commanded the arm before it had a joint state"
            seen.cube.clear()  # a new subscription was seen to get a few poses of the previous test's lifted cube
            # the bridge waits for the node's and the probe's /joint_states subscriptions: the probe must
            # not miss the episode's start to late DDS discovery (1.4 s seen)
            with NodeProcess(install, "arm_sim_bridge_node", [config(install, "sim_arm_bridge.yaml")],
                             dict(bundle, seed=seed, wait_for_subscribers=2)) as bridge:
                exited = lambda: bridge.process.poll() is not None or node.process.poll() is not None  # noqa: E731
                over = spin_until(probe, lambda: seen.episode_over() or exited(), timeout=120.0) and not exited()
                spin_until(probe, lambda: False, timeout=0.3)  # the messages still in flight
                logs = f"\n{bridge.output()}\n{node.output()}"
                assert over, f"no episode: {len(seen.commands)} commands, sim time {seen.now}{logs}"
    finally:
        seen.close()
    # commands that arrived before the probe had the bridge's /clock carry no simulated time: set aside
    seen.commands = [(t, c) for t, c in seen.commands if t >= 0.0]
    lifted = max(c[2] for c in seen.cube) - min(c[2] for c in seen.cube)  # from resting on the table
    reported = re.search(r"task success: .* ([0-9.]+) s after the first command", logs)
    print(f"\nseed {seed}: cube at {np.round(seen.cube[0], 3).tolist()}, "
          f"{'lifted %.2f s after the first command' % float(reported.group(1)) if reported else 'not lifted'} "
          f"(sim time), max lift {lifted:.3f} m, {len(seen.commands)} arm commands, "
          f"{len(seen.joint_states)} joint states seen")
    # success: the bridge's topic said so, within the task's episode after the node's first command (the
    # bridge measures it; the probe may connect to the node after its first commands)
    assert seen.success_at is not None and reported, f"cube lifted {lifted:.3f} m{logs}"
    assert float(reported.group(1)) <= EPISODE_S and lifted >= TASK["lift_height"] - 1e-3
    # joint states: the bridge's order, not the chain's
    assert all(list(m.name) == order for m in seen.joint_states) and order[:7] != JOINTS
    assert all(len(m.position) == len(m.velocity) == len(order) for m in seen.joint_states)
    # the node matched them by name: its commands (controller order) stay near the joints they name
    commands = np.array([c for _, c in seen.commands])
    assert commands.shape[1] == len(JOINTS) and len(commands) > 20
    tracking = [np.abs(np.array(c) - _by_name(seen.state_at(t), JOINTS)).max() for t, c in seen.commands[1:]]
    # 0.06-0.07 rad when this file runs alone; 0.30 seen once in a full `.ci/run` (the probe's state at a
    # command's arrival lagged); commands matched by index instead of by name are ~5 rad off
    assert max(tracking) < 0.5, max(tracking)
    # rate limited: at most max_joint_speed over one tick between consecutive commands, and moving
    assert np.abs(np.diff(commands, axis=0)).max() <= step + 1e-9
    assert np.abs(commands[-1] - HOME).max() > 0.1
    # at the policy's 50 Hz of simulated time (the probe reads the time of arrival from /clock)
    duration = seen.commands[-1][0] - seen.commands[0][0]
    assert 0.8 * 50 * duration <= len(commands) <= 1.2 * 50 * duration + 2
    # the gripper: openings within the stroke, and it closed on the cube
    assert seen.grippers and all(0.0 <= g <= 0.04 for g in seen.grippers) and min(seen.grippers) < 0.02
