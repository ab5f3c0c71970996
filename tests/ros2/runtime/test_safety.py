"""Safety through ROS: the test plays the robot (odometry at 100 Hz) and watches the policy node's
commands when the state goes stale, carries NaN, or comes back.

Each decision is judged in the node's own monotonic clock (`~/tick_timing`: when the state it used was
received, when the tick started, whether it flew), not by when this process happened to receive the
command: a loaded host delays delivery by tens of milliseconds, and the test must not depend on that."""

import json
import math
import re
import time
from typing import NamedTuple

import pytest
import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray

from conftest import HOVER_BUNDLE
from ros_helpers import NodeProcess, config

from robo_rl_ros.core.quadrotor import RESUME_STATES
from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS

TIMEOUT = 0.05
TICK = 0.01
CLOCK_SLACK = 0.002  # [s] the node judges age in its ROS clock, tick_timing reports monotonic time
# the probe plays crazyswarm2's server: the node's zeros that release the thrust lock go to it
PROBE_IS_THE_SERVER = {"crazyswarm2_server_node": "robo_rl_test_probe"}
HOVER_PWM = json.loads((HOVER_BUNDLE / "policy.json").read_text())["training"]["vehicle_parameters"]["hover_command"] * 65535


class Tick(NamedTuple):
    """One tick of the node, from `~/tick_timing` (monotonic seconds)."""

    received: float  # the state it used arrived
    started: float
    published: float
    flew: float  # 1.0: a policy command; 0.0: stopped

    @property
    def state_age(self) -> float:
        return self.started - self.received


def assert_stops_exactly_when_stale(ticks: list[Tick]) -> None:
    """Every tick on a state older than the timeout stopped, every tick on a fresh one flew, and one stopped."""
    stale = [tick for tick in ticks if tick.state_age > TIMEOUT + CLOCK_SLACK]
    fresh = [tick for tick in ticks if tick.state_age < TIMEOUT - CLOCK_SLACK]
    assert stale and not any(tick.flew for tick in stale), "flew on a stale state"
    assert all(tick.flew for tick in fresh), "stopped before the state was stale"


