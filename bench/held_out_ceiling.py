"""What the suite's held-out vehicles allow: a specialist per vehicle a student fails, as that vehicle's ceiling.

The robustness suite flies 100 vehicles drawn from the student's own training distribution (seed 777777, the
suite's moderate starts and wind) once each, and issue 31 asks for >= 90%. Some draws may not be flyable from
those starts at all (thrust-to-weight 1.4 with slow rotors and 30 ms of latency). This script trains a
specialist (configs/experiment/specialist.yaml: that vehicle alone, +-5-10% around it, at its drawn latency,
`--steps` env steps, two at a time, into `--specialists`) on every held-out vehicle that one of the given
students fails, and flies

- the exact held-out episode (the same vehicle, start, wind and noise) with the specialist in place of the
  student: the held-out ceiling counts an episode as flyable where the student or the specialist flies it;
- `--episodes` starts of the specialist's own env (its vehicle, latency and wind), student and
  specialist side by side: how often each flies that vehicle at all.

Every student must share one training distribution (the same held-out vehicles). Prints the tables and writes
bench/results/held_out_ceiling.json.

    python bench/held_out_ceiling.py <student run> [<student run> ...] [--specialists outputs/held_out_specialists]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, Positive, Seed  # noqa: E402
from teacher_pool import check_result_name, own_teacher, run_reporting_errors  # noqa: E402

from robo_rl.distill import env_at  # noqa: E402
from robo_rl.envs import make_vector_env  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from robo_rl.robustness import check_run, held_out_vehicles, load_flying  # noqa: E402
from robo_rl.teacher_pool import check_pool_folder, drawn_vehicles, nominal_rotor_offset, train_pool  # noqa: E402
from sim.kernel_expr import ArrayMath  # noqa: E402
from sim.quadrotor.observation import limited_position_error  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DEVICE = torch.device("cpu")
Policy = Callable[[torch.Tensor], torch.Tensor]


def student_policy(run: Path) -> tuple[Any, Policy]:
    """A student's env config and its deterministic policy on observations whose position error is not yet
    limited: the student's own limit is applied here, so that one env serves the student and the specialists
    (which trained without a limit)."""
    _, cfg, agent = load_flying(run, "best", DEVICE, None)
    limit = float(cfg.env.overrides.get("position_error_limit", 0.0))
    m = ArrayMath(torch)

    def act(obs: torch.Tensor) -> torch.Tensor:
        error = limited_position_error(m, [obs[:, k] for k in range(3)], limit)
        return agent.act(torch.cat([torch.stack(error, 1), obs[:, 3:]], 1), deterministic=True)

    return cfg, act


def held_out_env(student_cfg: Any, suite: Any, start_set: str) -> Any:
    """The suite's held-out env for a student: its training distribution from the suite's `start_set`, the
    position error observed without a limit."""
    overrides = {"position_error_limit": 0.0, "initial_state": OmegaConf.to_container(suite.start_sets[start_set])}
    return make_vector_env(student_cfg.env, int(suite.held_out.episodes), DEVICE, overrides=overrides)


def routed(default: Policy, rows: dict[int, Policy]) -> Policy:
    """`default` on every env but those in `rows`, each flown by its own policy."""
    def act(obs: torch.Tensor) -> torch.Tensor:
        action = default(obs).clone()
        for i, policy in rows.items():
            action[i : i + 1] = policy(obs[i : i + 1])
        return action
    return act


def main() -> None:
    """Fly the students on the held-out vehicles, train the missing specialists, fly them, report."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="student runs of one training distribution (make train runs)")
    parser.add_argument("--specialists", type=Path, default=ROOT / "outputs" / "held_out_specialists")
    parser.add_argument("--steps", type=int, action=Positive, default=500_000,
                        help="env steps per specialist (make specialists': 500k)")
    parser.add_argument("--episodes", type=int, action=Positive, default=100,
                        help="starts per failed vehicle (of --start-set), student and specialist")
    parser.add_argument("--start-set", default="moderate", help="the suite's start set the held-out vehicles fly from")
    parser.add_argument("--name", default="held_out_ceiling", help="results file name")
    args = parser.parse_args()
    check_pool_folder(args.specialists, [], "--specialists")  # a file there; the members are checked once drawn
    check_result_name(args.name)
    for run in args.runs:
        check_run(run)  # a run with a policy, of a quadrotor env
    torch.set_num_threads(1)
    suite = OmegaConf.load(ROOT / "configs" / "robustness.yaml")
    if args.start_set not in suite.start_sets:
        sys.exit(f"--start-set {args.start_set}: one of {', '.join(suite.start_sets)}")
    seed = int(suite.held_out.seed)

    students, successes, params = {}, {}, None
    for run in args.runs:
        cfg, act = student_policy(run)
        env = held_out_env(cfg, suite, args.start_set)
        result = evaluate_policy(act, env, seed, DEVICE)
        env.close()
        drawn = {k: np.asarray(v) for k, v in result["params"].items()}
        if params is not None and any(not np.array_equal(drawn[k], params[k]) for k in params):
            sys.exit(f"{run}: its held-out vehicles differ from {args.runs[0]}'s: give students of one distribution")
        params, students[run], successes[run] = drawn, (cfg, act), np.asarray(result["successes"], dtype=bool)
        print(f"{run}: {successes[run].mean():.0%} of {len(successes[run])} held-out vehicles", flush=True)
    vehicles = drawn_vehicles(params, nominal_rotor_offset(students[args.runs[0]][0].env))
    rows = held_out_vehicles(params, np.zeros(len(vehicles), dtype=bool))
    failed = sorted(set().union(*(np.flatnonzero(~s).tolist() for s in successes.values())))
    print(f"training specialists for the {len(failed)} vehicles some student fails ({args.steps} env steps each, "
          f"into {args.specialists})", flush=True)
    train_pool(args.specialists, [vehicles[i] for i in failed], args.steps, jobs=2)
    specialists: dict[int, Policy] = {}
    for k, i in enumerate(failed):
        label = own_teacher(args.specialists / f"v{k}")  # a specialist's labels do not depend on the params
        specialists[i] = lambda obs, label=label: label(obs, {})

    # the exact held-out episodes, each failed vehicle flown by its specialist
    cfg0, act0 = students[args.runs[0]]
    env = held_out_env(cfg0, suite, args.start_set)
    flown = np.asarray(evaluate_policy(routed(act0, specialists), env, seed, DEVICE)["successes"], dtype=bool)
    env.close()
    table = []
    for k, i in enumerate(failed):
        run_dir = args.specialists / f"v{k}"
        own = env_at(OmegaConf.load(run_dir / "config.yaml").env, None, False, OmegaConf.create({
            "state_history": int(cfg0.env.overrides.get("state_history", 0)), "position_error_limit": 0.0,
            "initial_state": OmegaConf.to_container(suite.start_sets[args.start_set])}))
        rates = {}
        for who, act in [("specialist", specialists[i])] + [(str(run), students[run][1]) for run in args.runs]:
            env = make_vector_env(own, args.episodes, DEVICE)
            rates[who] = float(np.mean(evaluate_policy(act, env, seed, DEVICE)["successes"]))
            env.close()
        table.append({"held_out_index": i, "specialist": str(run_dir),
                      **{k: v for k, v in rows[i].items() if k != "success"},
                      "students": {str(run): bool(successes[run][i]) for run in args.runs},
                      "specialist_flies_the_episode": bool(flown[i]), "success_from_starts": rates})
    ceiling = np.zeros(len(vehicles), dtype=bool)
    for s in successes.values():
        ceiling |= s
    ceiling[failed] |= flown[failed]

    print(f"\nheld-out vehicles some student fails ({len(failed)} of {len(vehicles)}); moderate starts of the vehicle "
          f"({args.episodes}), in %: specialist, then each student")
    print("  idx lat  T/W  rise  fall  mass  episode: students / specialist  own starts: specialist | students")
    for row in table:
        students_ok = "".join("+" if ok else "-" for ok in row["students"].values())
        rate = row["success_from_starts"]
        print(f"  {row['held_out_index']:3d} {row['latency_steps']:3.0f} {row['thrust_to_weight']:4.2f} "
              f"{row['motor_tau_rise_ms']:5.0f} {row['motor_tau_fall_ms']:5.0f} {row['mass_g']:5.1f}  "
              f"{students_ok:>8s} / {'+' if row['specialist_flies_the_episode'] else '-'}"
              f"{100 * rate['specialist']:21.0f} | " + " ".join(f"{100 * rate[str(r)]:.0f}" for r in args.runs))
    print(f"\nheld-out ceiling (the student or the vehicle's specialist flies the episode): {ceiling.mean():.0%}")
    for run in args.runs:
        print(f"  {run}: {successes[run].mean():.0%}, {successes[run][ceiling].mean():.0%} of the flyable episodes")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{args.name}.json"
    out.write_text(json.dumps({"runs": [str(r) for r in args.runs], "seed": seed, "steps": args.steps,
                               "episodes": args.episodes, "ceiling": float(ceiling.mean()),
                               "students": {str(r): float(s.mean()) for r, s in successes.items()},
                               "failed": table}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    run_reporting_errors(main)
