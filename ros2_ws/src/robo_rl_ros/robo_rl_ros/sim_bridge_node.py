"""sim_bridge_node: a robo-rl MuJoCo Crazyflie as a ROS 2 robot, so a policy node flies with no hardware.

Built from a bundle's `training.env_config` (randomization off unless `randomization` is true), it runs
in real time and talks like crazyswarm2 does for a real Crazyflie at the bundle's control rate:
publishes `pose_topic` (geometry_msgs/PoseStamped), `odom_topic` (nav_msgs/Odometry as `odom_convention`
says: 'rep105', twist in the body frame `child_frame_id`, or 'crazyswarm2', as its server's /odom: frame_id
`child_frame_id`, world-frame velocity in whole mm/s, no body rates; see robo_rl_ros.messages) and `/clock` (rosgraph_msgs/Clock, the simulation time); accepts `cmd_vel_legacy_topic`
(geometry_msgs/Twist), taken through crazyswarm2's server and library for `crazyswarm2_backend` ('cpp' or
'cflib') and the firmware's RPYT commander as their sources say (robo_rl_ros.crazyswarm2_chain: signs,
the 60000 clamp, MIN_THRUST, the thrust lock until a zero arrives, cflib's first zero setpoint) and flown
by the simulated onboard attitude controller (sim.quadrotor.onboard_pid, the firmware's controller_pid);
and `motor_thrusts_topic` (std_msgs/Float32MultiArray, four
normalized thrusts, for policies that run on board). As on the vehicle, the onboard loop runs on its
own clock (`onboard_rate_hz`, one 2 ms physics step per cycle) and a command takes effect at the first
cycle after it arrives, whatever the phase of the sender's timer. Without a command for
`command_timeout` seconds the motors stop, as the firmware's commander watchdog stops them. A Twist the
chain cannot carry (NaN; a thrust the C++ server's uint16 conversion leaves undefined) is ignored with a
warning and the motors stop. With
`hold_until_first_command` the vehicle is held at its initial state (time passes, the state is
published) until the first command with thrust arrives, so a policy node that starts later finds it
where it should be. `~/reset` (std_srvs/Trigger) restarts from the initial state.

Needs the robo-rl simulator (torch, MuJoCo): it is the simulated robot, not robot-computer code.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.parameter import Parameter
from std_msgs.msg import Float32MultiArray
from std_srvs.srv import Trigger

from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.crazyswarm2_chain import BACKENDS, DEFAULT_BACKEND, Crazyswarm2Chain
from robo_rl_ros.messages import ODOM_CONVENTIONS, fill_crazyswarm2_odometry, fill_odometry, fill_pose, time_msg
from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS
from robo_rl_ros.sim_common import SimulatedRobotNode
from robo_rl_ros.spin import StartupError, run_node

try:
    from sim.quadrotor.config import make_config
    from sim.quadrotor.core import QuadrotorBatch
    from sim.quadrotor.onboard_pid import OnboardAttitudeController, inertia_torque_scale
except ImportError as missing:  # reported as one startup error below
    SIMULATOR_MISSING: ImportError | None = missing
else:
    SIMULATOR_MISSING = None


class SimBridgeNode(SimulatedRobotNode):
    """The simulated Crazyflie (parameters in config/sim_bridge.yaml)."""

    def __init__(self) -> None:
        super().__init__("sim_bridge_node", {
            "initial_position": Parameter.Type.DOUBLE_ARRAY, "child_frame_id": "cf231",
            "pose_topic": "/cf231/pose", "odom_topic": "/cf231/odom",
            "cmd_vel_legacy_topic": "/cf231/cmd_vel_legacy", "motor_thrusts_topic": "/cf231/motor_thrusts",
            "command_timeout": 0.5, "onboard_rate_hz": 500.0, "scale_gains_to_inertia": True,
            "hold_until_first_command": True, "crazyswarm2_backend": DEFAULT_BACKEND, "odom_convention": "rep105",
        }, SIMULATOR_MISSING)
        p, bundle, env_config = self.params, self.bundle, self.env_config
        if not bundle.is_quadrotor:  # the simulator's ConfigError was a traceback
            raise StartupError(f"sim_bridge_node simulates quadrotors; {bundle.directory} is an {bundle.robot}'s policy "
                               f"({bundle.env_id}): arm_sim_bridge_node simulates it")
        if p["crazyswarm2_backend"] not in BACKENDS:
            raise StartupError(f"crazyswarm2_backend must be one of {BACKENDS}, got {p['crazyswarm2_backend']!r}")
        if p["odom_convention"] not in ODOM_CONVENTIONS:
            raise StartupError(f"odom_convention must be one of {ODOM_CONVENTIONS}, got {p['odom_convention']!r}")
        # the physics runs one 2 ms step per batch step, so the onboard controller runs at 500 Hz
        env_config["control_hz"] = p["onboard_rate_hz"]
        config = make_config(env_config.get("task", "hover"), env_config)
        self.sim = QuadrotorBatch(config, 1, "mujoco", seed=p["seed"])
        self.substeps = int(round(p["onboard_rate_hz"] / bundle.control_hz))
        if abs(self.substeps * bundle.control_hz - p["onboard_rate_hz"]) > 1e-6:
            raise StartupError(f"onboard_rate_hz {p['onboard_rate_hz']} must be a multiple of the control rate "
                               f"{bundle.control_hz}")
        scale = inertia_torque_scale(self.sim.params.inertia) if p["scale_gains_to_inertia"] else (1.0, 1.0, 1.0)
        self.onboard = OnboardAttitudeController(p["onboard_rate_hz"], scale)
        self.initial_position = (np.asarray(p["initial_position"], dtype=np.float64) if p["initial_position"]
                                 is not None else np.asarray(config.center, dtype=np.float64))
        self.dt = 1.0 / p["onboard_rate_hz"]
        self._reset()
        self._pose_pub = self.create_publisher(PoseStamped, p["pose_topic"], SENSOR_QOS)
        self._odom_pub = self.create_publisher(Odometry, p["odom_topic"], SENSOR_QOS)
        self.create_subscription(Twist, p["cmd_vel_legacy_topic"], self._on_legacy, COMMAND_QOS)
        self.create_subscription(Float32MultiArray, p["motor_thrusts_topic"], self._on_motors, COMMAND_QOS)
        self.start(self.dt)
        self.get_logger().info(f"simulating {config.vehicle} ({config.task}) at {bundle.control_hz:g} Hz, "
                               f"onboard controller at {p['onboard_rate_hz']:g} Hz, "
                               f"from {self.initial_position.tolist()}")

    def _reset(self) -> None:
        self.sim.reset(options={"initial_state": {"position": self.initial_position}})
        self.onboard.reset()
        self.onboard.set_setpoint(0.0, 0.0, 0.0, 0.0)
        self.steps = 0  # onboard cycles (physics steps) since the reset
        # a reset is a fresh vehicle (its thrust locked until a zero) behind a freshly started server
        self.chain = Crazyswarm2Chain(self.params["crazyswarm2_backend"])
        self._command: tuple[str, object] | None = None  # ("legacy", None: see self.chain) or ("motors", array)
        self._command_time = -np.inf  # simulation time of the latest command
        self._holding = bool(self.params["hold_until_first_command"])

    def _on_legacy(self, msg: Twist) -> None:
        try:
            self.chain.send(self.sim_time, msg.linear.x, msg.linear.y, msg.angular.z, msg.linear.z)
        except ValueError as error:
            self.get_logger().warn(f"ignoring cmd_vel_legacy: {error}", throttle_duration_sec=1.0)
            self.chain.motors_off(self.sim_time)
        self._command, self._command_time = ("legacy", None), self.sim_time
        self._holding = self._holding and not msg.linear.z > 0

    def _on_motors(self, msg: Float32MultiArray) -> None:
        self._command, self._command_time = ("motors", np.asarray(msg.data, dtype=np.float64)), self.sim_time
        self._holding = self._holding and not np.any(self._command[1] > 0)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._reset()
        response.success, response.message = True, f"reset to {self.initial_position.tolist()}"
        return response

    @property
    def sim_time(self) -> float:
        """Seconds of simulated time since the reset."""
        return self.steps * self.dt

    def state(self) -> VehicleState:
        """The simulated vehicle's current state."""
        pos, quat, vel, angvel = (np.array(x[:, 0], dtype=np.float64) for x in self.sim.physics.state())
        return VehicleState(pos, quat, vel, angvel)

    def _step(self) -> None:
        """One onboard cycle: the latest command, one physics step, and the state every control period."""
        if not self._holding:  # held: time passes, the vehicle stays where it is
            motors = self._motor_source()
            if motors is None:
                _, quat, _, angvel = (np.array(x[:, 0]) for x in self.sim.physics.state())
                motors = self.onboard.motor_commands(quat, angvel)
            self.sim.step(motors[None])
        self.steps += 1
        if self.steps % self.substeps == 0:
            self._publish_state()

    def _motor_source(self) -> np.ndarray | None:
        """The motor thrusts of a motor-level command, or None when the onboard controller computes them."""
        if self._command is None or self.sim_time - self._command_time > self.params["command_timeout"]:
            self.onboard.set_setpoint(0.0, 0.0, 0.0, 0.0)
            return np.zeros(4)
        kind, value = self._command
        if kind == "motors":
            if value.shape != (4,) or not np.all(np.isfinite(value)):
                self.get_logger().warn(f"ignoring motor command {value.tolist()}", throttle_duration_sec=1.0)
                return np.zeros(4)
            return np.clip(value, 0.0, 1.0)
        setpoint = self.chain.setpoint(self.sim_time)
        if setpoint is not None:
            try:
                self.onboard.set_setpoint(*setpoint)
            except ValueError as error:  # NaN angles pass the chain; what the firmware then does is undefined
                self.get_logger().warn(f"ignoring cmd_vel_legacy: {error}", throttle_duration_sec=1.0)
                self.onboard.set_setpoint(0.0, 0.0, 0.0, 0.0)
        return None

    def _publish_state(self) -> None:
        state, stamp = self.state(), time_msg(self.sim_time)
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = stamp, self.params["frame_id"]
        fill_pose(pose.pose, state.position, state.quaternion)
        self._pose_pub.publish(pose)
        odom = Odometry()
        odom.header.stamp = stamp
        if self.params["odom_convention"] == "crazyswarm2":
            odom.header.frame_id = self.params["child_frame_id"]  # the robot's name, as crazyswarm2's server sets it
            self._odom_pub.publish(fill_crazyswarm2_odometry(odom, state))
        else:
            odom.header.frame_id, odom.child_frame_id = self.params["frame_id"], self.params["child_frame_id"]
            self._odom_pub.publish(fill_odometry(odom, state))
        self.clock.publish(self.sim_time)  # after the state: nodes on /clock wake up with it already there


def main(args: list[str] | None = None) -> int:
    """Entry point of the `sim_bridge_node` executable."""
    return run_node(SimBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
