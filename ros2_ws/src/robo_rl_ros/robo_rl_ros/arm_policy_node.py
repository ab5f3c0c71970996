"""arm_policy_node: a robo-rl arm policy (ArmReach, ArmPickCube) driving an arm through ros2_control.

In (best effort, depth 1, only the latest kept): `/joint_states` (sensor_msgs/JointState, matched by joint
name), and the object's pose on `object_topic` (geometry_msgs/PoseStamped; empty: the fixed
`object_position`). Out (reliable), by `output`:
- "forward_command": std_msgs/Float64MultiArray on /<controller_name>/commands, in `command_joints` order
  (forward_command_controller / position controllers);
- "joint_trajectory": trajectory_msgs/JointTrajectory with one point one control period ahead on
  /<controller_name>/joint_trajectory (joint_trajectory_controller);
and the gripper opening as Float64MultiArray on /<gripper_controller_name>/commands (empty: none).
One timer at the bundle's control rate; with a joint missing, NaN or a state older than `state_timeout`
the node holds the last command (see robo_rl_ros.core.arm).

A policy on camera images also reads one sensor_msgs/Image per camera (best effort, depth 1; rgb8, bgr8,
rgba8 or bgra8 of exactly the policy's size, any row padding), from `image_topics` ("camera=topic" entries;
default /<camera>/image_raw), and holds while an image is missing, of another size, or older than
`image_timeout`. With `publish_observation_images` it republishes, each tick, the images the policy read on
~/observation/<camera> (rgb8, the source image's header): what the policy saw, to view or record.
"""

from __future__ import annotations

import math
import re

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray, Header
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings, ArmTickResult
from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.core.images import image_topics, rgb8_fields, rgb_image
from robo_rl_ros.node_clock import NodeSeconds
from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS
from robo_rl_ros.realtime import configure_realtime
from robo_rl_ros.spin import StartupError, run_node

OUTPUTS = ("forward_command", "joint_trajectory")


