"""Time to the first student of `make train` that meets the robustness suite.

Runs `make train` (RUN=<folder> SEED=<seed>) with a checkpoint of the student at every evaluation, every 5
iterations (DISTILL_ARGS='checkpoint_every_evaluation=true checkpoint_keep=1000 eval.interval_iterations=5'; make
train evaluates every 10), then the robustness suite
(configs/robustness.yaml, held-out vehicles from moderate starts, as the README's table) on every checkpoint.
Prints, per checkpoint, the seconds since `make train` started (when the checkpoint was written), the
distillation's own seconds, and what the suite's checks say; then the first checkpoint at which all the checks
that can be made hold (a vehicle without a specialist has no ceiling to be near: n/a; an UNSURE, a miss within the
noise of the suite's starts, is not held), the first that no check refutes (UNSURE allowed), and the first from
which every later one holds them too. The specialists fly once, with the first checkpoint; their ceilings hold for every
checkpoint. Writes bench/results/time_to_suite.json.

    python bench/time_to_suite.py [--seed 0] [--specialists outputs/specialists] [--run <folder>] [--json <file>]

--run takes a folder that such a `make train` wrote instead of training (its seconds since the start: from the
first file it wrote, its config.yaml, so without the setup before the distillation).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, machine_line, results_file, write_results  # noqa: E402
from teacher_pool import run_reporting_errors  # noqa: E402

from robo_rl.checkpoint import list_checkpoints, load_checkpoint  # noqa: E402
from robo_rl.robustness import Suite, run_suite, suite_from_config, target_checks  # noqa: E402

DISTILL_ARGS = "checkpoint_every_evaluation=true checkpoint_keep=1000 eval.interval_iterations=5"


def train(run: Path, seed: int) -> float:
    """`make train` into `run` with a checkpoint at every evaluation; the wall time it started at."""
    if run.exists():
        sys.exit(f"--run {run} exists: give a new folder, or --run of a finished one to time it again")
    started = time.time()
    done = subprocess.run(["make", "-C", str(ROOT), "train", f"RUN={run.resolve()}", f"SEED={seed}",
                           f"DISTILL_ARGS={DISTILL_ARGS}"])
    if done.returncode != 0:
        sys.exit(f"make train stopped with status {done.returncode} (its output above)")
    print(f"make train: {time.time() - started:.0f} s")
    return started


def with_ceilings(report: dict, ceilings: dict, suite: Suite) -> dict:
    """`report` with the specialists' success rates of `ceilings` (cell key -> row) and its checks redone."""
    for row in report["cells"]:
        found = ceilings.get((row["vehicle"], row["start_set"], row["latency_steps"], row["wind"]))
        if found is not None:
            row["specialist_success_rate"], row["specialist"] = found["specialist_success_rate"], found["specialist"]
            row["specialist_successes"] = found.get("specialist_successes")
    report["checks"] = target_checks(report, suite)
    return report


def steady_from(rows: list[dict]) -> dict | None:
    """The first of `rows` (in training order) from which every row meets the suite (no FAIL), None if the last
    fails: the 100 starts per cell let single students pass or fail by a point or two, so the first that meets it
    can be followed by some that do not."""
    steady = None
    for row in rows:
        steady = (steady or row) if row["failed"] == row.get("unsure", 0) == 0 else None
    return steady


