"""quadrotor_policy_node: a robo-rl quadrotor policy flying a Crazyflie through crazyswarm2.

In: `pose_topic` (geometry_msgs/PoseStamped, crazyswarm2's /<cf>/pose; velocity and body rates from
finite differences) or `odom_topic` (nav_msgs/Odometry), chosen by `state_source`; best effort, depth 1,
only the latest message is kept. Odometry is read as `odom_convention` says (robo_rl_ros.messages):
'crazyswarm2' (its /<cf>/odom: world-frame velocity, body rates from finite differences) or 'rep105' (twist
in the body frame child_frame_id names); a message whose frame ids fit the other convention is not flown. Out (reliable), chosen by `command_mode`:
- "cmd_vel_legacy": geometry_msgs/Twist on `cmd_vel_legacy_topic` (see robo_rl_ros.core.crazyflie), with
  linear.x's sign as `crazyswarm2_backend` ('cpp', crazyswarm2's default, or 'cflib': what the crazyswarm2
  launch file was given as `backend`) needs it. Until the node `crazyswarm2_server_node` (crazyswarm2's
  'crazyflie_server'; "": any subscriber) subscribes to the topic, every Twist has thrust 0, and so do the
  first two after it does: they release the firmware's thrust lock (core.crazyflie.ThrustLock; crazyswarm2's
  C++ server sends no zero itself, and a zero that reached only a recorder would leave the vehicle locked);
- "cmd_full_state": crazyflie_interfaces/FullState on `cmd_full_state_topic` (needs crazyflie_interfaces);
- "motors": std_msgs/Float32MultiArray of the four normalized thrusts on `motor_thrusts_topic`, for
  firmware that runs motor-level commands (and the sim bridge).
The four motor thrusts are also published on `~/motor_thrusts` in every mode while it has subscribers; with
`publish_tick_timing`, `~/tick_timing` (std_msgs/Float64MultiArray) carries per tick the monotonic times
[state received, tick started, command published] in seconds and whether the tick flew (1) or stopped (0)
(bench/ros2_latency.py, and the safety tests, which judge each decision in the node's own clock).

The policy runs once per state and at most at the control rate. With `tick_on_state` (the default) it runs
on a state's arrival, so the command leaves within the tick's own compute time; states faster than the rate
are taken on the rate's grid (core.schedule: a 1 kHz odometry source flies a 100 Hz policy at 100 Hz, as
it trained). With `tick_on_state: false` it runs on the next tick of a timer at the control rate. Ticking
on states, that timer is the watchdog: when no state has come for 1.5 periods it ticks on its own, then
every period, repeating the last command until the state is `state_timeout` old. With state older than
`state_timeout`, invalid (NaN/Inf) or outside the geofence, the node stops within one tick: it calls
`notify_setpoints_stop` where that service exists, and with cmd_vel_legacy sends a level descent to zero
thrust (never the last policy command); with cmd_full_state and motors it stops publishing. The policy
takes over (first flight, or again during a descent) only on a steady state stream (core.quadrotor
RESUME_STATES states in a row, each within `state_timeout` of the last); once a descent has ended (landed),
nothing flies until the `~/rearm` service (std_srvs/Trigger) is called. Why it does not fly is logged when it
changes. `realtime_priority` 1..99 runs the node's threads under
SCHED_FIFO (robo_rl_ros.realtime), which bounds the tick latency's tail on a busy computer. Nothing
non-finite is ever published: the controller stops on a non-finite action or command, and the publish
path checks once more and stops (an error in the log) if anything got through.
"""

from __future__ import annotations

import importlib
import math
import time
from types import SimpleNamespace

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Float32MultiArray, Float64MultiArray
from std_srvs.srv import Trigger

