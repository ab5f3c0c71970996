"""Learning parity of `runner=ray` with the local runner: the default hover recipe on both, per seed, and the
env steps (and wall time) to the first evaluation at >= 95% success.

    .venv/bin/python bench/ray_learning.py [--seeds 0 1 2] [--steps 400000] [--actors 2]

Each run is `python -m robo_rl.train seed=S total_env_steps=N` (evaluations every 25k env steps, on the
same 100 seeded episodes), once as it is and once with `runner=ray runner.num_actors=A` (a Ray cluster on
this machine, one thread per actor and for the learner: on a 2-core machine the actors, the evaluator and
the learner share the cores, so the Ray wall times say little about a cluster). Target: the Ray runs reach
95% within 1.5x the local runs' env steps. Writes bench/results/ray_learning.json and
bench/results/ray_learning.png (success against env steps, both runners, every seed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from peers import BenchArgumentParser, Positive, Seed, machine_line, write_results

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
TARGET = 0.95


def train(runner: str, seed: int, steps: int, actors: int) -> dict[str, Any]:
    """One training run's summary (trained now, or read back if this script trained it already)."""
    run = RESULTS / "ray_learning" / f"{runner}_seed{seed}_{steps}"
    summary = run / "summary.json"
    if not summary.is_file():
        extra = ([] if runner == "local" else
                 ["runner=ray", f"runner.num_actors={actors}", "runner.actor_threads=1", "torch_threads=1"])
        command = [sys.executable, "-m", "robo_rl.train", f"seed={seed}", f"total_env_steps={steps}",
                   "logging.progress_bar=false", f"hydra.run.dir={run}", *extra]
        print(" ".join(command), flush=True)
        subprocess.run(command, cwd=ROOT.parent, check=True, stdout=subprocess.DEVNULL)
    return json.loads(summary.read_text())


def first_success(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first evaluation at or above TARGET, or None."""
    return next((entry for entry in history if entry["success_rate"] >= TARGET), None)


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, action=Seed, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, action=Positive, default=400_000)
    parser.add_argument("--actors", type=int, action=Positive, default=2)
    args = parser.parse_args()
    print(machine_line())
    rows = []
    for seed in args.seeds:
        row: dict[str, Any] = {"seed": seed}
        for runner in ("local", "ray"):
            summary = train(runner, seed, args.steps, args.actors)
            first = first_success(summary["history"])
            row[runner] = {"first_env_steps": first and first["env_steps"], "first_wall_seconds": first and first["wall_seconds"],
                           "best": max(entry["success_rate"] for entry in summary["history"]),
                           "final": summary["history"][-1]["success_rate"], "wall_seconds": summary["wall_seconds"],
                           "history": [(e["env_steps"], e["success_rate"]) for e in summary["history"]]}
        local, ray = row["local"]["first_env_steps"], row["ray"]["first_env_steps"]
        row["ratio"] = ray / local if local and ray else None
        rows.append(row)
    print(f"\nfirst evaluation at >= {TARGET:.0%} success (env steps / wall s), {args.actors} Ray actors")
    print(f"{'seed':>4}  {'local':>18}  {'ray':>18}  {'ray/local':>9}  {'best local/ray':>14}")
    for row in rows:
        cells = [f"{row[r]['first_env_steps'] or 'never':>9} / {row[r]['first_wall_seconds'] or 0:5.0f} s" for r in ("local", "ray")]
        ratio = f"{row['ratio']:.2f}" if row["ratio"] else "-"
        print(f"{row['seed']:>4}  {cells[0]:>18}  {cells[1]:>18}  {ratio:>9}  "
              f"{row['local']['best']:>6.0%} / {row['ray']['best']:<6.0%}")
    met = all(row["ratio"] is not None and row["ratio"] <= 1.5 for row in rows)
    print(f"target (ray within 1.5x the local env steps on every seed): {'met' if met else 'not met'}")
    write_results(RESULTS / "ray_learning.json", {"steps": args.steps, "actors": args.actors, "rows": rows})
    plot(rows, RESULTS / "ray_learning.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Success rate against env steps, both runners, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for row in rows:
        for runner, style in (("local", "-"), ("ray", "--")):
            steps, success = zip(*row[runner]["history"])
            ax.plot(steps, success, style, label=f"{runner}, seed {row['seed']}")
    ax.axhline(TARGET, color="grey", lw=0.8)
    ax.set_xlabel("env steps")
    ax.set_ylabel("evaluation success")
    ax.set_title("hover: local runner vs runner=ray")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
