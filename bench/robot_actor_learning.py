"""HIL-SERL through ROS 2: pick-cube learned from what a robot's actor node sends, with the arm sim bridge as
the robot and a scripted person at a (simulated) SpaceMouse, 20 demos, a sparse success reward.

    ros2_ws/scripts/netns_run.sh .venv-ros/bin/python bench/robot_actor_learning.py [--steps 20000] [--seed 0]

Everything is the real chain, on this machine: a Ray cluster (the learner's Python), the learner
(`python -m robo_rl.train +experiment=pick_cube_robot`: no actors of its own, sparse reward, the 20 demos of
`python -m robo_rl.record env=pick_cube +env.overrides.dense=false dataset=pick_cube/scripted-sparse-v0`,
recorded first if missing), and, built by colcon, arm_sim_bridge_node (a new cube placement per reset, real
time), robot_actor_node (the learner's actor, interventions from spacenav topics, the bridge's success topic
as the detector, the bridge's ~/reset between episodes) and scripted_spacenav_node (the person). Run it
inside the loopback-only network namespace (the command above) so that DDS stays on this machine.

Reports the robot's evaluation episodes (every 3rd episode: the actor's mean action, the person keeps out; a
success only without a takeover), the robot's training episodes (success, the person's share of the ticks)
and the learner's evaluations (20 seeded episodes in its own simulation every 2,500 env steps) against env
steps. Target: >= 90% success within 20k env steps, measured on the robot over its last 10 evaluation
episodes (HIL-SERL's measure: the policy alone on the robot). Writes bench/results/robot_actor_learning_seed<S>.json
and .png (the run and the nodes' logs in bench/results/robot_actor_learning/seed<S>_<steps>[_logs]).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from peers import BenchArgumentParser, Positive, Seed

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUNTIME_TESTS = ROOT / "tests" / "ros2" / "runtime"


def helpers() -> Any:
    """The ROS runtime tests' helpers (the learner's Python, the Ray head, installed configs); they need rclpy,
    which the run has and its report, in the learner's Python, does not."""
    if str(RUNTIME_TESTS) not in sys.path:
        sys.path.insert(0, str(RUNTIME_TESTS))
    import ros_helpers

    return ros_helpers
BUNDLE = ROOT / "tests" / "ros2" / "data" / "pick_bundle"  # the task's observation layout and kinematics
DEMOS = "pick_cube/scripted-sparse-v0"
INBOX = "robot"
TARGET = 0.9


def record_demos() -> None:
    """The 20 sparse-reward demos, unless recorded already."""
    root = Path(os.environ.get("MINARI_DATASETS_PATH", Path.home() / ".minari" / "datasets"))
    if not (root / DEMOS).is_dir():
        subprocess.run([helpers().LEARNER_PYTHON, "-m", "robo_rl.record", "env=pick_cube", "+env.overrides.dense=false",
                        f"dataset={DEMOS}", "episodes=20", f"hydra.run.dir={tempfile.mkdtemp()}"], cwd=ROOT, check=True)


def build_workspace(base: Path) -> Path:
    """colcon build of ros2_ws into `base`; the install folder."""
    colcon = str(Path(sys.executable).with_name("colcon"))
    subprocess.run([colcon, "--log-base", str(base / "log"), "build", "--base-paths", str(ROOT / "ros2_ws" / "src"),
                    "--build-base", str(base / "build"), "--install-base", str(base / "install")],
                   cwd=base, check=True, stdout=subprocess.DEVNULL)
    return base / "install"