from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.core.crazyflie import BACKENDS, DEFAULT_BACKEND, MAX_YAW_RATE_DEG, ThrustLock
from robo_rl_ros.core.estimation import PoseDifferentiator
from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.core.quadrotor import QuadrotorPolicyController, QuadrotorSettings, TickResult, command_is_finite
from robo_rl_ros.core.schedule import TickSchedule
from robo_rl_ros.messages import (ODOM_CONVENTIONS, crazyswarm2_odometry_arrays, legacy_twist, odometry_frames_problem,
                                  odometry_to_state, pose_arrays, stamp_seconds)
from robo_rl_ros.node_clock import NodeSeconds
from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS
from robo_rl_ros.realtime import configure_realtime
from robo_rl_ros.spin import StartupError, run_node

COMMAND_MODES = ("cmd_vel_legacy", "cmd_full_state", "motors")
STATE_SOURCES = ("pose", "odom")


MAX_STATE_TIMEOUT = 1.0  # [s]: 100 control periods at the Crazyflie's rate; a watchdog is for missed states, not outages
MAX_DESCENT_SECONDS = 10.0  # [s]: from 1 m at the descent's level thrust, well on the floor
DEFERRAL_MARGIN = 2e-4  # [s] past an early state's due time, so that the timer does not find it not yet due
MIN_RATE_HZ, MAX_RATE_HZ = 1.0, 1000.0  # what the bundles allow (their control_hz is refused beyond 1 kHz)

