"""How far per-vehicle teachers take one deployable hover student: RAPTOR's recipe, scaled to this machine.

`make train`'s student trails the specialists from learning-to-fly starts by 16-46 points, and its family
teacher fails the same starts. This script separates the two causes: the teachers' quality, and what the
student cannot tell from its history about the vehicle it flies. Each student env flies one fixed vehicle,
labelled by a teacher trained on that vehicle alone; the student (the family's 64-64 actor with 8 past
actions and states) is fitted by DAgger (`robo_rl.agents.distillation`, `robo_rl.distill`'s settings: 40
iterations of 100 steps, the teacher's share falling to 0 over 5). Two teacher sets:

- `--teachers specialists`: the named vehicles' per-latency specialists (`make specialists`); an env at
  latency k is labelled by its vehicle's `<vehicle>-latency<k>`. The teachers are the suite's own ceilings on
  the suite's own vehicles: an upper bound, not a recipe. `--vehicle-id` also gives the student a one-hot of
  its vehicle, which it could not have on a robot: the gap that remains without it is identification.
  `--latency-id` gives it a one-hot of its latency (with either teacher set), which a deployment could declare.
- `--teachers pool`: `--pool-size` vehicles drawn from a family run's training distribution (`--family-run`,
  at difficulty 1, drawn with `--pool-seed`), a specialist trained on each at latency 0 (`--pool-steps` env
  steps, two at a time, into `--pool-dir`), those reaching `--min-success` kept. `--family-share` of the envs
  fly the family run's own vehicles instead, labelled by its family and fast-rotor teachers. The named vehicles
  are in no pool. `--pool-latency drawn` trains each specialist at its vehicle's drawn latency;
  `--pool-min-latency k` then draws pool vehicles at k or more control steps only, and the family envs fly the
  latencies below k (`--family-latency all`: every latency): the family teachers label where they fly, the pool
  where they do not.

`--save-student <new folder>` writes the student as a run (config.yaml, best_policy.pt), so that
`python -m robo_rl.robustness run=<folder>` flies the whole suite with it, held-out vehicles included.

The student flies the robustness suite's cells (`configs/robustness.yaml`, at the student's latencies) and, for
a pool, 200 vehicles of the family at latency 0 from both start sets, next to the family run's own student.
Prints the tables and writes bench/results/teacher_pool_<name>.json.

    python bench/teacher_pool.py --teachers specialists --latency 0 3 [--vehicle-id] [--latency-id] [--hidden 256 256]
    python bench/teacher_pool.py --teachers pool --family-run outputs/lim-s0 [--family-share 0.5]
    python bench/teacher_pool.py --teachers pool --family-run <make train run> --pool-from <make train run> \
        --pool-latency drawn --pool-min-latency 2 --family-share 0.5 --save-student <folder>
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, NonNegative, Positive, Seed  # noqa: E402

from robo_rl.agents.distillation import AggregatedDataset, DistillationConfig, StudentRegression  # noqa: E402
from robo_rl.agents.sac import SAC, SACConfig  # noqa: E402
from robo_rl.checkpoint import CheckpointError, require_run_dir, save_best_policy  # noqa: E402
from robo_rl.distill import env_at, fast_rotors  # noqa: E402
from robo_rl.envs import env_spec, make_vector_env  # noqa: E402
from robo_rl.evaluate import load_policy  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from robo_rl.robustness import evaluate_cells, suite_from_config  # noqa: E402
from robo_rl.teacher_pool import draw_pool, teacher_input, train_pool  # noqa: E402
from robo_rl.train import policy_state  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.quadrotor.model import VEHICLES  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DEVICE = torch.device("cpu")
FAMILY_EPISODES, FAMILY_SEED = 200, 777777  # the suite's held-out seed


class Group:
    """Student envs that fly one vehicle (or the family) and the teacher that labels them."""

    def __init__(self, name: str, env: Any, label: Callable[[torch.Tensor, dict], torch.Tensor], seed: int):
        self.name, self.env, self.label = name, env, label
        self.obs, info = env.reset(seed=seed)
        self.obs = torch.as_tensor(self.obs)
        self.params = info["params"]


def own_teacher(run: str | Path) -> Callable[[torch.Tensor, dict], torch.Tensor]:
    """A labeller that asks `run`'s policy, whatever the env's parameters."""
    _, cfg, policy = load_policy(run, "best", DEVICE)
    project = teacher_input(policy.obs_dim, float(cfg.env.overrides.get("position_error_limit", 0.0)))
    return lambda obs, params: policy.act(project(obs), deterministic=True)


def specialist_groups(folder: Path, latencies: list[int], envs_per_vehicle: int,
                      student: dict[str, Any]) -> list[Group]:
    """One group per named vehicle flown at `latencies`, each env labelled by the vehicle's specialist at its latency."""
    groups = []
    for vehicle in VEHICLES:
        runs = {k: folder / f"{vehicle}-latency{k}" for k in latencies}
        missing = [str(r) for r in runs.values() if not (r / "best_policy.pt").is_file()]
        if missing:
            sys.exit(f"--specialists {folder}: missing {', '.join(missing)} (make specialists trains them)")
        labellers = {k: own_teacher(run) for k, run in runs.items()}

        def label(obs: torch.Tensor, params: dict, labellers: dict = labellers) -> torch.Tensor:
            latency = latency_of(params)
            target = torch.empty(len(obs), 4)
            for k, labeller in labellers.items():
                rows = latency == k
                if rows.any():
                    target[rows] = labeller(obs[rows], params)
            return target

        cfg = env_at(OmegaConf.load(runs[latencies[0]] / "config.yaml").env, None, False, OmegaConf.create(
            {**student, "randomization": {"latency_steps": [min(latencies), max(latencies)]}}))
        groups.append(Group(vehicle, make_vector_env(cfg, envs_per_vehicle, DEVICE), label, len(groups)))
    return groups