def start_node(install: Path, executable: str, params: str, overrides: dict[str, Any], log: Path) -> subprocess.Popen:
    """An installed robo_rl_ros executable with its installed parameter file and `-p` overrides."""
    values = " ".join(f"-p {key}:={json.dumps(value) if isinstance(value, str) else value}"
                      for key, value in overrides.items())
    command = (f". {install}/setup.bash && exec {install}/robo_rl_ros/lib/robo_rl_ros/{executable} "
               f"--ros-args --params-file {helpers().config(install, params)} {values}")
    return subprocess.Popen(["bash", "-c", command], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"))


EPISODE = re.compile(r"(evaluation )?episode \d+: (success|no success) after (\d+) ticks, (\d+) intervened; "
                     r"(\d+) transitions")
WINDOW = 10  # robot evaluation episodes per success rate


def logs_of(run: Path) -> Path:
    """Where the learner's and the nodes' output of `run` go."""
    return run.parent / f"{run.name}_logs"


def robot_episodes(actor_log: Path) -> list[tuple[int, bool, float, bool]]:
    """(env steps, success, share of ticks intervened, evaluation) of each robot episode, from the actor
    node's log; an evaluation episode's success needs no takeover (robo_rl_ros.core.robot_actor)."""
    episodes = []
    for m in EPISODE.finditer(actor_log.read_text()):
        evaluation, intervened = bool(m.group(1)), int(m.group(4))
        success = m.group(2) == "success" and not (evaluation and intervened)
        episodes.append((int(m.group(5)), success, intervened / max(int(m.group(3)), 1), evaluation))
    return episodes


def trailing_rates(flags: list[bool], window: int = WINDOW) -> list[float]:
    """The success rate over each flag's last `window` flags (from the `window`-th on)."""
    return [sum(flags[i + 1 - window:i + 1]) / window for i in range(window - 1, len(flags))]


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, action=Positive, default=20_000)
    parser.add_argument("--seed", type=int, action=Seed, default=0)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)  # the run's report, in the learner's Python
    args = parser.parse_args()
    if args.report:
        return report(args.report, args.steps, args.seed, float(os.environ["ROBOT_BENCH_WALL_S"]))
    if not os.environ.get("ROBO_RL_IN_NETNS"):
        raise SystemExit("run it through ros2_ws/scripts/netns_run.sh: DDS traffic must stay on this machine")
    record_demos()
    run = RESULTS / "robot_actor_learning" / f"seed{args.seed}_{args.steps}"
    out = logs_of(run)
    shutil.rmtree(run, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="robo_rl_bench_ws-"))
    processes: list[subprocess.Popen] = []
    try:
        install = build_workspace(base)
        head, address = helpers().start_ray_head(num_cpus=1)  # the learner's evaluator; the inbox takes no CPU
        processes.append(head)
        learner = subprocess.Popen(
            [helpers().LEARNER_PYTHON, "-m", "robo_rl.train", "+experiment=pick_cube_robot", f"seed={args.seed}",
             f"runner.address={address}", f"runner.inbox={INBOX}", f"total_env_steps={args.steps}",
             "logging.progress_bar=false", f"hydra.run.dir={run}"],
            cwd=ROOT, stdout=(out / "learner.log").open("w"), stderr=subprocess.STDOUT)
        processes.append(learner)
        bundle = {"bundle_path": str(BUNDLE)}
        processes += [
            start_node(install, "arm_sim_bridge_node", "sim_arm_bridge.yaml",
                       {**bundle, "seed": 1000 * args.seed, "new_placement_on_reset": True}, out / "bridge.log"),
            start_node(install, "scripted_spacenav_node", "scripted_spacenav.yaml", bundle, out / "person.log"),
            start_node(install, "robot_actor_node", "sim_robot_actor.yaml",
                       {**bundle, "ray_address": address, "inbox": INBOX, "seed": args.seed}, out / "actor.log")]
        start = time.monotonic()
        while learner.poll() is None:
            if any(p.poll() is not None for p in processes[2:]):
                raise SystemExit(f"a node exited: see {out}/*.log")
            time.sleep(5)
        wall = time.monotonic() - start
        if learner.returncode != 0:
            raise SystemExit(f"the learner failed ({learner.returncode}): see {out / 'learner.log'}")
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGINT if process.args[0] == "bash" else signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(base, ignore_errors=True)
    subprocess.run([helpers().LEARNER_PYTHON, __file__, "--report", str(run), "--steps", str(args.steps), "--seed",
                    str(args.seed)], check=True, env=dict(os.environ, ROBOT_BENCH_WALL_S=str(wall)))


