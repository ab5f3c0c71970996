"""The native quadrotor step of two source trees (before and after a change), timed in alternating rounds.

Each round runs a fresh process in each tree (`bench/sim_speed.py`'s `bench_vector`, the RL loop's step:
observation, reward, termination and autoreset included) for every case below, before then after; the figure
is the median over rounds of after / before, which this machine's drift (its speed wanders within minutes)
moves least. Needs an idle machine: a busy core makes a 2-thread step wait on its slowest thread.

    git worktree add /tmp/before <commit>
    python bench/native_step_paired.py --before /tmp/before [--after .] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from peers import BenchArgumentParser, Positive, Seed, results_file, write_results

ROOT = Path(__file__).resolve().parent.parent
# (task, envs, privileged): the large batch the speed table leads with, and the recipe's size with the critic's
# privileged observations, as robo_rl.train steps it
CASES = (("hover", 8192, False), ("figure_eight", 8192, False), ("hover", 32, True))
PROBE = """
import json, sys
sys.path.insert(0, "bench")
import sim_speed
sim_speed.TASK = {task!r}
row = sim_speed.bench_vector("torch", {envs}, {seconds}, {repeats}, compile="native", privileged={privileged})
print(json.dumps(row["env_steps_per_s"]))
"""


def rate(tree: Path, task: str, envs: int, privileged: bool, seconds: float, repeats: int) -> float:
    """Env steps/s of the native step in `tree` (a fresh process there, importing that tree's sim)."""
    code = PROBE.format(task=task, envs=envs, seconds=seconds, repeats=repeats, privileged=privileged)
    process = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False)
    if process.returncode != 0:
        raise SystemExit(f"the native step in {tree} failed:\n{process.stderr[-2000:]}")
    return float(process.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time both trees and print each case's rates and median ratio."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="source tree before the change")
    parser.add_argument("--after", type=Path, default=ROOT, help="source tree after it (default: this one)")
    parser.add_argument("--rounds", type=int, action=Positive, default=5)
    parser.add_argument("--seconds", type=float, action=Positive, default=1.0)
    parser.add_argument("--repeats", type=int, action=Positive, default=3)
    parser.add_argument("--json", type=results_file, default=None)
    args = parser.parse_args()
    for tree in (args.before, args.after):
        if not (tree / "sim" / "quadrotor" / "native_step.py").is_file() or not (tree / "bench" / "sim_speed.py").is_file():
            parser.error(f"{tree} is not a robo-rl source tree (no sim/quadrotor/native_step.py or bench/sim_speed.py)")
    results = []
    for task, envs, privileged in CASES:
        label = f"{task}, N={envs}{', privileged' if privileged else ''}"
        rounds = []
        for index in range(args.rounds):
            before = rate(args.before, task, envs, privileged, args.seconds, args.repeats)
            after = rate(args.after, task, envs, privileged, args.seconds, args.repeats)
            rounds.append({"before": before, "after": after, "ratio": after / before})
            print(f"  {label}, round {index + 1}: before {before:13,.0f}  after {after:13,.0f} env steps/s  "
                  f"({after / before:.3f})", flush=True)
        ratio = statistics.median(r["ratio"] for r in rounds)
        results.append({"case": label, "rounds": rounds, "median_ratio": ratio})
        print(f"{label}: after / before = {ratio:.3f} (median of {args.rounds} paired rounds)", flush=True)
    if args.json:
        write_results(args.json, {"before": str(args.before), "after": str(args.after), "cases": results})


if __name__ == "__main__":
    main()