class Robot:
    """Publishes hover odometry every 10 ms of wall time while `alive`; records commands with arrival times."""

    def __init__(self, probe):
        self.probe = probe
        self.pub = probe.create_publisher(Odometry, "/cf231/odom", SENSOR_QOS)
        self.commands: list[tuple[float, Twist]] = []
        self.sub = probe.create_subscription(Twist, "/cf231/cmd_vel_legacy",
                                             lambda m: self.commands.append((time.monotonic(), m)), COMMAND_QOS)
        self.ticks: list[Tick] = []
        self.timing_sub = probe.create_subscription(
            Float64MultiArray, "/quadrotor_policy_node/tick_timing", lambda m: self.ticks.append(Tick(*m.data)),
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self.last_sent = 0.0  # monotonic time just before the last publish: its receipt comes after it

    def send(self, position=(0.0, 0.0, 1.0), body_rates=(0.0, 0.0, 0.0), stamp: float = 0.0) -> float:
        msg = Odometry()
        msg.header.frame_id, msg.child_frame_id = "world", "cf231"
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(round((stamp % 1.0) * 1e9))
        msg.pose.pose.position.x, msg.pose.pose.position.y, msg.pose.pose.position.z = position
        msg.pose.pose.orientation.w = 1.0
        msg.twist.twist.angular.x, msg.twist.twist.angular.y, msg.twist.twist.angular.z = body_rates
        self.last_sent = time.monotonic()
        self.pub.publish(msg)
        return self.last_sent

    def run(self, seconds: float, alive: bool = True, position=(0.0, 0.0, 1.0), body_rates=(0.0, 0.0, 0.0),
            stamp=None, period: float = TICK) -> int:
        """Send a state every `period` for `seconds` (none if not `alive`), stamped `stamp()` if given (else
        unstamped); the number sent."""
        end, sent = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            if alive and time.monotonic() - self.last_sent >= period:
                self.send(position, body_rates, stamp() if stamp is not None else 0.0)
                sent += 1
            rclpy.spin_once(self.probe, timeout_sec=min(0.001, period / 2))
        return sent

    def wait_for_delivery(self, timeout: float = 5.0) -> None:
        """Spin until the node has ticked on the last state sent, so that none is still in flight; a state the
        best-effort sensor QoS dropped is sent again."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.ticks_on_states_after(self.last_sent):
            if time.monotonic() - self.last_sent > 0.2:
                self.send()
            rclpy.spin_once(self.probe, timeout_sec=0.001)
        assert self.ticks_on_states_after(self.last_sent), f"the node did not tick on a state within {timeout} s"

    def run_until(self, condition, timeout: float) -> bool:
        """Publish hover odometry until `condition()` holds or `timeout` seconds pass."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not condition():
            self.run(0.01)
        return condition()

    def since(self, t: float) -> list[tuple[float, Twist]]:
        return [(ts, m) for ts, m in self.commands if ts > t]

    def ticks_on_states_after(self, t: float) -> list[Tick]:
        """The node's ticks whose state arrived after monotonic time `t`, in order."""
        return [tick for tick in self.ticks if tick.received > t]

    def close(self) -> None:
        self.probe.destroy_subscription(self.timing_sub)
        self.probe.destroy_subscription(self.sub)
        self.probe.destroy_publisher(self.pub)


def _flying(msg: Twist) -> bool:
    """A policy command (the stop commands are exactly level, with no yaw rate)."""
    return not (msg.linear.x == msg.linear.y == msg.angular.z == 0.0) and msg.linear.z > 0.5 * HOVER_PWM


def _stopping(msg: Twist, previous_thrust: float) -> bool:
    level = msg.linear.x == msg.linear.y == msg.angular.z == 0.0
    return level and msg.linear.z < previous_thrust and msg.linear.z <= 0.9 * HOVER_PWM + 1e-6


@pytest.mark.parametrize("tick_on_state", [True, False])  # the policy on each state, or on the timer
def test_stale_state_and_nan_stop_within_one_tick_and_recover(workspace, probe, tick_on_state):
    install = workspace["install"]
    robot = Robot(probe)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "state_timeout": TIMEOUT, **PROBE_IS_THE_SERVER,
                          "tick_on_state": tick_on_state, "publish_tick_timing": True}) as node:
            assert robot.run_until(lambda: any(_flying(m) for _, m in robot.commands), 30.0), node.output()
            robot.run(1.0)
            window = time.monotonic() - 0.5
            # every tick on a fresh state flew (a stall of this process longer than the timeout would
            # rightly stop the node: judged by the state's age, that is not a failure)
            ticks = [tick for tick in robot.ticks if tick.started > window]
            assert ticks and all(tick.flew for tick in ticks if tick.state_age < TIMEOUT - CLOCK_SLACK)
            flying = [m for _, m in robot.since(window) if _flying(m)]
            assert flying, [m.linear.z for _, m in robot.since(window)]
            thrust = flying[-1].linear.z

            # 1. the state stops: the node keeps flying until the last state is `TIMEOUT` old, then stops
            lost_at = robot.last_sent
            robot.run(0.5, alive=False)
            assert_stops_exactly_when_stale(robot.ticks_on_states_after(lost_at - TIMEOUT))
            after = robot.since(lost_at)
            first_stop = next(ts for ts, m in after if not _flying(m))
            stopped = [m for ts, m in after if ts >= first_stop]
            assert _stopping(stopped[0], thrust)
            assert all(m.linear.x == m.linear.y == 0.0 and not _flying(m) for m in stopped), \
                "a stale policy command was sent again"
            assert stopped[-1].linear.z < stopped[0].linear.z  # descending, never holding thrust
            assert "stopping: state is" in node.output()
            if tick_on_state:  # the watchdog ticks one grace (1.5 periods) after the last state, then each period
                last_state = max(tick.received for tick in robot.ticks if math.isfinite(tick.received))
                starts = [tick.started for tick in robot.ticks if tick.received == last_state]
                watchdog = starts[1:]
                assert len(watchdog) >= 2 and watchdog[0] - starts[0] >= 1.5 * TICK - 0.001, starts[:3]
                # a late callback may come closer to the next one (a timer keeps its schedule), never more often
                assert len(watchdog) - 1 <= (watchdog[-1] - watchdog[0]) / TICK + 1, \
                    "the watchdog ticked faster than the control rate"

            # 2. good state again during the descent: the policy takes over on a steady stream, its 5th state
            back_at = robot.send()
            robot.run(0.3)
            # (states go out at most every TICK: the 5th is sent no sooner than 4 TICKs after the first)
            flew = [tick for tick in robot.ticks_on_states_after(back_at - 0.001) if tick.flew]
            assert flew and flew[0].received >= back_at + (RESUME_STATES - 1) * TICK - 0.001, (flew[:1], back_at)
            assert any(_flying(m) for _, m in robot.since(back_at))

            # 3. NaN in a message: the tick on it stops, and so does every tick after it. A good state still in
            # flight when the NaN is sent would be received after it and rightly fly, so let it land first.
            robot.wait_for_delivery()
            nan_sent = time.monotonic()
            robot.pub.publish(_nan_odometry())
            robot.run(0.1, alive=False)
            on_nan = robot.ticks_on_states_after(nan_sent)
            assert on_nan and not any(tick.flew for tick in on_nan)
            assert not _flying(robot.commands[-1][1])
            # "stopping: ..." if it still flew when the NaN came; under load the wait for delivery can outlast
            # state_timeout, and the node, already descending, says "not flying: ..."
            assert re.search(r"(stopping|not flying): state contains NaN or Inf", node.output())
            back_at = robot.send()
            robot.run(0.3)
            assert any(_flying(m) for _, m in robot.since(back_at))

            # 4. outside the geofence: stops; inside again: flies
            out_at = time.monotonic()
            robot.run(0.2, position=(0.0, 0.0, 1.8))
            assert not _flying(robot.since(out_at)[-1][1]) and "outside the geofence" in node.output()
            back_at = time.monotonic()
            robot.run(0.3)
            assert any(_flying(m) for _, m in robot.since(back_at))

            # 5. odometry stamped before the last state's (a replay, a restarted source) was flown: now it is not,
            # and the last good state ages out
            robot.run(0.3, stamp=lambda: 100.0 + time.monotonic())
            back_at = time.monotonic()
            robot.run(0.4, stamp=lambda: 50.0)
            assert not _flying(robot.since(back_at)[-1][1]) and "not after the last state's" in node.output()

            # 6. a descent that ran its course (landed): a steady state again does not take off (it did) until
            # ~/rearm is called
            robot.run(0.3)
            assert _flying(robot.commands[-1][1])
            robot.run(2.3, alive=False)  # the 2 s descent ends
            back_at = time.monotonic()
            robot.run(0.5)
            assert robot.since(back_at) and not any(_flying(m) for _, m in robot.since(back_at)), "took off again"
            assert all(m.linear.z == 0.0 for _, m in robot.since(back_at)) and "call ~/rearm" in node.output()
            answer = _call_rearm(probe)
            assert answer.success, answer.message
            back_at = time.monotonic()
            robot.run(0.3)
            assert any(_flying(m) for _, m in robot.since(back_at))
    finally:
        robot.close()