def pool_groups(args: argparse.Namespace, student: dict[str, Any]) -> tuple[list[Group], list[int]]:
    """One group per kept pool vehicle, plus the family's own vehicles for `--family-share`; the kept indices."""
    source = args.pool_from or args.family_run / "teachers" / "family"
    pool = draw_pool(env_at(OmegaConf.load(source / "config.yaml").env, 1.0, False), args.pool_size, args.pool_seed,
                     args.pool_min_latency)
    if args.pool_latency == "0":
        pool = [{**member, "latency_steps": 0} for member in pool]
    best = train_pool(args.pool_dir, pool, args.pool_steps, jobs=2)
    kept = [i for i in range(len(pool)) if best[i] >= args.min_success]
    if not kept:
        sys.exit(f"--min-success {args.min_success}: none of the {len(pool)} pool teachers reaches it; lower it")
    per_vehicle = max(1, round(args.num_envs * (1 - args.family_share) / len(kept)))
    groups = []
    for i in kept:
        run = args.pool_dir / f"v{i}"
        cfg = env_at(OmegaConf.load(run / "config.yaml").env, None, False, OmegaConf.create(student))  # at its latency
        groups.append(Group(f"v{i}", make_vector_env(cfg, per_vehicle, DEVICE), own_teacher(run), len(groups)))
    if args.family_share > 0:
        family, fast = (own_teacher(args.family_run / "teachers" / t) for t in ("family", "fast_rotors"))

        def label(obs: torch.Tensor, params: dict) -> torch.Tensor:
            rows = torch.as_tensor(fast_rotors(params, 0.02))[:, None]
            return torch.where(rows, fast(obs, params), family(obs, params))

        # with a minimum pool latency, the family teachers label the latencies below it and the pool those above
        # (or, with --family-latency all, every latency, and the two teach side by side above it)
        latency = ([0, 0] if args.pool_latency == "0" else
                   [0, args.pool_min_latency - 1] if args.pool_min_latency and args.family_latency == "below-pool"
                   else [0, 3])
        cfg = env_at(OmegaConf.load(args.family_run / "config.yaml").env, 1.0, False, OmegaConf.create(
            {**student, "randomization": {"latency_steps": latency}}))
        groups.append(Group("family", make_vector_env(cfg, round(args.num_envs * args.family_share), DEVICE), label,
                            len(groups)))
    return groups, kept


Identity = Callable[[str, torch.Tensor], torch.Tensor]  # (vehicle name, latency per env) -> extra student inputs


def identity_inputs(names: list[str], vehicle: bool, latency: bool) -> Identity | None:
    """What the student is told beyond its observation, which no robot measures: a one-hot of its vehicle
    among `names` and/or of its latency (0-3 steps); None: nothing."""
    if not (vehicle or latency):
        return None

    def inputs(name: str, latency_steps: torch.Tensor) -> torch.Tensor:
        parts = []
        if vehicle:
            parts.append(torch.eye(len(names))[names.index(name)].expand(len(latency_steps), -1))
        if latency:
            parts.append(torch.eye(4)[latency_steps.long()])
        return torch.cat(parts, 1)

    return inputs


