"""The policy node flies the sim bridge through ROS 2: pose/odom and /clock from the bridge,
cmd_vel_legacy from the node, the simulated onboard attitude controller in between; the rollout is
recorded as MCAP and read back."""

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped, Twist
from mcap_ros2.reader import read_ros2_messages
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from conftest import HOVER_BUNDLE
from ros_helpers import NodeProcess, config, spin_until

# deeper than the nodes' depth 1: the test wants every message, even when it spins late
PROBE_QOS = QoSProfile(depth=200, reliability=ReliabilityPolicy.BEST_EFFORT)
PROBE_RELIABLE_QOS = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)

TARGET = np.array([0.0, 0.0, 1.0])
SETTLE_S, HOVER_S = 4.0, 10.0  # from 8.7 cm off the target (sim_bridge.yaml), then 10 s of hover
RECORDED = ["/cf231/odom:nav_msgs/msg/Odometry", "/cf231/pose:geometry_msgs/msg/PoseStamped",
            "/cf231/cmd_vel_legacy:geometry_msgs/msg/Twist", "/clock:rosgraph_msgs/msg/Clock"]


# Not here: command_mode "motors" (the four thrusts streamed to the simulated motors). With the seed-0
# policy it hovered within 3.8-4.8 cm on a quiet machine, but with the CPUs oversubscribed (load 3.4 on 2
# cores) it lost the vehicle in 1 of 3 runs: a motor-level loop over DDS does not tolerate tens of ms of scheduling delay, while the
# onboard attitude controller behind cmd_vel_legacy does. Motor-level policies belong on board
# (firmware/crazyflie); test_safety checks that mode's stop behaviour.
# The bridge takes cmd_vel_legacy through the named crazyswarm2 backend's chain as its sources say
# (robo_rl_ros.crazyswarm2_chain), independently of the node's conversion: a pitch sign that does not match
# the backend, or a first command that leaves the firmware's thrust lock on, loses the vehicle here.
# every state source, clock and crazyswarm2 backend once (the backends' conversions are also checked in-process,
# tests/ros2/test_core_closed_loop.py)
# and both odometry conventions (crazyswarm2's /odom: world-frame velocity in mm/s, no body rates; REP 105)
@pytest.mark.parametrize("state_source, command_mode, sim_time, backend, odom_convention", [
    ("odom", "cmd_vel_legacy", False, "cflib", "crazyswarm2"), ("pose", "cmd_vel_legacy", False, "cpp", "rep105"),
    ("odom", "cmd_vel_legacy", True, "cpp", "rep105")])