def _call_rearm(probe):
    """Call the node's ~/rearm service (std_srvs/Trigger) and return its answer."""
    from std_srvs.srv import Trigger

    client = probe.create_client(Trigger, "/quadrotor_policy_node/rearm")
    try:
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(probe, future, timeout_sec=10.0)
        assert future.done()
        return future.result()
    finally:
        probe.destroy_client(client)


def test_finite_but_absurd_state_never_yields_a_non_finite_command(workspace, probe):
    """Odometry with body rates of 1e200 rad/s (finite, so not caught as NaN) made the node publish NaN roll,
    pitch and yaw rate while flying; 1e308 raised out of the tick. Now the node stops on it, every command
    stays finite, and it flies again on good state."""
    install = workspace["install"]
    robot = Robot(probe)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "state_timeout": TIMEOUT, **PROBE_IS_THE_SERVER}) as node:
            assert robot.run_until(lambda: any(_flying(m) for _, m in robot.commands), 30.0), node.output()
            robot.run(0.3)
            absurd_at = time.monotonic()
            robot.run(0.3, body_rates=(1e200, 1e200, 1e200))
            robot.run(0.2, body_rates=(0.0, 0.0, 1e308))
            assert not _flying(robot.commands[-1][1])
            assert "rad/s exceeds the training's 35 rad/s" in node.output(), node.output()
            back_at = time.monotonic()
            robot.run(0.3)
            assert any(_flying(m) for _, m in robot.since(back_at))
            values = [(m.linear.x, m.linear.y, m.angular.z, m.linear.z) for _, m in robot.commands]
            assert all(math.isfinite(v) for row in values for v in row)
            assert robot.since(absurd_at) and "Traceback" not in node.output()
    finally:
        robot.close()