def student_input(obs: torch.Tensor, name: str, latency_steps: torch.Tensor, identity: Identity | None) -> torch.Tensor:
    """The student's input: the observation, then what `identity` tells it."""
    return obs if identity is None else torch.cat([obs, identity(name, latency_steps)], 1)


def latency_of(params: dict) -> torch.Tensor:
    """Each env's latency [control steps] from the episode parameters an env reports."""
    return torch.as_tensor(np.asarray(params["latency_steps"]).reshape(-1))


def distill(groups: list[Group], student: SAC, identity: Identity | None, settings: DistillationConfig,
            iterations: int) -> list[float]:
    """DAgger over every group's envs (robo_rl.distill's loop, one vector env per vehicle); the losses."""
    regression = StudentRegression(student.actor, settings.lr, iterations * settings.updates_per_iteration,
                                   settings.final_lr_fraction, settings.pre_squash_weight)
    dataset = AggregatedDataset(settings.dataset_capacity, student.obs_dim, 4, DEVICE)
    losses = []
    for iteration in range(iterations):
        share = settings.teacher_share(iteration)
        with torch.no_grad():
            for _ in range(100):
                for group in groups:
                    target = group.label(group.obs, group.params)
                    inputs = student_input(group.obs, group.name, latency_of(group.params), identity)
                    dataset.add(inputs, target)
                    action = student.act(inputs, deterministic=True)
                    if share > 0:
                        action = torch.where(torch.rand(len(action), 1) < share, target, action)
                    obs, _, _, _, info = group.env.step(action)
                    group.obs = torch.as_tensor(obs)
                    if "params" in info:
                        group.params = info["params"]
        losses.append(float(np.mean([regression.update(*dataset.sample(settings.batch_size))
                                     for _ in range(settings.updates_per_iteration)])))
        print(f"iteration {iteration + 1}/{iterations}: loss {losses[-1]:.4f}", flush=True)
    return losses


