"""Pick-cube learning with and without demonstrations and interventions, in one run of this script.

Records 20 scripted demonstrations (Minari, into bench/results/minari) if they are missing, then trains
`+experiment=pick_cube_hil` three ways, two at a time on one thread each: no demos and no interventions,
demos only, demos + scripted interventions. Prints env steps and wall-clock to the first evaluation at
>= 90% success and the best success of each, re-evaluates each run's best policy on 100 seeded episodes,
and writes bench/results/arm_learning.png (success against steps and wall-clock) and .json.

    python bench/arm_learning.py [--seed 0] [--steps 60000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from peers import BenchArgumentParser, Positive, Seed

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
VARIANTS = {
    "no demos": ["demos=null", "intervention=none"],
    "20 demos": ["intervention=none"],
    "20 demos + scripted interventions": [],
}


def main() -> None:
    """Record, train the variants, report."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, action=Seed, default=0)
    parser.add_argument("--steps", type=int, action=Positive, default=60000)
    args = parser.parse_args()
    env = {**os.environ, "MINARI_DATASETS_PATH": str(RESULTS / "minari"), "OMP_NUM_THREADS": "1"}
    python = sys.executable
    if not (RESULTS / "minari" / "pick_cube" / "scripted-v0").exists():
        shutil.rmtree(RESULTS / "record", ignore_errors=True)  # a failed recording's record: record refuses it
        subprocess.run([python, "-m", "robo_rl.record", "env=pick_cube", "episodes=20", "seed=0",
                        f"hydra.run.dir={RESULTS / 'record'}"], check=True, env=env, cwd=ROOT.parent)
    runs = {label: RESULTS / "arm_learning" / f"{label.replace(' ', '_').replace('+', 'and')}_seed{args.seed}"
            for label in VARIANTS}
    labels = list(VARIANTS)
    for run in runs.values():  # the previous measurement's runs: train refuses to overwrite them
        shutil.rmtree(run, ignore_errors=True)
    for batch in (labels[:2], labels[2:]):  # two runs at a time: one per core
        jobs = [subprocess.Popen([python, "-m", "robo_rl.train", "+experiment=pick_cube_hil", f"seed={args.seed}",
                                  f"total_env_steps={args.steps}", "logging.progress_bar=false",
                                  f"hydra.run.dir={runs[label]}", *VARIANTS[label]], env=env, cwd=ROOT.parent)
                for label in batch]
        for job in jobs:
            if job.wait():
                raise SystemExit(f"training failed: {job.args}")
    sys.path.insert(0, str(ROOT.parent))
    from robo_rl.evaluate import evaluate_run
    from robo_rl.plotting import plot_comparison

    histories, rows = {}, []
    for label, run in runs.items():
        history = json.loads((run / "summary.json").read_text())["history"]
        histories[label] = history
        first = next((h for h in history if h["success_rate"] >= 0.9), None)
        final = evaluate_run(run, episodes=100)
        rows.append({"variant": label, "steps_to_90": first and first["env_steps"],
                     "seconds_to_90": first and first["wall_seconds"],
                     "best_success_20_episodes": max(h["success_rate"] for h in history),
                     "best_policy_success_100_episodes": final["success_rate"],
                     "intervention_steps": history[-1].get("intervention_steps", 0), "run": str(run)})
    print(f"\n{'variant':36s} {'steps to 90%':>13s} {'time to 90%':>12s} {'best policy, 100 episodes':>26s}")
    for r in rows:
        steps = f"{r['steps_to_90']:,}" if r["steps_to_90"] else "-"
        time_ = f"{r['seconds_to_90'] / 60:.1f} min" if r["seconds_to_90"] else "-"
        print(f"{r['variant']:36s} {steps:>13s} {time_:>12s} {100 * r['best_policy_success_100_episodes']:25.0f}%")
    plot_comparison(histories, RESULTS / "arm_learning.png", title="pick-cube, 2-core CPU, one thread per run")
    (RESULTS / "arm_learning.json").write_text(json.dumps(rows, indent=2))
    print(f"wrote {RESULTS / 'arm_learning.png'} and .json")


if __name__ == "__main__":
    main()