def test_thrust_zero_reaches_crazyswarm2s_server_before_any_flying_command(workspace, probe):
    """crazyswarm2's C++ server sends no zero itself, and the firmware keeps thrust at 0 until one arrives.
    A subscriber that is not the server (here the probe, as a recorder would) must not count: the node
    sends zeros until the server's node subscribes, and the server's first Twist has thrust 0."""
    install = workspace["install"]
    robot = Robot(probe)  # subscribes to cmd_vel_legacy first, like a recorder
    server = rclpy.create_node("crazyflie_server")
    received: list[Twist] = []
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "crazyswarm2_server_node": "crazyflie_server"}) as node:
            assert robot.run_until(lambda: len(robot.ticks) > 0 or len(robot.commands) > 50, 30.0)
            robot.run(1.0)
            assert robot.commands and all(m.linear.z == 0.0 for _, m in robot.commands), "flew without the server"
            server.create_subscription(Twist, "/cf231/cmd_vel_legacy", received.append, COMMAND_QOS)
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline and not any(m.linear.z > 0 for m in received):
                robot.run(0.01)
                rclpy.spin_once(server, timeout_sec=0.0)
            first_flying = next(i for i, m in enumerate(received) if m.linear.z > 0)
            assert first_flying >= 1 and all(m.linear.z == 0.0 for m in received[:first_flying])
            assert "thrust 0 sent to crazyflie_server" in node.output()
    finally:
        server.destroy_node()
        robot.close()


def test_a_state_source_faster_than_the_control_rate_steps_the_policy_at_the_rate(workspace, probe):
    """Odometry at up to 1 kHz (an onboard estimator, a fast mocap) flies the 100 Hz policy every 10 ms, as it
    trained: ticking on every state filled its action history with a few milliseconds of flight."""
    install = workspace["install"]
    robot = Robot(probe)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "state_timeout": TIMEOUT, "publish_tick_timing": True,
                          **PROBE_IS_THE_SERVER}):
            assert robot.run_until(lambda: any(tick.flew for tick in robot.ticks), 30.0)
            start = time.monotonic()
            sent = robot.run(1.0, period=0.001)
            robot.wait_for_delivery()
            ticks = [tick for tick in robot.ticks if start + 0.1 <= tick.started < start + 0.9]
            assert sent >= 300, f"the test sent only {sent} states in 1 s: not faster than the control rate"
            assert all(tick.flew for tick in ticks)
            # 0.8 s at 100 Hz; on every state it was 3-10 times as many
            assert 70 <= len(ticks) <= 82, f"{len(ticks)} ticks in 0.8 s of {sent / 1.0:.0f} Hz odometry"
    finally:
        robot.close()