class ArmPolicyNode(Node):
    """The arm policy node (parameters in config/arm_policy.yaml)."""

    def __init__(self, node_name: str = "arm_policy_node") -> None:
        super().__init__(node_name)
        self._now = NodeSeconds(self)
        p = {name: self.declare_parameter(name, default).value for name, default in {
            "bundle_path": "", "goal": [0.5, 0.0, 0.2], "object_topic": "", "object_position": [0.5, 0.0, 0.02],
            "joint_states_topic": "/joint_states", "output": "forward_command", "controller_name": "arm_controller",
            "command_joints": Parameter.Type.STRING_ARRAY, "gripper_controller_name": "gripper_controller",
            "state_timeout": 0.1,
            "max_joint_speed": 1.0, "ik_damping": 0.05, "orientation_gain": 1.0, "orientation_weight": 0.0,
            "realtime_priority": 0,
            "image_topics": Parameter.Type.STRING_ARRAY, "image_timeout": 0.2, "publish_observation_images": False,
        }.items()}
        if not p["bundle_path"]:
            raise StartupError(f"{node_name}: parameter bundle_path is required")
        if p["output"] not in OUTPUTS:
            raise StartupError(f"output must be one of {OUTPUTS}, got {p['output']!r}")
        try:
            bundle = load_bundle(p["bundle_path"])
            self.controller = ArmPolicyController(bundle, ArmSettings(
                tuple(p["goal"]), p["state_timeout"], p["max_joint_speed"], p["ik_damping"], p["orientation_gain"],
                orientation_weight=p["orientation_weight"] or None, image_timeout=p["image_timeout"]))
        except (BundleError, ValueError) as error:  # ValueError: a setting ArmSettings refuses
            raise StartupError(f"{node_name}: {error}") from error
        goal_problem = self.controller.goal_problem()
        if goal_problem:
            raise StartupError(f"{node_name}: parameter {goal_problem}")
        try:
            self._image_topics = image_topics(p["image_topics"] or [], list(self.controller.cameras))
        except ValueError as error:
            raise StartupError(f"{node_name}: {error}") from error
        joints = list(self.controller.chain.joints)
        self.command_joints = list(p["command_joints"] or joints)
        if sorted(self.command_joints) != sorted(joints):
            raise StartupError(f"command_joints {self.command_joints} must list the policy's joints {joints}")
        self._order = [joints.index(j) for j in self.command_joints]
        self.output = p["output"]
        if not p["object_topic"]:
            fixed = list(p["object_position"])
            if len(fixed) != 3 or not all(math.isfinite(x) for x in fixed):  # a traceback at the first joint state
                raise StartupError(f"object_position must be 3 finite numbers [m], got {fixed}")
            self.controller.update_object(np.asarray(fixed, dtype=np.float64))
        self._joint_state: tuple[float, JointState] | None = None
        self._consumed: JointState | None = None
        self._object: tuple[float, PoseStamped] | None = None  # (received [node clock s], pose)
        self.create_subscription(JointState, p["joint_states_topic"], self._store_joints, SENSOR_QOS)
        if p["object_topic"]:
            self.create_subscription(PoseStamped, p["object_topic"], self._store_object, SENSOR_QOS)
        self._images: dict[str, tuple[float, Image]] = {}
        self._consumed_images: dict[str, Image] = {}
        self._image_headers: dict[str, Header] = {}  # of the image each camera's policy input came from
        for camera, topic in self._image_topics.items():
            self.create_subscription(Image, topic, lambda msg, camera=camera: self._store_image(camera, msg),
                                     SENSOR_QOS)
        self._observation_pubs = ({camera: self.create_publisher(Image, f"~/observation/{camera}", SENSOR_QOS)
                                   for camera in self._image_topics} if p["publish_observation_images"] else {})
        controller = p["controller_name"]
        if self.output == "forward_command":
            self._command_pub = self.create_publisher(Float64MultiArray, f"/{controller}/commands", COMMAND_QOS)
        else:
            self._command_pub = self.create_publisher(JointTrajectory, f"/{controller}/joint_trajectory", COMMAND_QOS)
        gripper = p["gripper_controller_name"]
        self._gripper_pub = (self.create_publisher(Float64MultiArray, f"/{gripper}/commands", COMMAND_QOS)
                             if gripper else None)
        self._period = 1.0 / bundle.control_hz
        self._timer = self.create_timer(self._period, self._tick)
        self._held_for: str | None = ""  # the kind of reason the last holding warning gave; None while moving
        configure_realtime(self, p["realtime_priority"])
        cameras = "".join(f", camera {name} from {topic}" for name, topic in self._image_topics.items())
        self.get_logger().info(f"driving {bundle.env_id} from {bundle.directory} at {bundle.control_hz:g} Hz "
                               f"({self.controller.task}, goal {self._goal_text(p['goal'])}), {self.output} on /{controller}"
                               f"{cameras}, inference in {self.controller.policy.engine}")

    def _goal_text(self, goal: list[float]) -> str:
        """The goal as the log states it: the reach point, or where pick-cube takes it from."""
        if self.controller.task == "pick_cube":
            return f"{self.controller.lift_height:g} m above the cube's start"
        return str(list(goal))

    def _store_joints(self, msg: JointState) -> None:
        self._joint_state = (self._now(), msg)

    def _store_object(self, msg: PoseStamped) -> None:
        self._object = (self._now(), msg)

    def _store_image(self, camera: str, msg: Image) -> None:
        self._images[camera] = (self._now(), msg)

    def _take_images(self) -> None:
        """Give the controller the cameras' images received since the last tick (a bad one is one warning)."""
        for camera, (received, msg) in self._images.items():
            if self._consumed_images.get(camera) is msg:
                continue
            self._consumed_images[camera] = msg
            try:
                image = rgb_image(msg.height, msg.width, msg.encoding, msg.step, msg.data)
            except ValueError as error:
                self.get_logger().warn(f"ignoring an image from {self._image_topics[camera]}: {error}",
                                       throttle_duration_sec=1.0)
                continue
            problem = self.controller.update_image(camera, received, image)
            if problem:
                self.get_logger().warn(f"ignoring an image from {self._image_topics[camera]}: {problem}",
                                       throttle_duration_sec=1.0)
            else:
                self._image_headers[camera] = msg.header

    def _take_state(self) -> None:
        """Give the controller the joint state and object pose received since the last tick."""
        latest = self._joint_state
        if latest is not None and latest[1] is not self._consumed:
            self._consumed = latest[1]
            msg = latest[1]
            self.controller.update_joint_state(latest[0], list(msg.name), list(msg.position),
                                               list(msg.velocity) if len(msg.velocity) else None)
        if self._object is not None:
            received, pose = self._object
            position = pose.pose.position
            self.controller.update_object(np.array([position.x, position.y, position.z]), received)
        self._take_images()

    def _tick(self) -> None:
        now = self._now()
        self._take_state()
        result = self.controller.tick(now)
        # one warning when the arm starts holding and one each time the reason changes (a state that stops
        # being stale but lacks the finger joints), not one per tick as the ages in milliseconds change
        reason_kind = None if result.moving else re.sub(r"\d+(\.\d+)?", "#", result.reason)
        if reason_kind is not None and reason_kind != self._held_for:
            self.get_logger().warn(f"holding: {result.reason}")
        self._held_for = reason_kind
        self._publish(result)

    def _publish(self, result: ArmTickResult) -> None:
        if result.joint_command is None:
            return  # nothing commanded yet: the controller keeps whatever it holds
        positions = [float(result.joint_command[i]) for i in self._order]
        if self.output == "forward_command":
            self._command_pub.publish(Float64MultiArray(data=positions))
        else:
            nanoseconds = int(self._period * 1e9)
            point = JointTrajectoryPoint(positions=positions, time_from_start=Duration(
                sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000))
            self._command_pub.publish(JointTrajectory(joint_names=self.command_joints, points=[point]))
        if self._gripper_pub is not None and result.gripper_command is not None:
            self._gripper_pub.publish(Float64MultiArray(data=[float(result.gripper_command)]))
        if self._observation_pubs and result.moving and result.images:
            for camera, image in result.images.items():
                msg = Image(header=self._image_headers[camera], **rgb8_fields(image))
                self._observation_pubs[camera].publish(msg)



def main(args: list[str] | None = None) -> int:
    """Entry point of the `arm_policy_node` executable."""
    return run_node(ArmPolicyNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
