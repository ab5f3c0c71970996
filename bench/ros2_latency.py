"""Tick latency of quadrotor_policy_node through real ROS 2 (rclpy Jazzy, Fast DDS) at 100 Hz.

A robot stand-in in this process publishes nav_msgs/Odometry at the control rate; the policy node runs
as its own process (the hover bundle from tests/ros2/data) with `publish_tick_timing` and ticks on each
state's arrival (`tick_on_state`, its default). Reported per tick:
- state to command: from the state's arrival in the node to its command being published (the node's own
  latency: observation, inference, safety filter, conversion, publish);
- round trip: from publishing the state here to receiving the command here (adds DDS both ways and this
  process's wake-up);
- missed ticks: states the node answered with no tick (no tick received the state before the next one
  was sent), and tick gaps: intervals between the node's ticks longer than 1.5 periods. Ticking on each
  state, the node's tick intervals follow the state stream's: the stand-in's own send intervals are
  reported beside them, so a gap that the state source made shows as such.

Measured twice in one run: with the node at normal priority (`realtime_priority: 0`) and under SCHED_FIFO
(`realtime_priority: 50`, as config/quadrotor_policy.yaml sets for a robot; where this user may not use
SCHED_FIFO the node says so and that row repeats normal scheduling).

Run with .venv-ros (make ros-venv): `.venv-ros/bin/python bench/ros2_latency.py [--ticks 10000]
[--busy-loops 1]` (busy loops: processes spinning on the CPUs meanwhile, a loaded robot computer). It
re-runs itself inside a loopback-only network namespace, prints a table and writes
bench/results/ros2_latency.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from peers import BenchArgumentParser, NonNegative, Positive

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ros2_ws" / "src" / "robo_rl_ros"
BUNDLE = ROOT / "tests" / "ros2" / "data" / "hover_bundle"
NETNS = ROOT / "ros2_ws" / "scripts" / "netns_run.sh"


def main() -> None:
    """Parse arguments, measure, print and save."""
    parser = BenchArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, action=Positive, default=10_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ros2_latency.json")
    parser.add_argument("--priorities", type=int, nargs="+", default=[0, 50],
                        help="realtime_priority values to measure (0: normal scheduling)")
    parser.add_argument("--busy-loops", type=int, action=NonNegative, default=0,
                        help="processes spinning on the CPUs meanwhile, as other work on a robot computer would")
    args = parser.parse_args()
    if os.environ.get("ROBO_RL_IN_NETNS") != "1":
        os.execv(str(NETNS), [str(NETNS), sys.executable, *sys.argv])
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy_loops)]
    try:
        runs = []
        for priority in args.priorities:
            print(f"measuring {args.ticks} ticks with realtime_priority {priority} ...", flush=True)
            runs.append(measure(args.ticks, priority))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    results = {key: runs[0][key] for key in ("ticks", "control_hz", "machine", "cpus", "rmw")}
    results["busy_loops"] = args.busy_loops
    results["runs"] = [{k: v for k, v in run.items() if k not in results} for run in runs]
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


def measure(ticks: int, priority: int) -> dict:
    """Run the node (at `realtime_priority` `priority`) and the robot stand-in for `ticks` control ticks;
    latency statistics in ms."""
    import rclpy
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Float64MultiArray

    sys.path.insert(0, str(PACKAGE))
    from robo_rl_ros.qos import COMMAND_QOS, SENSOR_QOS

    rate = json.loads((BUNDLE / "policy.json").read_text())["control_hz"]
    period = 1.0 / rate
    params = Path(tempfile.mkstemp(suffix=".yaml")[1])
    params.write_text(f"quadrotor_policy_node:\n  ros__parameters:\n    bundle_path: {BUNDLE}\n"
                      "    state_source: odom\n    odom_convention: rep105\n    publish_tick_timing: true\n    state_timeout: 0.1\n"
                      f"    realtime_priority: {priority}\n    crazyswarm2_server_node: latency_robot\n")
    env = dict(os.environ, PYTHONPATH=f"{PACKAGE}:{os.environ.get('PYTHONPATH', '')}", OMP_NUM_THREADS="1")
    node = subprocess.Popen([sys.executable, "-m", "robo_rl_ros.quadrotor_policy_node", "--ros-args",
                             "--params-file", str(params)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    rclpy.init()
    robot = rclpy.create_node("latency_robot")
    timing: list[tuple[float, float, float]] = []
    round_trips: list[float] = []
    pub = robot.create_publisher(Odometry, "/cf231/odom", SENSOR_QOS)
    robot.create_subscription(Float64MultiArray, "/quadrotor_policy_node/tick_timing",
                              lambda m: timing.append(tuple(m.data)), COMMAND_QOS)
    last_sent = {"t": 0.0}
    sent: list[float] = []  # monotonic send times of the states

    def on_command(msg: Twist) -> None:
        if msg.linear.z > 0 and last_sent["t"]:
            round_trips.append(time.monotonic() - last_sent["t"])

    robot.create_subscription(Twist, "/cf231/cmd_vel_legacy", on_command, COMMAND_QOS)
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "world", "cf231"
    msg.pose.pose.position.z, msg.pose.pose.orientation.w = 1.0, 1.0

    def send() -> None:
        msg.header.stamp = robot.get_clock().now().to_msg()
        last_sent["t"] = time.monotonic()  # before publishing: this process may be preempted inside publish
        sent.append(last_sent["t"])
        pub.publish(msg)

    robot.create_timer(period, send)  # the robot's state stream; between events this process sleeps
    try:
        warmup = time.monotonic() + 20.0
        while len(timing) < 100 and time.monotonic() < warmup:  # node started and flying
            rclpy.spin_once(robot, timeout_sec=0.1)
        scheduling = _scheduling(node.pid)
        timing.clear()
        round_trips.clear()
        sent.clear()
        while len(timing) < ticks:
            rclpy.spin_once(robot, timeout_sec=0.1)
    finally:
        node.send_signal(2)
        node.wait(10)
        robot.destroy_node()
        rclpy.shutdown()
        params.unlink(missing_ok=True)
    data = np.array(timing[:ticks])
    state_ms = (data[:, 2] - data[:, 0]) * 1e3
    intervals = np.diff(data[:, 1])
    sends = np.array(sent)
    sends = sends[(sends >= data[0, 0]) & (sends <= data[-1, 0])]  # the states these ticks could answer
    # state i is answered when some tick received a state in [sent_i, sent_i+1)
    answered = np.searchsorted(data[:, 0], sends[1:]) > np.searchsorted(data[:, 0], sends[:-1])
    return {
        "ticks": int(len(data)), "control_hz": rate, "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "rmw": "rmw_fastrtps_cpp (ros-jazzy-rclpy 7.1.6 wheels)",
        "realtime_priority": priority, "scheduling": scheduling, "state_to_command_ms": _stats(state_ms),
        "round_trip_ms": _stats(np.array(round_trips) * 1e3),
        "tick_interval_ms": _stats(intervals * 1e3),
        "state_interval_ms": _stats(np.diff(sends) * 1e3),
        "missed_ticks": int(np.sum(~answered)),
        "tick_gaps": int(np.sum(intervals > 1.5 * period)),
        "state_gaps": int(np.sum(np.diff(sends) > 1.5 * period)),
    }


def _scheduling(pid: int) -> str:
    """The node process's scheduling policy as the kernel reports it, e.g. "SCHED_FIFO 50"."""
    if os.sched_getscheduler(pid) == os.SCHED_FIFO:
        return f"SCHED_FIFO {os.sched_getparam(pid).sched_priority}"
    return "normal (SCHED_OTHER)"