def test_odometry_in_the_other_convention_is_not_flown(workspace, probe):
    """REP 105 odometry (twist in the body frame child_frame_id names) given to a node reading crazyswarm2's /odom
    (world-frame velocity): the node read it in the wrong frame and flew; now it names the mismatch and stays off."""
    install = workspace["install"]
    robot = Robot(probe)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "state_source": "odom", "publish_tick_timing": True,
                          **PROBE_IS_THE_SERVER}) as node:
            assert robot.run_until(lambda: len(robot.ticks) > 50, 30.0)
            assert not any(tick.flew for tick in robot.ticks)
            assert not any(_flying(m) for _, m in robot.commands)
            assert node.output().count("odom_convention 'rep105'") == 1  # one warning, not one per message
    finally:
        robot.close()


def test_unstamped_poses_are_named_not_flown(workspace, probe):
    """Poses all stamped 0 (a source that leaves header.stamp empty) give no velocity: the node only said
    'no state received yet' while poses came in; now it names the stamps."""
    from geometry_msgs.msg import PoseStamped

    install = workspace["install"]
    pub = probe.create_publisher(PoseStamped, "/cf231/pose", SENSOR_QOS)
    robot = Robot(probe)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "state_source": "pose", "publish_tick_timing": True,
                          **PROBE_IS_THE_SERVER}) as node:
            def unstamped_poses() -> bool:
                msg = PoseStamped()
                msg.header.frame_id = "world"
                msg.pose.position.z, msg.pose.orientation.w = 1.0, 1.0
                pub.publish(msg)
                rclpy.spin_once(probe, timeout_sec=0.01)
                return "stamps 0.0 ms apart" in node.output()

            end = time.monotonic() + 30.0
            while time.monotonic() < end and not unstamped_poses():
                pass
            for _ in range(30):
                unstamped_poses()
            assert node.output().count("stamps 0.0 ms apart") == 1  # once, not per pose
            assert not any(tick.flew for tick in robot.ticks)
    finally:
        probe.destroy_publisher(pub)
        robot.close()


def _nan_odometry() -> Odometry:
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "world", "cf231"
    msg.pose.pose.position.x, msg.pose.pose.position.y, msg.pose.pose.position.z = 0.0, math.nan, 1.0
    msg.pose.pose.orientation.w = 1.0
    return msg


def test_stop_uses_no_stale_command_in_motor_mode(workspace, probe):
    """In motors mode, a lost state ends the stream of motor commands instead of holding the last one."""
    from std_msgs.msg import Float32MultiArray

    install = workspace["install"]
    robot = Robot(probe)
    motors: list[float] = []
    sub = probe.create_subscription(Float32MultiArray, "/cf231/motor_thrusts",
                                    lambda m: motors.append(time.monotonic()), COMMAND_QOS)
    try:
        with NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         {"bundle_path": str(HOVER_BUNDLE), "command_mode": "motors", "state_timeout": TIMEOUT,
                          "publish_tick_timing": True}):
            assert robot.run_until(lambda: bool(motors), 30.0)
            robot.run(0.5)
            lost_at = robot.last_sent
            robot.run(0.6, alive=False)
            assert_stops_exactly_when_stale(robot.ticks_on_states_after(lost_at - TIMEOUT))
            # the node stops ~TIMEOUT after the last state; 0.4 s later even a badly delayed delivery is in
            late = [t for t in motors if t > lost_at + 0.2]
            assert not late, f"{len(late)} motor commands long after the state was lost"
    finally:
        probe.destroy_subscription(sub)
        robot.close()