def test_hover_within_5cm_for_10s_through_ros(workspace, probe, state_source, command_mode, sim_time, backend,
                                              odom_convention, tmp_path):
    install = workspace["install"]
    odom, poses, commands, command_times, clock = [], [], [], [], []

    def on_command(m: Twist) -> None:
        commands.append((m.linear.y, m.linear.x, m.angular.z, m.linear.z))
        command_times.append(clock[-1] if clock else -1.0)  # the bridge's simulated time then (latest /clock)

    subs = [
        probe.create_subscription(Odometry, "/cf231/odom", lambda m: odom.append(_odom_row(m)), PROBE_QOS),
        probe.create_subscription(PoseStamped, "/cf231/pose", lambda m: poses.append(m), PROBE_QOS),
        probe.create_subscription(Twist, "/cf231/cmd_vel_legacy", on_command, PROBE_RELIABLE_QOS),
        probe.create_subscription(Clock, "/clock", lambda m: clock.append(m.clock.sec + m.clock.nanosec * 1e-9), PROBE_RELIABLE_QOS),
    ]
    bundle = {"bundle_path": str(HOVER_BUNDLE)}
    bag = tmp_path / "rollout.mcap"
    try:
        with NodeProcess(install, "mcap_recorder_node", [], {"output": str(bag), "topics": RECORDED}) as recorder, \
             NodeProcess(install, "sim_bridge_node", [config(install, "sim_bridge.yaml")],
                         dict(bundle, crazyswarm2_backend=backend, odom_convention=odom_convention)) as bridge, \
             NodeProcess(install, "quadrotor_policy_node", [config(install, "sim_quadrotor_policy.yaml")],
                         dict(bundle, state_source=state_source, command_mode=command_mode, use_sim_time=sim_time,
                              crazyswarm2_backend=backend, odom_convention=odom_convention)) as node:
            # starting three Python processes took 15 s of a 60 s budget on a loaded CI machine, which then
            # ran the simulation at a third of real time: the start and the flight get a budget each
            assert spin_until(probe, lambda: bool(odom), timeout=60.0), \
                f"no odometry within 60 s of starting the nodes\n{bridge.output()}\n{node.output()}"
            done = spin_until(probe, lambda: bool(odom) and odom[-1][0] >= SETTLE_S + HOVER_S,
                              timeout=4 * (SETTLE_S + HOVER_S) + 30.0)
            assert done, (f"sim time reached {odom[-1][0] if odom else None}\n{bridge.output()}\n{node.output()}"
                          f"\n{recorder.output()}")
            stops = [line for line in node.output().splitlines() if "stopping" in line][1:]  # [0]: before any state
    finally:
        for sub in subs:
            probe.destroy_subscription(sub)
    rows = np.array(odom)
    hover = rows[(rows[:, 0] >= SETTLE_S) & (rows[:, 0] <= SETTLE_S + HOVER_S)]
    errors = np.linalg.norm(hover[:, 1:4] - TARGET, axis=1)
    on_clock = " on /clock" if sim_time else ""
    print(f"\n{state_source} ({odom_convention}) -> {command_mode} ({backend}){on_clock}: hover error over {HOVER_S:g} s of sim time: "
          f"max {errors.max() * 100:.2f} cm, "
          f"mean {errors.mean() * 100:.2f} cm, last 5 s max {errors[len(errors) // 2:].max() * 100:.2f} cm, "
          f"{len(hover)} odometry messages, {len(commands)} commands, {len(stops)} stops")
    assert hover[-1, 0] - hover[0, 0] >= HOVER_S - 0.05
    assert errors.max() < 0.05, f"the node stopped {len(stops)} times: {stops[:5]}"
    # what was exchanged: motors off until the first state, then commands near hover thrust and level
    first = next(i for i, c in enumerate(commands) if c[3] > 0)
    assert all(c == (0.0, 0.0, 0.0, 0.0) for c in commands[:first])
    commands, command_times = commands[first:], command_times[first:]
    thrust = np.array([c[3] for c in commands])
    # one command per state: ~1490 over the 14 s when the run goes smoothly, but with 2 cores shared by bridge,
    # node, recorder and this probe, the node's depth-1 subscription loses states: 1107-1392 in six runs on
    # /clock, and 1112 seen once on the wall clock in a full `.ci/run`. 70% still fails a node that stalls
    # or ticks at half rate.
    assert len(commands) > 0.7 * 100 * (SETTLE_S + HOVER_S) and np.all(thrust > 0)
    hover_pwm = 0.4449 * 65535
    assert abs(np.median(thrust) - hover_pwm) < 0.1 * hover_pwm
    # near level in hover, judged on the commands sent from SETTLE_S of simulated time on (counting 100
    # commands per second put the approach into the window whenever a loaded machine ran the simulation
    # slower than real time). With the full rate lead, the 4-6 ms from state to applied command put roll and
    # pitch into a period-2 oscillation (p95 up to 12 deg, max 32 deg; see core.crazyflie and
    # test_core_closed_loop); rate_lead 0.75 removed it. With the policy ticked on each state's arrival
    # (tick_on_state) rather than on a timer beating against the bridge's states, 12 idle and loaded cases
    # gave p95 0.1-0.4 deg and max 0.3-1.4 deg.
    tilt = np.abs(np.array([c[:2] for c, t in zip(commands, command_times) if t >= SETTLE_S]))
    print(f"roll/pitch commands in hover: p95 {np.percentile(tilt, 95):.1f} deg, max {tilt.max():.1f} deg")
    p95, worst = 2.0, 10.0
    assert np.percentile(tilt, 95) < p95 and tilt.max() < worst, \
        (np.percentile(tilt, 95), tilt.max(), f"the node stopped {len(stops)} times: {stops[:5]}")
    assert poses[-1].header.frame_id == "world" and len(poses) > 100
    assert np.all(np.diff(clock) > 0) and clock[-1] >= SETTLE_S + HOVER_S - 0.5
    _check_recording(bag, rows)


def _check_recording(bag, received_odometry):
    """The MCAP decodes with its own schemas (what Foxglove and rosbag2 do) into the messages sent."""
    by_topic: dict[str, list] = {}
    with open(bag, "rb") as f:
        for message in read_ros2_messages(f):
            by_topic.setdefault(message.channel.topic, []).append(message)
    assert set(by_topic) == {entry.split(":")[0] for entry in RECORDED}
    schemas = {topic: messages[0].schema.name for topic, messages in by_topic.items()}
    assert schemas["/cf231/odom"] == "nav_msgs/msg/Odometry" and schemas["/clock"] == "rosgraph_msgs/msg/Clock"
    recorded = {(m.ros_msg.header.stamp.sec + m.ros_msg.header.stamp.nanosec * 1e-9,
                 m.ros_msg.pose.pose.position.x, m.ros_msg.pose.pose.position.z) for m in by_topic["/cf231/odom"]}
    # DDS discovery decides when the recorder's subscription starts (under load, up to seconds late): from
    # its first message on, it must hold what was sent, and it must have started while the vehicle settled
    start = min(stamp for stamp, _, _ in recorded)
    sent = {(r[0], r[1], r[3]) for r in received_odometry if r[0] >= start}
    assert start <= SETTLE_S and len(recorded & sent) > 0.9 * len(sent), (start, len(recorded & sent), len(sent))
    log_times = [m.log_time_ns for m in by_topic["/cf231/odom"]]
    assert log_times == sorted(log_times) and len(by_topic["/cf231/cmd_vel_legacy"]) > 1000


def _odom_row(msg: Odometry) -> tuple:
    p, s = msg.pose.pose.position, msg.header.stamp
    return (s.sec + s.nanosec * 1e-9, p.x, p.y, p.z)