def report(run: Path, steps: int, seed: int, wall: float) -> None:
    """Read the run back, print the figures, write the JSON and the plot."""
    summary = json.loads((run / "summary.json").read_text())
    everything = robot_episodes(logs_of(run) / "actor.log")
    episodes = [e[:3] for e in everything if not e[3]]  # training episodes: exploration and the person
    tests = [(steps_then, success) for steps_then, success, _, evaluation in everything if evaluation]
    rates = trailing_rates([success for _, success in tests])
    robot_curve = [{"env_steps": steps_then, "success_rate": rate} for (steps_then, _), rate in zip(tests[WINDOW - 1:], rates)]
    first_on_robot = next((e for e in robot_curve if e["success_rate"] >= TARGET), None)
    evaluations = [{"env_steps": e["env_steps"], "success_rate": e["success_rate"]} for e in summary["history"]]
    first = next((e for e in evaluations if e["success_rate"] >= TARGET), None)
    last = episodes[-20:]
    result = {"steps": steps, "seed": seed, "wall_seconds": wall,
              "robot_evaluation_episodes": len(tests), "robot_evaluations": robot_curve,
              "robot_evaluation_success_last_10": robot_curve[-1]["success_rate"] if robot_curve else None,
              "robot_evaluation_first_at_target": first_on_robot,
              "evaluations": evaluations, "first_at_target": first, "robot_episodes": len(episodes),
              "robot_success_last_20": sum(success for _, success, _ in last) / max(len(last), 1),
              "robot_intervention_share_last_20": sum(share for _, _, share in last) / max(len(last), 1),
              "intervention_steps": summary["intervention_steps"], "env_steps": summary["env_steps"]}
    (RESULTS / f"robot_actor_learning_seed{seed}.json").write_text(json.dumps(result, indent=2))
    plot(evaluations, robot_curve, episodes, RESULTS / f"robot_actor_learning_seed{seed}.png")
    last_10 = result["robot_evaluation_success_last_10"]
    print(f"robot evaluation episodes (the policy alone): {len(tests)}, the last {WINDOW} "
          + (f"{100 * last_10:.0f}%" if last_10 is not None else "not yet run")
          + f"; trailing {WINDOW} first >= {100 * TARGET:.0f}% at "
          + (f"{first_on_robot['env_steps']} env steps" if first_on_robot else "never"))
    print("learner evaluations (success, 20 simulated episodes): "
          + ", ".join(f"{e['env_steps']}: {100 * e['success_rate']:.0f}%" for e in evaluations)
          + f"; first >= {100 * TARGET:.0f}% at {first['env_steps'] if first else 'never'}")
    print(f"robot training episodes: {len(episodes)}, last 20 {100 * result['robot_success_last_20']:.0f}% success "
          f"({100 * result['robot_intervention_share_last_20']:.0f}% of their ticks intervened); "
          f"{summary['intervention_steps']} of {summary['env_steps']} steps intervened; {wall:.0f} s")


def plot(evaluations: list[dict[str, Any]], robot_curve: list[dict[str, Any]], episodes: list[tuple[int, bool, float]],
         path: Path) -> None:
    """The robot's evaluated success, the learner's, and the robot's training episodes' success and
    intervention share (20-episode means), against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot([e["env_steps"] for e in robot_curve], [e["success_rate"] for e in robot_curve], lw=2.5,
            label=f"robot's evaluation episodes (policy alone, last {WINDOW})")
    ax.plot([e["env_steps"] for e in evaluations], [e["success_rate"] for e in evaluations], "o-",
            label="learner's evaluation (20 sim episodes)")
    if episodes:
        steps = np.array([s for s, _, _ in episodes])
        window = np.ones(min(20, len(episodes))) / min(20, len(episodes))
        ax.plot(steps[len(window) - 1:], np.convolve([float(success) for _, success, _ in episodes], window, "valid"),
                label="robot's training episodes: success (20-episode mean)")
        ax.plot(steps[len(window) - 1:], np.convolve([i for _, _, i in episodes], window, "valid"), "--",
                label="robot's training episodes: share of ticks intervened")
    ax.axhline(TARGET, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="env steps (robot ticks)", ylabel="rate", ylim=(-0.02, 1.02),
           title="pick-cube through robot_actor_node (20 demos, sparse reward)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
