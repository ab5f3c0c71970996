"""Tick latency of quadrotor_policy_node through real ROS 2 (rclpy Jazzy, Fast DDS) at 100 Hz.

A robot stand-in in this process publishes nav_msgs/Odometry at the control rate; the policy node runs
as its own process (the hover bundle from tests/ros2/data) with `publish_tick_timing`. Reported per tick:
- tick latency: from the tick's start (it takes the latest state) to its command being published;
- state to command: from the state's arrival in the node to the command published (adds the wait for
  the next timer tick, up to one period, since the node ticks on a timer, not on arrival);
- round trip: from publishing the state here to receiving the command here;
- missed ticks: timer intervals longer than 1.5 periods.

Run with .venv-ros (make ros-venv): `.venv-ros/bin/python bench/ros2_latency.py [--ticks 10000]`. It
re-runs itself inside a loopback-only network namespace, prints a table and writes
bench/results/ros2_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ros2_ws" / "src" / "robo_rl_ros"
BUNDLE = ROOT / "tests" / "ros2" / "data" / "hover_bundle"
NETNS = ROOT / "ros2_ws" / "scripts" / "netns_run.sh"


def main() -> None:
    """Parse arguments, measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ros2_latency.json")
    args = parser.parse_args()
    if os.environ.get("ROBO_RL_IN_NETNS") != "1":
        os.execv(str(NETNS), [str(NETNS), sys.executable, *sys.argv])
    results = measure(args.ticks)
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


def measure(ticks: int) -> dict:
    """Run the node and the robot stand-in for `ticks` control ticks; latency statistics in ms."""
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
                      "    state_source: odom\n    publish_tick_timing: true\n    state_timeout: 0.1\n")
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

    def on_command(msg: Twist) -> None:
        if msg.linear.z > 0 and last_sent["t"]:
            round_trips.append(time.monotonic() - last_sent["t"])

    robot.create_subscription(Twist, "/cf231/cmd_vel_legacy", on_command, COMMAND_QOS)
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "world", "cf231"
    msg.pose.pose.position.z, msg.pose.pose.orientation.w = 1.0, 1.0

    def send() -> None:
        msg.header.stamp = robot.get_clock().now().to_msg()
        pub.publish(msg)
        last_sent["t"] = time.monotonic()

    robot.create_timer(period, send)  # the robot's state stream; between events this process sleeps
    try:
        warmup = time.monotonic() + 20.0
        while len(timing) < 100 and time.monotonic() < warmup:  # node started and flying
            rclpy.spin_once(robot, timeout_sec=0.1)
        timing.clear()
        round_trips.clear()
        while len(timing) < ticks:
            rclpy.spin_once(robot, timeout_sec=0.1)
    finally:
        node.send_signal(2)
        node.wait(10)
        robot.destroy_node()
        rclpy.shutdown()
    data = np.array(timing[:ticks])
    tick_ms = (data[:, 2] - data[:, 1]) * 1e3
    state_ms = (data[:, 2] - data[:, 0]) * 1e3
    intervals = np.diff(data[:, 1])
    return {
        "ticks": int(len(data)), "control_hz": rate, "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "rmw": "rmw_fastrtps_cpp (ros-jazzy-rclpy 7.1.6 wheels)",
        "tick_latency_ms": _stats(tick_ms), "state_to_command_ms": _stats(state_ms),
        "round_trip_ms": _stats(np.array(round_trips) * 1e3),
        "tick_interval_ms": _stats(intervals * 1e3),
        "missed_ticks": int(np.sum(intervals > 1.5 * period)),
    }


def _stats(values: np.ndarray) -> dict:
    return {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max()), "count": int(len(values))}


def table(results: dict) -> str:
    """The figures as a text table."""
    rows = [("tick latency (tick start -> command published)", results["tick_latency_ms"]),
            ("state received -> command published", results["state_to_command_ms"]),
            ("round trip (state sent -> command received)", results["round_trip_ms"]),
            ("timer interval", results["tick_interval_ms"])]
    lines = [f"quadrotor_policy_node at {results['control_hz']:g} Hz, {results['ticks']} ticks, "
             f"{results['cpus']} CPUs, {results['rmw']}",
             f"{'':50s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}"]
    lines += [f"{name:50s} {s['p50']:8.3f} {s['p99']:8.3f} {s['max']:8.3f}" for name, s in rows]
    lines.append(f"missed ticks (interval > 1.5 periods): {results['missed_ticks']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
