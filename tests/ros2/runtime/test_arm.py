"""arm_policy_node against the test playing ros2_control: an ideal position-controlled arm that
publishes /joint_states (names shuffled) and follows /arm_controller/commands."""

import math
import time

import numpy as np
import pytest
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from conftest import ROOT
from ros_helpers import NodeProcess, config, spin_until

from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS

ARM_BUNDLE = ROOT / "tests" / "ros2" / "data" / "arm_reach_bundle"
JOINTS = [f"joint{i}" for i in range(1, 8)]
HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
SPEED, RATE = 0.5, 50.0
STEP = SPEED / RATE
# A command already published when the state goes bad may arrive tens of ms later on a loaded host: the
# hold is judged on the commands received after one tick and a half plus this margin.
DELIVERY_SLACK = 0.1  # [s]
HOLD_AFTER = 1.5 / RATE + DELIVERY_SLACK


class IdealArm:
    """Joint positions that jump to each command; publishes them every `period` while `alive`."""

    def __init__(self, probe, output: str):
        self.probe, self.q = probe, dict(zip(JOINTS, HOME))
        self.pub = probe.create_publisher(JointState, "/joint_states", SENSOR_QOS)
        self.commands: list[tuple[float, list[float]]] = []
        self.grippers: list[float] = []
        if output == "forward_command":
            reordered = list(reversed(JOINTS))  # the node's command_joints in this test
            self.subs = [probe.create_subscription(Float64MultiArray, "/arm_controller/commands",
                                                   lambda m: self._command(reordered, list(m.data)), COMMAND_QOS)]
        else:
            self.subs = [probe.create_subscription(JointTrajectory, "/arm_controller/joint_trajectory",
                                                   self._trajectory, COMMAND_QOS)]
        self.subs.append(probe.create_subscription(Float64MultiArray, "/gripper_controller/commands",
                                                   lambda m: self.grippers.append(m.data[0]), COMMAND_QOS))
        self.rng = np.random.default_rng(0)
        self.last = 0.0

    def _trajectory(self, msg: JointTrajectory) -> None:
        assert len(msg.points) == 1
        duration = msg.points[0].time_from_start
        assert math.isclose(duration.sec + duration.nanosec * 1e-9, 1.0 / RATE, rel_tol=1e-6)
        self._command(list(msg.joint_names), list(msg.points[0].positions))

    def _command(self, names, positions) -> None:
        self.commands.append((time.monotonic(), dict(zip(names, positions))))
        self.q.update(zip(names, positions))

    def publish(self, drop: str | None = None, nan: bool = False, replace: dict | None = None) -> None:
        names = [n for n in [*JOINTS, "finger_left", "finger_right"] if n != drop]
        names = [names[i] for i in self.rng.permutation(len(names))]
        values = {**self.q, "finger_left": 0.04, "finger_right": 0.04, **(replace or {})}
        positions = [math.nan if nan and n == "joint2" else values[n] for n in names]
        self.pub.publish(JointState(name=names, position=positions, velocity=[0.0] * len(names)))
        self.last = time.monotonic()

    def run(self, seconds: float, **kwargs) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if time.monotonic() - self.last >= 1.0 / RATE:
                self.publish(**kwargs)
            rclpy.spin_once(self.probe, timeout_sec=0.002)

    def since(self, t: float) -> list[dict]:
        return [c for ts, c in self.commands if ts > t]

    def close(self) -> None:
        for sub in self.subs:
            self.probe.destroy_subscription(sub)
        self.probe.destroy_publisher(self.pub)


@pytest.mark.parametrize("output", ["forward_command", "joint_trajectory"])
def test_arm_node_rate_limits_holds_and_resumes(workspace, probe, output):
    install = workspace["install"]
    arm = IdealArm(probe, output)
    params = {"bundle_path": str(ARM_BUNDLE), "output": output, "max_joint_speed": SPEED,
              "command_joints": list(reversed(JOINTS))}  # the controller's order need not be the policy's
    try:
        with NodeProcess(install, "arm_policy_node", [config(install, "arm_policy.yaml")], params) as node:
            # no joint states before the probe knows the node's command publisher: the node commands on the
            # first state, and a late DDS match would hide its first commands from the probe
            topic = "/arm_controller/commands" if output == "forward_command" else "/arm_controller/joint_trajectory"
            assert spin_until(probe, lambda: probe.count_publishers(topic) > 0, timeout=30.0), node.output()
            spin_until(probe, lambda: False, timeout=0.5)
            deadline = time.monotonic() + 30.0
            while len(arm.commands) < 25 and time.monotonic() < deadline:
                arm.run(0.05)
            assert len(arm.commands) >= 25, node.output()
            moving = [np.array([c[j] for j in JOINTS]) for c in arm.since(0.0)]
            # between consecutive commands (a reliable subscription misses none once matched)
            steps = np.abs(np.diff(np.array(moving), axis=0)).max(axis=1)
            assert steps.max() <= STEP + 1e-9 and steps.max() > 0  # rate limited, and moving
            assert arm.grippers and all(0.0 <= g <= 0.04 for g in arm.grippers)

            # joint3 missing from /joint_states: the next tick holds the last command
            dropped_at = time.monotonic()
            arm.run(0.3, drop="joint3")
            held = arm.since(dropped_at + HOLD_AFTER)
            assert held and all(c == held[0] for c in held), "moved without joint3"
            assert "holding: joint state lacks ['joint3']" in node.output()
            # good state: moves again
            back_at = time.monotonic()
            arm.run(0.3)
            assert len({tuple(c.values()) for c in arm.since(back_at)}) > 1

            # NaN, then silence (stale): hold
            nan_at = time.monotonic()
            arm.run(0.3, nan=True)
            held = arm.since(nan_at + HOLD_AFTER)
            assert held and all(c == held[0] for c in held)
            arm.publish()
            stale_at = time.monotonic()
            end = stale_at + 0.4
            while time.monotonic() < end:
                rclpy.spin_once(probe, timeout_sec=0.01)
            held = arm.since(stale_at + 0.1 + HOLD_AFTER)
            assert held and all(c == held[0] for c in held) and "old" in node.output()

            # still holding, for another reason: each new reason is logged once (a stale state that came back
            # without the finger joints kept the arm still without a word)
            arm.run(0.3, drop="finger_left")
            assert node.output().count("holding: joint state lacks ['finger_left']") == 1, node.output()
            # a joint far outside its range (joint4 in degrees): holds, naming the joint; it used to be commanded
            # from where the state put it
            degrees_at = time.monotonic()
            arm.run(0.3, replace={"joint4": math.degrees(HOME[3])})
            held = arm.since(degrees_at + HOLD_AFTER)
            assert all(c == held[0] for c in held) and held and all(abs(c["joint4"]) < 3.1 for c in held)
            assert "holding: joint state puts joint4 at -135 rad, outside its range" in node.output(), node.output()
    finally:
        arm.close()