class QuadrotorPolicyNode(Node):
    """The policy node (parameters in config/quadrotor_policy.yaml)."""

    def __init__(self) -> None:
        super().__init__("quadrotor_policy_node")
        p = self._declare_parameters()
        self._now = NodeSeconds(self)
        try:
            bundle = load_bundle(p["bundle_path"])
        except BundleError as error:
            raise StartupError(f"quadrotor_policy_node: {error}") from error
        target = p["target_position"]
        if target is None:  # the task's hover point
            target = bundle.env_config.get("center", (0.0, 0.0, 1.0))
        target = list(target)
        if len(target) != 3:
            raise StartupError(f"target_position must have 3 entries, got {target}")
        for name in ("state_timeout", "max_action_delta", "geofence_half_extent", "attitude_kp", "max_tilt_deg",
                     "descent_seconds", "rate_lead", "pose_velocity_smoothing", "control_rate_hz", "max_yaw_rate_deg"):
            if not math.isfinite(p[name]):
                raise StartupError(f"{name} must be a finite number, got {p[name]}")
        if not all(math.isfinite(x) for x in target):
            raise StartupError(f"target_position must be 3 finite numbers, got {target}")
        if not 0.0 <= p["rate_lead"] <= 1.0:
            raise StartupError(f"rate_lead must be in [0, 1], got {p['rate_lead']}")
        if p["crazyswarm2_backend"] not in BACKENDS:
            raise StartupError(f"crazyswarm2_backend must be one of {BACKENDS} (crazyswarm2's launch argument "
                               f"`backend`), got {p['crazyswarm2_backend']!r}")
        # > 0: a negative attitude_kp reversed the attitude loop, a negative geofence stopped every flight, a
        # negative rate crashed rclpy's timer; all were accepted or a traceback
        for name in ("state_timeout", "max_action_delta", "geofence_half_extent", "attitude_kp", "descent_seconds",
                     "max_yaw_rate_deg"):
            if not p[name] > 0:
                raise StartupError(f"{name} must be > 0, got {p[name]}")
        if not p["control_rate_hz"] >= 0:
            raise StartupError(f"control_rate_hz must be > 0, or 0 for the bundle's rate, got {p['control_rate_hz']}")
        # upper bounds: a watchdog or a descent of hours (state_timeout:=50 meant as ms) kept the motors on the
        # last command or near hover without feedback; a rate of 1e-300 Hz was an overflow traceback
        for name, low, high, unit in (("state_timeout", 0.0, MAX_STATE_TIMEOUT, "s"),
                                      ("descent_seconds", 0.0, MAX_DESCENT_SECONDS, "s")):
            if not p[name] <= high:
                raise StartupError(f"{name} must be in ({low:g}, {high:g}] {unit}, got {p[name]}")
        if p["control_rate_hz"] and not MIN_RATE_HZ <= p["control_rate_hz"] <= MAX_RATE_HZ:
            raise StartupError(f"control_rate_hz must be in [{MIN_RATE_HZ:g}, {MAX_RATE_HZ:g}] Hz, or 0 for the "
                               f"bundle's rate, got {p['control_rate_hz']}")
        if not target[2] > 0.0:  # the world frame's z = 0 is the floor
            raise StartupError(f"target_position's height must be above the floor (z > 0 m), got {target}")
        if not 0 < p["max_tilt_deg"] <= 90:
            raise StartupError(f"max_tilt_deg must be in (0, 90], got {p['max_tilt_deg']}")
        if not p["pose_velocity_smoothing"] >= 0:
            raise StartupError(f"pose_velocity_smoothing must be >= 0 s, got {p['pose_velocity_smoothing']}")
        settings = QuadrotorSettings(tuple(float(x) for x in target), p["state_timeout"], p["max_action_delta"],
                                     p["geofence_half_extent"], p["attitude_kp"], p["max_tilt_deg"],
                                     p["descent_seconds"], p["rate_lead"], p["crazyswarm2_backend"],
                                     p["max_yaw_rate_deg"])
        try:
            self.controller = QuadrotorPolicyController(bundle, settings)
        except (BundleError, ValueError) as error:
            raise StartupError(f"quadrotor_policy_node: {error}") from error
        self.mode, self.source = p["command_mode"], p["state_source"]
        if self.mode not in COMMAND_MODES:
            raise StartupError(f"command_mode must be one of {COMMAND_MODES}, got {self.mode!r}")
        if self.source not in STATE_SOURCES:
            raise StartupError(f"state_source must be one of {STATE_SOURCES}, got {self.source!r}")
        self._odom_convention = p["odom_convention"]
        if self._odom_convention not in ODOM_CONVENTIONS:
            raise StartupError(f"odom_convention must be one of {ODOM_CONVENTIONS}, got {self._odom_convention!r}")
        self._interfaces = _crazyflie_interfaces()
        if self.mode == "cmd_full_state" and self._interfaces is None:
            raise StartupError("command_mode 'cmd_full_state' needs the crazyflie_interfaces package (crazyswarm2), "
                               "which is not installed here; use command_mode 'cmd_vel_legacy'")
        # (receive time in the node's clock [s], monotonic receive time [s], message), written by callbacks
        self._latest: tuple[float, float, object] | None = None
        self._consumed: object | None = None
        self._differentiator = PoseDifferentiator(p["pose_velocity_smoothing"])
        self._odom_stamp: float | None = None  # the last flown odometry's header stamp [s]
        self._warned_stamp = False
        self._warned_frames = False
        self._warned_gap = False
        if self.source == "pose":
            self.create_subscription(PoseStamped, p["pose_topic"], self._store, SENSOR_QOS)
        else:
            self.create_subscription(Odometry, p["odom_topic"], self._store, SENSOR_QOS)
        self._thrust_pub = self.create_publisher(Float32MultiArray, "~/motor_thrusts", COMMAND_QOS)
        self._command_pub = self._make_command_publisher(p)
        self._twist = Twist()  # refilled every tick: rclpy serializes on publish
        self._thrust_lock = ThrustLock()
        self._server_node = p["crazyswarm2_server_node"]
        self._legacy_topic = self._command_pub.topic_name
        self._timing_pub = (self.create_publisher(Float64MultiArray, "~/tick_timing", COMMAND_QOS)
                            if p["publish_tick_timing"] else None)
        self._stop_client = self._make_stop_client(p["notify_setpoints_stop_service"])
        self.create_service(Trigger, "~/rearm", self._rearm)
        self._logged_reason = "(starting)"  # why it last did not fly ("" while flying), as logged
        rate = p["control_rate_hz"] or bundle.control_hz
        if abs(rate - bundle.control_hz) > 1e-9:
            self.get_logger().warn(f"control_rate_hz {rate} differs from the bundle's {bundle.control_hz} Hz "
                                   "the policy was trained at")
        self._period = 1.0 / rate
        self._tick_on_state = bool(p["tick_on_state"])
        self._last_tick = -np.inf  # node clock [s]
        self._schedule = TickSchedule(self._period)
        # Ticking on states, the timer is the watchdog: each state's tick re-arms it for 1.5 periods (the
        # grace), and once due it ticks every period until a state comes. So commands never pause longer than
        # the grace, however late a state is. A state too early to tick arms it for its due time instead.
        self._period_ns, self._grace_ns = round(self._period * 1e9), round(1.5 * self._period * 1e9)
        self._timer = self.create_timer((self._grace_ns if self._tick_on_state else self._period_ns) * 1e-9,
                                        self._on_timer)
        self._watchdog_ticking = False
        self.last_result: TickResult | None = None
        configure_realtime(self, p["realtime_priority"])
        self.get_logger().info(f"flying {bundle.env_id} from {bundle.directory} at {rate:g} Hz to {target}, "
                               f"{self.source} in, {self.mode} out, inference in {self.controller.policy.engine}")

    def _declare_parameters(self) -> dict:
        defaults = {
            "bundle_path": "", "target_position": Parameter.Type.DOUBLE_ARRAY, "state_source": "pose",
            "pose_topic": "/cf231/pose", "odom_topic": "/cf231/odom",
            "odom_convention": "crazyswarm2", "command_mode": "cmd_vel_legacy",
            "cmd_vel_legacy_topic": "/cf231/cmd_vel_legacy", "cmd_full_state_topic": "/cf231/cmd_full_state",
            "motor_thrusts_topic": "/cf231/motor_thrusts",
            "notify_setpoints_stop_service": "/cf231/notify_setpoints_stop", "control_rate_hz": 0.0,
            "state_timeout": 0.05, "max_action_delta": 1.0, "geofence_half_extent": 0.6, "attitude_kp": 6.0,
            "max_tilt_deg": 60.0, "descent_seconds": 2.0, "rate_lead": 0.75, "pose_velocity_smoothing": 0.0,
            "publish_tick_timing": False, "tick_on_state": True, "realtime_priority": 0,
            "crazyswarm2_backend": DEFAULT_BACKEND, "max_yaw_rate_deg": MAX_YAW_RATE_DEG,
            # crazyswarm2 crazyflie/launch/launch.py names its server node so for every backend
            "crazyswarm2_server_node": "crazyflie_server",
        }
        values = {name: self.declare_parameter(name, default).value for name, default in defaults.items()}
        if not values["bundle_path"]:
            raise StartupError("quadrotor_policy_node: parameter bundle_path (a folder with policy.json and "
                               "policy.onnx) is required")
        return values

    def _make_command_publisher(self, p: dict):
        if self.mode == "cmd_vel_legacy":
            return self.create_publisher(Twist, p["cmd_vel_legacy_topic"], COMMAND_QOS)
        if self.mode == "cmd_full_state":
            return self.create_publisher(self._interfaces.msg.FullState, p["cmd_full_state_topic"], COMMAND_QOS)
        return self.create_publisher(Float32MultiArray, p["motor_thrusts_topic"], COMMAND_QOS)

    def _make_stop_client(self, service: str):
        if self._interfaces is None:
            self.get_logger().info("crazyflie_interfaces is not installed: notify_setpoints_stop is not called")
            return None
        return self.create_client(self._interfaces.srv.NotifySetpointsStop, service)

    def _store(self, msg) -> None:
        received, now = time.monotonic(), self._now()
        self._latest = (now, received, msg)
        if self._tick_on_state:
            if self._schedule.due(now):
                self._tick(now, received)
                self._arm_timer(self._grace_ns)
            else:  # early (a source faster than the rate): it ticks when due, unless a newer state does first
                self._arm_timer(round((self._schedule.wait(now) + DEFERRAL_MARGIN) * 1e9))

    def _arm_timer(self, delay_ns: int) -> None:
        """Ticking on states: the timer fires `delay_ns` from now, then (the watchdog) every period."""
        self._timer.timer_period_ns = delay_ns
        self._watchdog_ticking = False
        self._timer.reset()

    def _on_timer(self) -> None:
        now = self._now()
        if not self._tick_on_state:
            self._tick(now, time.monotonic())
            return
        if self._schedule.due(now):  # (not when a state's tick came just before)
            self._tick(now, time.monotonic())
        if not self._watchdog_ticking:  # from now on every period (the new period applies after a reset)
            self._timer.timer_period_ns = self._period_ns
            self._timer.reset()
            self._watchdog_ticking = True

    def _tick(self, now: float, started: float) -> None:
        """Run the controller at `now` (node clock [s]; `started`: monotonic) and publish its decision."""
        self._last_tick = now
        self._schedule.ticked(now)
        latest = self._latest
        if latest is not None and latest[2] is not self._consumed:
            self._consumed = latest[2]
            state = self._state_from(latest[2])
            if state is not None:
                self.controller.update_state(latest[0], state)
        result = self.controller.tick(now)
        if not command_is_finite(result):  # the controller guards this already; a NaN must never reach the vehicle
            self.get_logger().error(f"non-finite command {result.legacy}, action {result.action.tolist()}: stopping")
            result = self.controller.refuse(now, "the command is not finite")
        self.last_result = result
        published = self._publish(result)
        if self._timing_pub is not None:
            received = latest[1] if latest is not None else float("nan")
            self._timing_pub.publish(Float64MultiArray(data=[received, started, published, float(result.flying)]))

    def _state_from(self, msg) -> VehicleState | None:
        if isinstance(msg, Odometry):
            problem = odometry_frames_problem(msg, self._odom_convention)
            if problem:  # read in the wrong convention, the velocity would be rotated wrongly or rates zero
                if not self._warned_frames:
                    self.get_logger().warn(f"{problem}: not flown")
                    self._warned_frames = True
                return None
            self._warned_frames = False
            # a repeated or earlier stamp than the last state's (a replay, a restarted or reordering source): not
            # flown, so the watchdog judges the last good state's age; a zero stamp is an unstamped source's
            stamp = stamp_seconds(msg.header.stamp)
            if stamp != 0.0 and self._odom_stamp is not None and not stamp > self._odom_stamp:
                if not self._warned_stamp:
                    self.get_logger().warn(f"odometry stamped {stamp:.3f} s, not after the last state's "
                                           f"{self._odom_stamp:.3f} s: ignored until a newer one comes")
                    self._warned_stamp = True
                return None
            if stamp != 0.0:
                self._odom_stamp, self._warned_stamp = stamp, False
            if self._odom_convention == "rep105":
                return odometry_to_state(msg)
            position, quaternion, velocity = crazyswarm2_odometry_arrays(msg)
        else:
            position, quaternion = pose_arrays(msg)
            velocity = None
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quaternion))):
            self._differentiator.reset()
            return VehicleState(position, quaternion, np.zeros(3), np.zeros(3))  # rejected by the controller
        if not self._differentiator.update(stamp_seconds(msg.header.stamp), position, quaternion):
            gap = self._differentiator.refused_gap
            if gap is not None and not self._warned_gap:  # unstamped, repeated or far-apart stamps never fly
                self.get_logger().warn(f"{self.source} stamps {gap * 1e3:.1f} ms apart: velocity and body rates are "
                                       f"differentiated over stamps (0, {self._differentiator.max_gap * 1e3:.0f}] ms "
                                       "apart; such states are not flown")
                self._warned_gap = True
            return None  # rates need two poses: keep the previous state (the watchdog judges its age)
        self._warned_gap = False
        if velocity is None:
            velocity = self._differentiator.velocity
        return VehicleState(position, quaternion, velocity, self._differentiator.body_rates)

    def _rearm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """~/rearm: after a landing, let the policy take over again on a steady state stream."""
        why_not = self.controller.rearm(self._now())
        response.success = not why_not
        response.message = why_not or "re-armed: the policy takes over on a steady state stream"
        self.get_logger().info(f"~/rearm: {response.message}")
        return response

    def _publish(self, result: TickResult) -> float:
        if result.just_stopped:
            self.get_logger().warn(f"stopping: {result.reason}")
            if self._stop_client is not None and self._stop_client.service_is_ready():
                self._stop_client.call_async(self._interfaces.srv.NotifySetpointsStop.Request())
        elif not result.flying and result.reason != self._logged_reason:  # why it still does not fly, once
            self.get_logger().warn(f"not flying: {result.reason}")
        elif result.flying and self._logged_reason:
            self.get_logger().info(f"the policy takes over, holding the heading it took over at: "
                                   f"{self.controller.take_over_heading_deg:.0f} deg from +x")
        self._logged_reason = result.reason
        if self.mode == "cmd_vel_legacy":
            legacy = result.legacy
            if not self._thrust_lock.released:  # (the graph is asked only until then)
                legacy = self._thrust_lock.command(legacy, self._server_listening())
                if self._thrust_lock.released:
                    self.get_logger().info(f"thrust 0 sent to {self._server_node or 'the subscriber'}: the "
                                           "firmware's thrust lock is released")
            self._command_pub.publish(legacy_twist(legacy, self._twist))
        elif result.flying and self.mode == "motors":
            self._command_pub.publish(Float32MultiArray(data=[float(x) for x in result.action]))
        elif result.flying:
            self._command_pub.publish(self._full_state(result))
        published = time.monotonic()
        if result.flying and self._thrust_pub.get_subscription_count():
            self._thrust_pub.publish(Float32MultiArray(data=[float(x) for x in result.action]))
        return published

    def _server_listening(self) -> bool:
        """Whether crazyswarm2's server (any subscriber if `crazyswarm2_server_node` is "") subscribes to
        cmd_vel_legacy now."""
        if not self._server_node:
            return self._command_pub.get_subscription_count() > 0
        return any(info.node_name == self._server_node
                   for info in self.get_subscriptions_info_by_topic(self._legacy_topic))

    def _full_state(self, result: TickResult):
        msg = self._interfaces.msg.FullState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = "world"
        target = self.controller.target
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(x) for x in target)
        q = result.setpoint.quaternion
        o = msg.pose.orientation
        o.w, o.x, o.y, o.z = (float(x) for x in q)
        vehicle = self.controller.vehicle
        thrust_acceleration = result.setpoint.rotation[:, 2] * result.setpoint.thrust / vehicle.mass
        acceleration = thrust_acceleration - [0.0, 0.0, vehicle.gravity]
        msg.acc.x, msg.acc.y, msg.acc.z = (float(x) for x in acceleration)
        msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z = (float(x) for x in result.setpoint.body_rates)
        return msg


def _crazyflie_interfaces() -> SimpleNamespace | None:
    """crazyflie_interfaces' msg and srv modules, or None where crazyswarm2 is not installed."""
    try:
        return SimpleNamespace(msg=importlib.import_module("crazyflie_interfaces.msg"),
                               srv=importlib.import_module("crazyflie_interfaces.srv"))
    except ImportError:
        return None


def main(args: list[str] | None = None) -> int:
    """Entry point of the `quadrotor_policy_node` executable."""
    return run_node(QuadrotorPolicyNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
