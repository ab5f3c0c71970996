"""arm_sim_bridge_node: the robo-rl pick-cube scene (sim.arm, the Panda-class MJCF) as a ROS 2 robot under
ros2_control, so arm_policy_node picks with no hardware.

Built from a bundle's `training.env_config` (randomization off unless `randomization` is true; the cube
placed as the task places it for `seed`), it runs in real time, one physics step (the MJCF's timestep)
per timer period, and talks as ros2_control's controllers would:
- out (best effort, depth 1): `joint_states_topic` (sensor_msgs/JointState of the arm joints and both
  fingers, MJCF names, in `joint_state_order`: a fixed order that is deliberately not the chain's, as the
  joint_state_broadcaster's is not guaranteed), `object_pose_topic` (geometry_msgs/PoseStamped of the
  cube, world frame), `success_topic` (std_msgs/Bool: the cube is `lift_height` above its start), all at
  `state_rate_hz`; then `/clock` (the simulation time);
- for a bundle trained on camera images: each camera's image (sensor_msgs/Image, rgb8, frame_id the camera's
  name) on `image_topics` ("camera=topic" entries; default /<camera>/image_raw) at `camera_rate_hz` (0: the
  bundle's control rate), rendered exactly as the training env rendered its observations;
- in (reliable): `/<controller_name>/commands` (std_msgs/Float64MultiArray, joint positions in
  `controller_joints` order, as forward_command_controller) and `/<gripper_controller_name>/commands`
  (one value: the opening per finger [m]).
Commands are held until replaced (as the position command interface holds them); a command of the wrong
length or with NaN is ignored with a warning. The arm tracks them with a joint PD controller with
gravity compensation on its torque actuators (sim.arm.joint_position). `~/reset` (std_srvs/Trigger)
restarts the seeded episode (with `new_placement_on_reset`, the next seed's: the cube somewhere else, as a
person resetting a real scene would put it); the simulated time and stamps go on from where they were, as a
clock does. With `wait_for_subscribers` > 0 the simulation starts paused, publishing
nothing, and runs from time 0 once `joint_states_topic` has that many subscribers (the policy node and,
say, a recorder that must see the episode from its start).

Needs the robo-rl simulator (MuJoCo): it is the simulated robot, not robot-computer code.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger

from robo_rl_ros.core.images import image_topics, rgb8_fields
from robo_rl_ros.messages import fill_pose, time_msg
from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS
from robo_rl_ros.sim_common import SimulatedRobotNode
from robo_rl_ros.spin import StartupError, run_node

try:
    from sim.arm.joint_position import JointGains, SimulatedArm
except ImportError as missing:  # reported as one startup error below
    SIMULATOR_MISSING: ImportError | None = missing
else:
    SIMULATOR_MISSING = None


class ArmSimBridgeNode(SimulatedRobotNode):
    """The simulated arm (parameters in config/sim_arm_bridge.yaml)."""

    def __init__(self) -> None:
        super().__init__("arm_sim_bridge_node", {
            "joint_states_topic": "/joint_states", "joint_state_order": Parameter.Type.STRING_ARRAY,
            "object_pose_topic": "/cube/pose", "success_topic": "/pick_cube/success",
            "controller_name": "arm_controller", "controller_joints": Parameter.Type.STRING_ARRAY,
            "gripper_controller_name": "gripper_controller", "state_rate_hz": 100.0,
            "new_placement_on_reset": False, "kp": Parameter.Type.DOUBLE_ARRAY, "kd": Parameter.Type.DOUBLE_ARRAY, "wait_for_subscribers": 0,
            "image_topics": Parameter.Type.STRING_ARRAY, "camera_rate_hz": 0.0,
        }, SIMULATOR_MISSING)
        p, bundle = self.params, self.bundle
        if p["kp"] is None or p["kd"] is None:
            raise StartupError("arm_sim_bridge_node: parameters kp and kd (one per arm joint) are required")
        try:
            self.sim = SimulatedArm(self.env_config, JointGains(tuple(p["kp"]), tuple(p["kd"])), p["seed"])
        except ValueError as error:  # also sim.errors.ConfigError
            raise StartupError(f"arm_sim_bridge_node: {error}") from error
        names = list(self.sim.names)
        self.state_order = list(p["joint_state_order"] or names)
        self.controller_joints = list(p["controller_joints"] or self.sim.joints)
        if sorted(self.state_order) != sorted(names):
            raise StartupError(f"joint_state_order {self.state_order} must list the joints {names}")
        if sorted(self.controller_joints) != sorted(self.sim.joints):
            raise StartupError(f"controller_joints {self.controller_joints} must list the arm joints {list(self.sim.joints)}")
        self._state_index = [names.index(n) for n in self.state_order]
        self._command_index = [self.sim.joints.index(n) for n in self.controller_joints]
        self.substeps = self._substeps("state_rate_hz", p["state_rate_hz"])
        try:
            self._image_topics = image_topics(p["image_topics"] or [], list(self.sim.cameras))
        except ValueError as error:
            raise StartupError(f"arm_sim_bridge_node: {error}") from error
        self.camera_substeps = self._substeps("camera_rate_hz", p["camera_rate_hz"] or bundle.control_hz)
        self._first_command: float | None = None
        self._time_before_reset = 0.0  # simulated seconds of the episodes before the last reset
        self._paused = p["wait_for_subscribers"] > 0
        self._joint_pub = self.create_publisher(JointState, p["joint_states_topic"], SENSOR_QOS)
        self._cube_pub = self.create_publisher(PoseStamped, p["object_pose_topic"], SENSOR_QOS)
        self._success_pub = self.create_publisher(Bool, p["success_topic"], SENSOR_QOS)
        self._image_pubs = {camera: self.create_publisher(Image, topic, SENSOR_QOS)
                            for camera, topic in self._image_topics.items()}
        self.create_subscription(Float64MultiArray, f"/{p['controller_name']}/commands", self._on_arm, COMMAND_QOS)
        self.create_subscription(Float64MultiArray, f"/{p['gripper_controller_name']}/commands", self._on_gripper,
                                 COMMAND_QOS)
        self.start(self.sim.dt)
        cube = self.sim.state().cube_position
        cameras = "".join(f", camera {name} on {topic}" for name, topic in self._image_topics.items())
        cameras += f" at {1.0 / (self.camera_substeps * self.sim.dt):g} Hz" if cameras else ""
        self.get_logger().info(f"simulating {bundle.env_id} (seed {p['seed']}, cube at {np.round(cube, 3).tolist()}), "
                               f"physics at {1.0 / self.sim.dt:g} Hz, state at {p['state_rate_hz']:g} Hz{cameras}, "
                               f"joint PD kp {list(p['kp'])} kd {list(p['kd'])}")

    def _substeps(self, name: str, rate_hz: float) -> int:
        """Physics steps per period of a rate that must divide the physics rate; StartupError otherwise."""
        substeps = int(round(1.0 / (rate_hz * self.sim.dt))) if rate_hz > 0 else 0
        if substeps < 1 or abs(substeps * rate_hz * self.sim.dt - 1.0) > 1e-6:
            raise StartupError(f"{name} {rate_hz} must divide the physics rate {1.0 / self.sim.dt:g} Hz")
        return substeps

    def _on_arm(self, msg: Float64MultiArray) -> None:
        values = np.asarray(msg.data, dtype=np.float64)
        if values.shape != (len(self.controller_joints),) or not np.all(np.isfinite(values)):
            self.get_logger().warn(f"ignoring arm command {values.tolist()}", throttle_duration_sec=1.0)
            return
        command = np.empty(len(values))
        command[self._command_index] = values
        self.sim.command_arm(command)
        if self._first_command is None:
            self._first_command = self.sim.time
            self.get_logger().info(f"first arm command at t={self.sim.time:.3f} s")

    def _on_gripper(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != 1 or not np.isfinite(msg.data[0]):
            self.get_logger().warn(f"ignoring gripper command {list(msg.data)}", throttle_duration_sec=1.0)
            return
        self.sim.command_gripper(msg.data[0])

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._time_before_reset += self.sim.time
        if self.params["new_placement_on_reset"]:
            self.sim.seed += 1
        self.sim.reset()
        self._first_command = None
        response.success, response.message = True, f"reset to seed {self.sim.seed}"
        return response

    def _step(self) -> None:
        """One physics step with the held commands, and the state every 1 / state_rate_hz."""
        if self._paused:
            if self._joint_pub.get_subscription_count() < self.params["wait_for_subscribers"]:
                return
            self._paused = False
            self.get_logger().info(f"{self.params['wait_for_subscribers']} subscribers on "
                                   f"{self.params['joint_states_topic']}: simulation starts")
        succeeded = self.sim.succeeded_at is not None
        self.sim.step()
        if not succeeded and self.sim.succeeded_at is not None:
            since = "" if self._first_command is None else f", {self.sim.succeeded_at - self._first_command:.2f} s after the first command"
            self.get_logger().info(f"task success: cube lifted {self.sim.config.lift_height:g} m at "
                                   f"t={self.sim.succeeded_at:.3f} s{since}")
        if self._image_pubs and self.sim.steps % self.camera_substeps == 0:
            self._publish_images()  # before the state: a tick woken by the state finds the image of that instant
        if self.sim.steps % self.substeps == 0:
            self._publish_state()

    def _publish_images(self) -> None:
        stamp = time_msg(self._time_before_reset + self.sim.time)
        for camera, image in self.sim.images().items():
            msg = Image(**rgb8_fields(image))
            msg.header.stamp, msg.header.frame_id = stamp, camera
            self._image_pubs[camera].publish(msg)

    def _publish_state(self) -> None:
        state = self.sim.state()
        now = self._time_before_reset + state.time
        stamp = time_msg(now)
        joints = JointState(name=list(self.state_order),
                            position=[float(state.positions[i]) for i in self._state_index],
                            velocity=[float(state.velocities[i]) for i in self._state_index],
                            effort=[float(state.efforts[i]) for i in self._state_index])
        joints.header.stamp = stamp
        self._joint_pub.publish(joints)
        cube = PoseStamped()
        cube.header.stamp, cube.header.frame_id = stamp, self.params["frame_id"]
        fill_pose(cube.pose, state.cube_position, state.cube_quaternion)
        self._cube_pub.publish(cube)
        self._success_pub.publish(Bool(data=bool(state.success)))
        self.clock.publish(now)  # after the state: nodes on /clock wake up with it already there


def main(args: list[str] | None = None) -> int:
    """Entry point of the `arm_sim_bridge_node` executable."""
    return run_node(ArmSimBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