def main() -> None:
    """Build the teachers' groups, distill, fly the suite's cells (and the family), report."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teachers", choices=("specialists", "pool"), required=True)
    parser.add_argument("--specialists", type=Path, default=ROOT / "outputs" / "specialists")
    parser.add_argument("--latency", type=int, nargs="+", default=[0, 3], help="student latency range (min max)")
    parser.add_argument("--vehicle-id", action="store_true", help="specialists: the student also reads a one-hot of its vehicle")
    parser.add_argument("--latency-id", action="store_true", help="the student also reads a one-hot of its latency")
    parser.add_argument("--family-run", type=Path, default=ROOT / "outputs" / "lim-s0", help="a make train run")
    parser.add_argument("--pool-size", type=int, action=Positive, default=16)
    parser.add_argument("--pool-seed", type=int, action=Seed, default=4242)
    parser.add_argument("--pool-steps", type=int, action=Positive, default=300_000)
    parser.add_argument("--pool-from", type=Path, default=None,
                        help="the run whose distribution the pool is drawn from (default: the family run's family teacher)")
    parser.add_argument("--pool-latency", choices=("0", "drawn"), default="0")
    parser.add_argument("--pool-min-latency", type=int, default=0,
                        help="drawn: pool vehicles at this latency or more, the family envs below it")
    parser.add_argument("--pool-dir", type=Path, default=ROOT / "outputs" / "teacher_pool")
    parser.add_argument("--min-success", type=float, default=0.0, help="pool: keep teachers with at least this best success")
    parser.add_argument("--family-share", type=float, default=0.0)
    parser.add_argument("--family-latency", choices=("below-pool", "all"), default="below-pool",
                        help="with --pool-min-latency: the family envs' latencies")
    parser.add_argument("--hidden", type=int, nargs="+", action=Positive, default=[64, 64])
    parser.add_argument("--state-history", type=int, action=NonNegative, default=8)
    parser.add_argument("--num-envs", type=int, action=Positive, default=1600)
    parser.add_argument("--iterations", type=int, action=Positive, default=40)
    parser.add_argument("--threads", type=int, action=Positive, default=2)
    parser.add_argument("--seed", type=int, action=Seed, default=0)
    parser.add_argument("--name", default=None, help="results file suffix")
    parser.add_argument("--save-student", type=Path, default=None,
                        help="a new folder: the student as a run that robo_rl.robustness, evaluate and export take")
    args = parser.parse_args()
    check_result_name(args.name)
    if args.vehicle_id and args.teachers != "specialists":
        sys.exit("--vehicle-id: only with --teachers specialists (a pool vehicle has no name on a robot either)")
    if not 0.0 <= args.family_share < 1.0:
        sys.exit(f"--family-share {args.family_share}: must be in [0, 1)")
    if not 0.0 <= args.min_success <= 1.0:
        sys.exit(f"--min-success {args.min_success}: must be in [0, 1]")
    if not 0 <= args.pool_min_latency <= 3 or (args.pool_min_latency and args.pool_latency != "drawn"):
        sys.exit(f"--pool-min-latency {args.pool_min_latency}: 0-3 control steps, and above 0 only with --pool-latency drawn")
    if args.family_latency == "all" and not args.pool_min_latency:
        sys.exit("--family-latency all: only with --pool-min-latency above 0 (the family envs fly every latency anyway)")
    if args.save_student is not None and (args.save_student.exists()
                                          or any(p.exists() and not p.is_dir() for p in args.save_student.parents)):
        sys.exit(f"--save-student {args.save_student}: exists or lies under a file; give a new folder")
    if min(args.latency) < 0 or len(args.latency) > 2:
        sys.exit(f"--latency {' '.join(map(str, args.latency))}: one or two control-step counts, each 0 or more")
    require_run_dir(args.family_run, "--family-run", need_policy=True)  # its student's actor settings and vehicles
    if args.teachers == "pool":
        for teacher in ("family", "fast_rotors"):
            require_run_dir(args.family_run / "teachers" / teacher, f"--family-run's {teacher} teacher", need_policy=True)
        if args.pool_from is not None:
            require_run_dir(args.pool_from, "--pool-from")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    # the family's position error limit only matters beyond 0.15 m (reach); the teachers here trained without one
    student_env = {"state_history": args.state_history, "position_error_limit": 0.0}
    latencies = list(range(min(args.latency), max(args.latency) + 1))
    kept = None
    if args.teachers == "specialists":
        groups = specialist_groups(args.specialists, latencies, max(1, args.num_envs // len(VEHICLES)), student_env)
    else:
        latencies = [0] if args.pool_latency == "0" else [0, 1, 2, 3]
        groups, kept = pool_groups(args, student_env)
    identity = identity_inputs([g.name for g in groups], args.vehicle_id, args.latency_id)
    reference = groups[0]
    agent_cfg = dict(load_policy(args.family_run, "best", DEVICE)[0]["agent_config"], actor_average_rate=0.0,
                     compile=False, actor_hidden=list(args.hidden))
    space = reference.env.single_action_space
    inputs = student_input(reference.obs, reference.name, latency_of(reference.params), identity).shape[1]
    student = SAC(inputs, space.low, space.high, SACConfig(**agent_cfg), device=DEVICE)
    start = time.perf_counter()
    losses = distill(groups, student, identity, DistillationConfig(), args.iterations)
    distill_seconds = time.perf_counter() - start
    for group in groups:
        group.env.close()
    if args.save_student is not None:
        save_student(args.save_student, args.family_run, student, student_env, vars(args))

    suite_cfg = OmegaConf.load(ROOT / "configs" / "robustness.yaml")
    suite = suite_from_config(OmegaConf.merge(suite_cfg, {"run": "student", "latency_steps": latencies}))
    run_cfg = OmegaConf.create({"env": OmegaConf.to_container(env_at(
        OmegaConf.load(args.family_run / "config.yaml").env, None, False, OmegaConf.create(student_env)))})
    probe = make_vector_env(run_cfg.env, 1, DEVICE)
    state = {"env_spec": env_spec(probe, run_cfg.env.id), "path": "student"}
    probe.close()
    cells = {}
    for vehicle in VEHICLES:
        for latency in latencies:  # a student told its latency is told each cell's
            flown = [c for c in suite.cells() if c.vehicle == vehicle and c.latency_steps == latency]
            act = (lambda obs, v=vehicle, k=latency: student.act(
                student_input(obs, v, torch.full((len(obs),), k), identity), deterministic=True))
            cells.update(evaluate_cells(state, run_cfg, act, flown, suite, DEVICE))
    rows = [{"vehicle": c.vehicle, "latency_steps": c.latency_steps, "start_set": c.start_set, "wind": c.wind,
             "success_rate": r["success_rate"]} for c, r in cells.items()]
    print(f"\nstudent of {args.teachers} ({len(groups)} groups), distilled in {distill_seconds:.0f} s; success %, "
          f"latency {latencies}:")
    for vehicle in VEHICLES:
        line = [f"{s}{'+wind' if w else ''} " + "/".join(
            f"{100 * r['success_rate']:.0f}" for r in rows
            if (r["vehicle"], r["start_set"], r["wind"]) == (vehicle, s, w)) for s in ("l2f", "moderate") for w in (False, True)]
        print(f"  {vehicle:28s} " + " | ".join(line))
    family = None
    if args.teachers == "pool":
        family = fly_family(args.family_run, student, identity, student_env, suite_cfg, latencies)
        for start_set, result in family.items():
            print(f"  family at latency {latencies[0]}-{latencies[-1]}, {start_set} starts ({FAMILY_EPISODES} vehicles): student "
                  f"{result['student']:.0%}, {args.family_run.name} {result['family_run']:.0%}")
    name = args.name or f"{args.teachers}"
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"teacher_pool_{name}.json"
    out.write_text(json.dumps({"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                               "kept_pool_vehicles": kept, "distill_seconds": distill_seconds, "losses": losses,
                               "cells": rows, "family": family}, indent=1))
    print(f"wrote {out}")


def save_student(folder: Path, family_run: Path, student: SAC, student_env: dict[str, Any],
                 args: dict[str, Any]) -> None:
    """Write `student` as a run folder (config.yaml, best_policy.pt): `family_run`'s config with the student's
    observation and these `args`, so that robo_rl.robustness, evaluate and export take it like any run."""
    state, run_cfg, _ = load_policy(family_run, "best", DEVICE)
    run_cfg = OmegaConf.merge(run_cfg, {
        "env": env_at(run_cfg.env, None, False, OmegaConf.create(student_env)),
        "agent": dataclasses.asdict(student.config)})
    run_cfg.distill = {"teacher_pool": {k: str(v) if isinstance(v, Path) else v for k, v in args.items()}}
    env = make_vector_env(run_cfg.env, 1, DEVICE)
    spec = env_spec(env, run_cfg.env.id)
    env.close()
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(run_cfg))
    save_best_policy(folder, policy_state(run_cfg, spec, student, DEVICE, {**state["counters"], "env_steps": 0}))
    print(f"wrote the student to {folder}")


def fly_family(family_run: Path, student: SAC, identity: Identity | None, student_env: dict[str, Any],
               suite_cfg: DictConfig, latencies: list[int]) -> dict[str, Any]:
    """Success of the student and of the family run's own student on 200 family vehicles at `latencies`."""
    _, run_cfg, own = load_policy(family_run, "best", DEVICE)
    result = {}
    for start_set, starts in (("l2f", None), ("moderate", OmegaConf.to_container(suite_cfg.start_sets.moderate))):
        changes: dict[str, Any] = {"randomization": {"latency_steps": [latencies[0], latencies[-1]]}}
        if starts:
            changes["initial_state"] = starts
        row = {}
        for who, policy, extra in (("student", student, student_env), ("family_run", own, {})):
            env = make_vector_env(env_at(run_cfg.env, 1.0, False, OmegaConf.create({**changes, **extra})),
                                  FAMILY_EPISODES, DEVICE)
            act = lambda o, p=policy: p.act(o, deterministic=True)  # noqa: E731
            if who == "student" and identity is not None:
                # each env's latency, as the evaluation's reset (the same seed) will draw it again
                latency = latency_of(env.reset(seed=FAMILY_SEED)[1]["params"])
                act = lambda o: student.act(student_input(o, "family", latency, identity), deterministic=True)  # noqa: E731
            row[who] = evaluate_policy(act, env, FAMILY_SEED, DEVICE)["success_rate"]
            env.close()
        result[start_set] = row
    return result


def run_reporting_errors(main: Callable[[], None]) -> None:
    """Run a bench script's `main`: a missing or foreign run, or an argument it refuses (`sys.exit(<message>)`),
    gives one line and exit 2, as the `python -m robo_rl...` commands do."""
    try:
        main()
    except (CheckpointError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except SystemExit as stop:
        if not isinstance(stop.code, str):  # argparse's own exit 2, or a plain exit status
            raise
        print(f"error: {stop.code}", file=sys.stderr)
        sys.exit(2)


def check_result_name(name: str | None) -> None:
    """Exit with one line unless `name` (--name) is a plain file name for bench/results."""
    if name is not None and (name in (".", "..") or not re.fullmatch(r"[A-Za-z0-9_.-]+", name)):
        sys.exit(f"--name {name!r}: letters, digits, '_', '-' and '.' only (a file name in bench/results)")


if __name__ == "__main__":
    run_reporting_errors(main)