def main() -> None:
    """Train (or take --run), fly the suite on each checkpoint, print and write the times."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="make train's SEED")
    parser.add_argument("--run", type=Path, default=None,
                        help="the run folder (default: outputs/time_to_suite-<seed>-<time>, trained here)")
    parser.add_argument("--specialists", type=Path, default=None, help="make specialists' folder (the ceilings)")
    parser.add_argument("--json", type=results_file, default=ROOT / "bench" / "results" / "time_to_suite.json",
                        help="where the results go")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = OmegaConf.load(ROOT / "configs" / "robustness.yaml")
    config.held_out.start_set = "moderate"
    config.specialists_dir = None if args.specialists is None else str(args.specialists)
    suite = suite_from_config(config)  # a bad --specialists fails before the training
    if args.run is not None and args.run.exists():
        if not args.run.is_dir():
            sys.exit(f"--run {args.run} is not a folder: give a make train run's folder")
        run, started = args.run, None
    else:
        run = args.run or ROOT / "outputs" / f"time_to_suite-{args.seed}-{time.strftime('%Y%m%d_%H%M%S')}"
        started = train(run, args.seed)
    checkpoints = list_checkpoints(run)
    if len(checkpoints) < 2 or not (run / "config.yaml").is_file():
        sys.exit(f"--run {run} holds {len(checkpoints)} checkpoint(s)"
                 f"{'' if (run / 'config.yaml').is_file() else ' and no config.yaml'}: give a make train run made "
                 f"with DISTILL_ARGS='{DISTILL_ARGS}'")
    origin = started if started is not None else (run / "config.yaml").stat().st_mtime
    seed = args.seed if started is not None else int(OmegaConf.load(run / "config.yaml").seed)  # the run's own
    student_suite = suite_from_config({**OmegaConf.to_container(config), "specialists_dir": None})
    print(machine_line())
    print(f"{run}: {len(checkpoints)} students; seconds since {'make train started' if started else 'config.yaml'}")
    ceilings: dict = {}
    rows, first = [], None
    for index, path in enumerate(checkpoints):
        report = run_suite(run, suite if index == 0 else student_suite, checkpoint=str(path), device="cpu")
        if index == 0:
            ceilings = {(r["vehicle"], r["start_set"], r["latency_steps"], r["wind"]): r for r in report["cells"]
                        if r["specialist_success_rate"] is not None}
        report = with_ceilings(report, ceilings, suite)
        counters = load_checkpoint(path)["counters"]
        statuses = [c["status"] for c in report["checks"]]
        row = {"checkpoint": path.name, "seconds": path.stat().st_mtime - origin,
               "distill_seconds": counters["wall_seconds"], "env_steps": counters["env_steps"],
               "held_out": report["held_out"]["success_rate"], "passed": statuses.count("PASS"),
               "failed": statuses.count("FAIL"), "unsure": statuses.count("UNSURE"),
               "not_checked": statuses.count("n/a"),
               "failing": [f"{c['check'].split(':')[0]}: {c['detail']}" for c in report["checks"]
                           if c["status"] in ("FAIL", "UNSURE")]}
        rows.append(row)
        if first is None and row["failed"] == row["unsure"] == 0:
            first = row
        print(f"  {row['seconds']:6.0f} s (distill {row['distill_seconds']:5.0f} s, {row['env_steps']:>9,} env steps): "
              f"held-out {100 * row['held_out']:3.0f}%, {row['passed']} PASS, {row['failed']} FAIL, "
              f"{row['unsure']} UNSURE, {row['not_checked']} n/a"
              + (f" ({'; '.join(row['failing'])})" if row["failing"] else ""), flush=True)
    since = 'make train started' if started else 'config.yaml'
    steady = steady_from(rows)
    # no miss beyond the noise of the suite's starts: the UNSURE ones may meet the checks, which 100 starts cannot tell
    unrefuted = next((row for row in rows if row["failed"] == 0), None)
    print("first student that no check refutes (FAIL; UNSURE allowed): "
          + ("none" if unrefuted is None else f"{unrefuted['checkpoint']}, {unrefuted['seconds']:.0f} s since {since}"))
    if first is None:
        print("no student meets every check that can be made")
    else:
        print(f"first student meeting every check that can be made ({first['not_checked']} n/a): {first['checkpoint']}, "
              f"{first['seconds']:.0f} s since {since}")
        print("first student from which every later one meets them too: " + ("none, the last does not" if steady is None
              else f"{steady['checkpoint']}, {steady['seconds']:.0f} s since {since} (distill "
                   f"{steady['distill_seconds']:.0f} s)"))
    write_results(args.json,
                  {"run": str(run), "seed": seed, "specialists": config.specialists_dir, "students": rows,
                   "first_meeting_suite": first, "meeting_suite_from_then_on": steady,
                   "first_not_refuted": unrefuted})


if __name__ == "__main__":
    run_reporting_errors(main)
