"""Where a pool student trails its teachers: each pool member against the student on the member's own vehicle.

A `make train POOL=1` student regresses onto the actions of per-vehicle teachers (robo_rl.teacher_pool). On the
vehicles of those teachers, the student was trained with exactly their labels, so whatever it flies worse than
they do is a failure to fit or to identify the vehicle, not a lack of teachers. This script flies, for each
kept member of the student's pool (its config's `distill.teacher_pool_runs`, or those given):

- the member and the student, `--episodes` starts each of the suite's `--start-set` (default learning-to-fly's
  starts) in the member's own env (its vehicle, randomization and latency), observed as the student observes;
- with `--handover K,...`: the member for the first K control steps of each episode, then the student, which
  shows how much of the student's loss lies in the first moments after a start.

Prints one row per member and the means, and writes bench/results/<name>.json.

    python bench/student_gap.py <student run> [--members v120 v121 ...] [--handover 0,3,10,20,50]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, Positive, Seed  # noqa: E402
from teacher_pool import check_result_name, run_reporting_errors  # noqa: E402

from robo_rl.distill import own_view  # noqa: E402
from robo_rl.envs import make_vector_env  # noqa: E402
from robo_rl.evaluate import load_policy  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from robo_rl.robustness import check_run  # noqa: E402
from robo_rl.teacher_pool import PoolMember, member_env, pool_members  # noqa: E402
from sim.registration import make_env_config  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DEVICE = torch.device("cpu")
Policy = Callable[[torch.Tensor], torch.Tensor]


def handover(first: Policy, then: Policy, steps: int) -> Policy:
    """`first` for the first `steps` calls (control steps of episodes that all start together), then `then`."""
    count = [0]

    def act(obs: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        return first(obs) if count[0] <= steps else then(obs)
    return act


def members_of(run: Path, names: list[str] | None) -> list[PoolMember]:
    """The pool members the student `run` was distilled from, or those of them named in `names`."""
    recorded = OmegaConf.load(run / "config.yaml").get("distill", {}).get("teacher_pool_runs") or []
    if not recorded:
        sys.exit(f"{run}: not a student of a teacher pool (its config.yaml records no distill.teacher_pool_runs)")
    folders = {Path(r).parent for r in recorded}
    members = {str(m.run): m for folder in folders for m in pool_members(folder)}
    kept = [members[r] for r in recorded if r in members]
    if not kept:  # the pool folder was moved or emptied since the student was distilled
        sys.exit(f"{run}: none of its {len(recorded)} pool members is in {', '.join(map(str, sorted(folders)))} any more")
    if names:
        unknown = sorted(set(names) - {m.run.name for m in kept})
        if unknown:
            sys.exit(f"--members {' '.join(unknown)}: not among the student's {len(kept)} pool members "
                     f"({kept[0].run.name} ... {kept[-1].run.name})")
        kept = [m for m in kept if m.run.name in names]
    return kept


def main() -> None:
    """Fly each member and the student on the member's vehicle, with each handover, and report."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a student of a teacher pool (make train POOL=1's run)")
    parser.add_argument("--members", nargs="*", help="pool members by folder name (v120 ...); default: all kept")
    parser.add_argument("--handover", default="", help="comma-separated control steps the member flies first")
    parser.add_argument("--episodes", type=int, action=Positive, default=100)
    parser.add_argument("--start-set", default="l2f", help="a start set of configs/robustness.yaml")
    parser.add_argument("--seed", type=int, action=Seed, default=12345)
    parser.add_argument("--name", default="student_gap", help="results file name")
    args = parser.parse_args()
    check_run(args.run)
    check_result_name(args.name)
    if not 0 <= args.seed < 2**32:
        sys.exit(f"--seed {args.seed}: must lie in [0, 4294967295]")
    try:
        steps = [int(k) for k in args.handover.split(",") if k.strip()]
    except ValueError:
        sys.exit(f"--handover {args.handover}: give comma-separated whole numbers of control steps, e.g. 0,3,10")
    if any(k < 0 for k in steps):
        sys.exit(f"--handover {args.handover}: control steps must be 0 or more")
    start_sets = OmegaConf.load(ROOT / "configs" / "robustness.yaml").start_sets
    if args.start_set not in start_sets:
        sys.exit(f"--start-set {args.start_set}: one of {', '.join(start_sets)}")
    torch.set_num_threads(1)
    _, run_cfg, student = load_policy(args.run, "best", DEVICE)
    student_env = make_env_config(run_cfg.env.id, OmegaConf.to_container(run_cfg.env.overrides, resolve=True))
    start = {"initial_state": OmegaConf.to_container(start_sets[args.start_set])}

    def student_act(obs: torch.Tensor) -> torch.Tensor:
        return student.act(obs, deterministic=True)

    rows = []
    for member in members_of(args.run, args.members):
        _, _, policy = load_policy(member.run, "best", DEVICE)
        own = OmegaConf.merge(member_env(member, student_env, lambda env: env), {"overrides": start})
        env = make_vector_env(own, args.episodes, DEVICE)
        project = own_view(policy.obs_dim, member.env, student_env, env.single_observation_space.shape[0],
                           f"pool member {member.run}")

        def member_act(obs: torch.Tensor, p=policy, f=project) -> torch.Tensor:
            return p.act(f(obs), deterministic=True)

        flown = {"member": member_act, "student": student_act,
                 **{f"member {k} steps": handover(member_act, student_act, k) for k in steps}}
        rates = {who: float(np.mean(evaluate_policy(act, env, args.seed, DEVICE)["successes"]))
                 for who, act in flown.items()}
        env.close()
        latency = member.latency_steps[0]
        rows.append({"run": str(member.run), "latency_steps": latency, "best_success": member.best_success,
                     "success": rates})
        print(f"{member.run.name:>6s} lat {latency}  member {rates['member']:.2f}  student {rates['student']:.2f}  "
              + "  ".join(f"K={k}: {rates[f'member {k} steps']:.2f}" for k in steps), flush=True)
    print(f"\nmean over {len(rows)} members ({args.episodes} {args.start_set} starts each): "
          + ", ".join(f"{who} {np.mean([r['success'][who] for r in rows]):.3f}" for who in rows[0]["success"]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps({"run": str(args.run), "start_set": args.start_set, "episodes": args.episodes,
                               "seed": args.seed, "handover": steps, "members": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    run_reporting_errors(main)