def _stats(values: np.ndarray) -> dict:
    return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max()), "count": int(len(values))}


def table(results: dict) -> str:
    """The figures as a text table, one block per scheduling policy."""
    lines = [f"quadrotor_policy_node at {results['control_hz']:g} Hz, {results['ticks']} ticks per run, "
             f"{results['cpus']} CPUs, {results['busy_loops']} busy loop(s) beside it, {results['rmw']}",
             f"{'':50s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}"]
    for run in results["runs"]:
        lines.append(f"node scheduling: {run['scheduling']} (realtime_priority {run['realtime_priority']})")
        rows = [("  state received -> command published", run["state_to_command_ms"]),
                ("  round trip (state sent -> command received)", run["round_trip_ms"]),
                ("  tick interval", run["tick_interval_ms"]),
                ("  state interval (the robot stand-in's sends)", run["state_interval_ms"])]
        lines += [f"{name:50s} {s['p50']:8.3f} {s['p99']:8.3f} {s['max']:8.3f}" for name, s in rows]
        lines.append(f"  missed ticks (states with no tick): {run['missed_ticks']}; gaps > 1.5 periods between "
                     f"ticks: {run['tick_gaps']}, between the states sent: {run['state_gaps']}")
    return "\n".join(lines)

if __name__ == "__main__":
    main()
