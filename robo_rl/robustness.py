"""The robustness suite of a quadrotor policy: `python -m robo_rl.robustness run=<run dir>`.

Flies the run's deterministic policy on every named vehicle (`sim.quadrotor.model.VEHICLES`, each with its
nominal physical parameters) x action latency x start set x wind (none, or a constant force drawn uniform in
+-`wind` newtons per axis), `episodes` seeded episodes per cell, plus `held_out.episodes` vehicles drawn
from the run's own training distribution with a seed that no training uses. Every cell of a start set
starts from the same states, and every wind cell of it meets the same forces, so that cells compare
episode by episode. A specialist (a run trained on one vehicle alone, `specialists: {vehicle: run dir}`)
flies its own vehicle's cells in the same command and is printed next to each success rate as the ceiling
of what that vehicle reaches from those starts. A vehicle may have specialists for one latency each as well
(`{vehicle}-latency{k}: run dir`): a policy trained at one latency flies it better than one trained across
them, so each cell's ceiling is the best of the vehicle's specialists that fly it.

Prints the table and PASS/FAIL/UNSURE lines against the suite's `targets` (UNSURE: a miss within the noise of
the sampled starts), and writes robustness.json and
robustness.png (a heatmap) into the command's folder under `<run>/robustness/`. configs/robustness.yaml
holds the suite. `task=reach` (or another quadrotor task) has the policy and its specialists fly that task on the
same vehicles, as the run's policy observes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from robo_rl.checkpoint import check_compatible, require_run_dir, write_atomically
from robo_rl.cli import hydra_command
from robo_rl.envs import check_quadrotor_env, check_quadrotor_run, env_spec, make_vector_env, task_env
from robo_rl.evaluate import load_policy
from robo_rl.evaluation import evaluate_policy
from robo_rl.train import select_device
from sim.errors import ConfigError
from sim.validation import MAX_ENVS
from sim.quadrotor import episode_starts
from sim.quadrotor.config import RANGES, make_config
from sim.quadrotor.model import VEHICLES, QuadrotorParams, load_model, thrust_to_weight
from sim.quadrotor.tasks import task_named

SUITE = "the robustness suite"  # what flies the runs it is given, in its errors

STATE_FIELDS = ("position", "quaternion", "velocity", "angular_velocity")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One condition of the suite: a named vehicle, a start set, action latency [control steps], wind or not."""

    vehicle: str
    start_set: str
    latency_steps: int
    wind: bool


# The suite's verdicts on its sampled starts: PASS where the measured rate meets the target, FAIL where it misses it
# by more than the sampling noise (the 95% interval), UNSURE where it misses it within that noise (more episodes=
# tell); n/a where the suite cannot check it
PASS, FAIL, UNSURE, NOT_CHECKED = "PASS", "FAIL", "UNSURE", "n/a"
Z_95 = 1.959964  # the standard normal's two-sided 95% quantile


def wilson_upper(rate: float, n: int, z: float = Z_95) -> float:
    """The upper end of the Wilson score interval of a success rate `rate` measured over `n` episodes: the highest
    true rate that the measurement does not rule out (sound near 0% and 100%, where the normal interval is not)."""
    if n <= 0:
        return 1.0
    centre = rate + z * z / (2 * n)
    spread = z * math.sqrt(rate * (1.0 - rate) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1.0 + z * z / n))


def outcome_text(successes: np.ndarray) -> str:
    """Per-episode outcomes as robustness.json keeps them: one character per episode, 1 a success, 0 not."""
    return "".join("1" if success else "0" for success in np.asarray(successes, dtype=bool))


def outcomes(text: str) -> np.ndarray:
    """The per-episode outcomes (0.0 or 1.0 each) of `outcome_text`'s string."""
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(float) - ord("0")


def gap_margin(row: Mapping[str, Any], z: float = Z_95) -> float:
    """Half the 95% interval of a cell's gap to its specialist: both flew the same starts and wind, so the standard
    error is that of the paired differences of their per-episode outcomes (0 where the row does not hold them)."""
    mine, theirs = row.get("successes"), row.get("specialist_successes")
    if not mine or not theirs or len(mine) != len(theirs) or len(mine) < 2:
        return 0.0
    differences = outcomes(theirs) - outcomes(mine)
    return z * float(differences.std(ddof=1)) / math.sqrt(len(differences))


@dataclasses.dataclass
class Targets:
    """What the suite's PASS/FAIL/UNSURE lines check (success rates as fractions)."""

    start_set: str = "moderate"  # every named vehicle at least `min_success` from these starts ...
    latency_steps: tuple[int, ...] = (0, 1, 2)  # ... at these latencies, with and without wind
    min_success: float = 0.95
    specialist_start_set: str = "l2f"  # within `specialist_gap` of the vehicle's specialist from these starts
    specialist_gap: float = 0.03
    held_out: float = 0.90  # over the held-out vehicles


@dataclasses.dataclass
class Suite:
    """A robustness suite (configs/robustness.yaml), checked."""

    vehicles: tuple[str, ...]
    latency_steps: tuple[int, ...]
    start_sets: dict[str, dict[str, Any]]  # name -> fields of sim.quadrotor.config.InitialStateConfig
    wind: float  # [N] per axis
    episodes: int  # per cell
    seed: int  # start states and wind forces of the named-vehicle cells
    held_out_episodes: int
    held_out_seed: int
    specialists: dict[str, str]  # vehicle (every latency) or `{vehicle}-latency{k}` (latency k only) -> run dir
    targets: Targets
    firmware_limits: bool = True  # each named vehicle's flight-firmware thrust limits (Vehicle.firmware_thrust_*)
    held_out_start_set: str | None = None  # None: the run's own training starts
    task: str | None = None  # another quadrotor task every policy flies (robo_rl.envs.task_env); None: its own

    def cells(self, vehicles: Sequence[str] | None = None) -> list[Cell]:
        """The named-vehicle cells (of `vehicles`, default all of the suite's), in table order."""
        return [Cell(v, s, latency, wind) for v in (vehicles or self.vehicles) for s in self.start_sets
                for wind in (False, True) for latency in self.latency_steps]


def suite_from_config(cfg: DictConfig | Mapping[str, Any]) -> Suite:
    """The suite of a robustness config; ConfigError naming the option for an unknown vehicle (in `vehicles`
    or `specialists`), a start set the env refuses, or a specialist folder that is not a run with a policy."""
    keys = ("vehicles", "latency_steps", "start_sets", "wind", "episodes", "seed", "held_out", "specialists",
            "specialists_dir", "targets", "firmware_limits", "task")
    cfg = {key: OmegaConf.to_container(cfg.get(key), resolve=True) if OmegaConf.is_config(cfg.get(key)) else cfg.get(key)
           for key in keys}
    vehicles = tuple(VEHICLES) if cfg["vehicles"] is None else tuple(cfg["vehicles"])
    for name in vehicles:
        if name not in VEHICLES:
            raise ConfigError(f"vehicles: unknown vehicle {name!r}; known vehicles: {', '.join(VEHICLES)}")
    if not vehicles or len(set(vehicles)) != len(vehicles):
        raise ConfigError(f"vehicles must name at least one vehicle, each once, got {list(vehicles)}")
    latencies = tuple(int(v) for v in cfg["latency_steps"])
    most = int(RANGES["randomization.latency_steps"].high)  # what the simulator delays by (it said "got [0, 51]")
    if not latencies or len(set(latencies)) != len(latencies) or min(latencies) < 0 or max(latencies) > most:
        raise ConfigError(f"latency_steps must be distinct whole numbers in [0, {most}], got {list(latencies)}")
    for name, fields in (cfg["start_sets"] or {}).items():
        if fields is None:  # it flew learning-to-fly's starts under this name
            raise ConfigError(f"start_sets.{name} is null: give {{}} for InitialStateConfig's defaults (learning-to-fly's "
                              f"starts) or its fields, or leave the set out with ~start_sets.{name}")
    start_sets = {str(k): dict(v) for k, v in (cfg["start_sets"] or {}).items()}
    if not start_sets:
        raise ConfigError("start_sets must name at least one start set (fields of InitialStateConfig)")
    per_vehicle = 2 * len(latencies) * len(start_sets)  # cells of a vehicle, flown in one batch (with and without wind)
    if int(cfg["episodes"]) * per_vehicle > MAX_ENVS:  # the batch's num_envs was refused, naming num_envs
        raise ConfigError(f"episodes must be at most {MAX_ENVS // per_vehicle} with {per_vehicle} cells per vehicle "
                          f"(one batch of at most {MAX_ENVS} envs each), got {cfg['episodes']}")
    try:
        make_config("hover", randomization={"latency_steps": [0, max(latencies)]})
    except ConfigError as error:
        raise ConfigError(f"latency_steps: {error}") from None
    for name, fields in start_sets.items():
        try:
            make_config("hover", initial_state=fields)
        except ConfigError as error:
            raise ConfigError(f"start_sets.{name}: {error}") from None
    specialists = {str(k): str(v) for k, v in (cfg.get("specialists") or {}).items()}
    if cfg.get("specialists_dir"):  # runs named by vehicle and latency (make specialists); given ones win
        folder = Path(cfg["specialists_dir"])
        if not folder.is_dir():
            raise ConfigError(f"specialists_dir={folder}: no such folder (make specialists trains one run per vehicle there)")
        names = [specialist_name(v, lat) for v in vehicles for lat in (None, *latencies)]
        for name in names:  # a folder of a specialist's name that is no run was skipped without a word
            if (folder / name).exists() and not (folder / name / "config.yaml").is_file():
                raise ConfigError(f"specialists_dir={folder}: {folder / name} is not a training run (no config.yaml); "
                                  "train it (make specialists) or move it away")
        found = {name: str(folder / name) for name in names if (folder / name).exists()}
        if not found:
            raise ConfigError(f"specialists_dir={folder} holds no specialist of this suite's vehicles (folders named "
                              f"<vehicle> or <vehicle>-latency<k>, e.g. {names[0]}; make specialists trains them)")
        specialists = {**found, **specialists}
    for name, folder in specialists.items():
        vehicle, latency = specialist_cells(name)
        if vehicle not in vehicles:
            known = ", ".join(vehicles)
            raise ConfigError(f"specialists.{name}: not a vehicle of this suite (or <vehicle>-latency<k>); its "
                              f"vehicles: {known}")
        if latency is not None and latency not in latencies:
            raise ConfigError(f"specialists.{name}: latency {latency} is not one of the suite's latency_steps "
                              f"{list(latencies)}")
        check_run(folder, option=f"specialists.{name}")
        check_specialist_vehicle(folder, vehicle, f"specialists.{name}")
    task = cfg.get("task")
    if task is not None:
        task_named(task)  # one ConfigError naming the known tasks
    targets = cfg.get("targets") or {}
    targets = Targets(**{**targets, "latency_steps": tuple(targets.get("latency_steps", Targets.latency_steps))})
    target_latencies = targets.latency_steps  # [] failed min() after the whole suite had run; -1 printed n/a
    if not target_latencies or len(set(target_latencies)) != len(target_latencies) or min(target_latencies) < 0:
        raise ConfigError(f"targets.latency_steps must be distinct whole numbers >= 0, got {list(target_latencies)}")
    for option in ("start_set", "specialist_start_set"):  # a typo printed its targets as n/a, "not in this suite"
        if getattr(targets, option) not in start_sets:
            raise ConfigError(f"targets.{option} must be one of the start sets ({', '.join(start_sets)}), "
                              f"got {getattr(targets, option)!r}")
    return Suite(vehicles, latencies, start_sets, float(cfg["wind"]), int(cfg["episodes"]), int(cfg["seed"]),
                 int(cfg["held_out"]["episodes"]), int(cfg["held_out"]["seed"]), specialists, targets,
                 bool(True if cfg.get("firmware_limits") is None else cfg["firmware_limits"]),
                 _held_out_start_set(cfg["held_out"].get("start_set"), start_sets), task)


def specialist_name(vehicle: str, latency: int | None) -> str:
    """The name (key of `specialists`, folder under `specialists_dir`) of a vehicle's specialist for every
    latency (None) or for one."""
    return vehicle if latency is None else f"{vehicle}-latency{latency}"


def specialist_cells(name: str) -> tuple[str, int | None]:
    """The vehicle and latency (None: every latency) whose cells the specialist called `name` flies."""
    match = re.fullmatch(r"(.+)-latency(\d+)", name)
    return (name, None) if match is None else (match.group(1), int(match.group(2)))


def _held_out_start_set(name: Any, start_sets: Mapping[str, Any]) -> str | None:
    """held_out.start_set: None (the run's own starts) or one of the suite's start sets."""
    if name is not None and name not in start_sets:
        raise ConfigError(f"held_out.start_set must be null or one of the start sets ({', '.join(start_sets)}), got {name!r}")
    return name


def check_run(run: Any, option: str = "run") -> None:
    """ConfigError or CheckpointError naming `option` unless `run` is a run with a policy, trained on a
    quadrotor env."""
    require_run_dir(run, option=option, need_policy=True)
    check_quadrotor_run(run, option, SUITE)


def check_specialist_vehicle(run: Any, vehicle: str, option: str) -> None:
    """ConfigError naming `option` unless the run in `run` trained on the named `vehicle` (its env's `vehicle`, no
    `vehicle_overrides`): another run's policy was printed as that vehicle's ceiling and judged the targets."""
    from sim.quadrotor.config import DEFAULT_VEHICLE

    overrides = OmegaConf.load(Path(str(run)) / "config.yaml").env.get("overrides") or {}
    trained = overrides.get("vehicle") or DEFAULT_VEHICLE
    if trained != vehicle or overrides.get("vehicle_overrides"):
        changed = " with vehicle_overrides" if overrides.get("vehicle_overrides") else ""
        raise ConfigError(f"{option}={run} trained on {trained}{changed}, not on {vehicle}: a specialist is a run "
                          f"trained on that vehicle alone (+experiment=specialist +env.overrides.vehicle={vehicle})")


def start_states(env_config: Any, start_set: Mapping[str, Any], n: int, seed: int) -> dict[str, np.ndarray]:
    """n start states (position, quaternion, velocity, angular_velocity; arrays (n, k)) of a start set, drawn
    by the simulator's own sampler from uniforms keyed by `seed` (around `env_config`'s start point)."""
    config = make_config(env_config.task, env_config, initial_state=dict(start_set))
    key = int(np.random.default_rng(seed).integers(0, 2**63 - 1))
    u = episode_starts.uniforms(np, key, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    slots = {name: u[offset : offset + size] for (name, size), offset
             in zip(episode_starts.UNIFORM_FIELDS, episode_starts.UNIFORM_OFFSETS.values())}
    state = task_named(config.task).initial_states(np, slots, config)  # feature-major (k, n)
    return {name: np.ascontiguousarray(value.T) for name, value in zip(STATE_FIELDS, state)}


def wind_forces(n: int, magnitude: float, seed: int) -> np.ndarray:
    """n constant disturbance forces (n, 3) [N], uniform in +-magnitude per axis."""
    return np.random.default_rng([seed, 1]).uniform(-magnitude, magnitude, (n, 3))


def vehicle_overrides(vehicle: str, suite: Suite) -> dict[str, Any]:
    """Env config overrides for a named vehicle's cells: its nominal physics as published (the run's own
    vehicle_overrides dropped), observation noise the run's; latency and wind are set per env at reset, the
    latency range only sizes the latency buffer. With `suite.firmware_limits`, the motors get commands as the
    vehicle's flight firmware limits them (clamped at its THRUST_MAX, off below THRUST_MIN), as on the robot."""
    limits = {}
    if suite.firmware_limits:
        published = VEHICLES[vehicle]
        limits = {"firmware_thrust_max": published.firmware_thrust_max or 0.0,
                  "firmware_thrust_min": published.firmware_thrust_min or 0.0}
    # difficulty 1: a run trained at a lower one (a distilled student records its teacher's) would otherwise
    # have its latency buffer and the suite's wind scaled down with it
    return {"vehicle": vehicle, "vehicle_overrides": {}, **limits,
            "randomization": {"enabled": True, "vehicle_parameters": False, "difficulty": 1.0,
                              "latency_steps": [0, max(suite.latency_steps)], "disturbance_force": suite.wind,
                              "disturbance_torque": 0.0}}


def _reset_options(cells: Sequence[Cell], starts: Mapping[str, Mapping[str, np.ndarray]],
                   winds: np.ndarray) -> dict[str, Any]:
    """Reset options of one env holding `cells` in blocks of len(winds) envs: each block starts from its start
    set's states, with its latency and, in a wind cell, the suite's wind forces."""
    n = len(winds)
    return {
        "initial_state": {name: np.concatenate([starts[cell.start_set][name] for cell in cells])
                          for name in STATE_FIELDS},
        "params": {
            "latency_steps": np.concatenate([np.full(n, cell.latency_steps) for cell in cells]),
            "disturbance_force": np.concatenate([winds if cell.wind else np.zeros((n, 3)) for cell in cells]),
            "disturbance_torque": np.zeros((n * len(cells), 3)),
        },
    }


def evaluate_cells(state: Mapping[str, Any], run_cfg: DictConfig, policy: Callable[[torch.Tensor], torch.Tensor],
                   cells: Sequence[Cell], suite: Suite, device: torch.device) -> dict[Cell, dict[str, Any]]:
    """Each cell's success rate, mean return, mean length and per-episode successes for a policy (checkpoint
    `state`, its run's config `run_cfg`): one env per vehicle holds all of its cells (a distinct env config
    builds its own compiled step)."""
    results: dict[Cell, dict[str, Any]] = {}
    n = suite.episodes
    winds = wind_forces(n, suite.wind, suite.seed)
    by_vehicle: dict[str, list[Cell]] = {}
    for cell in cells:
        by_vehicle.setdefault(cell.vehicle, []).append(cell)
    for vehicle, batch in by_vehicle.items():
        env = make_vector_env(run_cfg.env, n * len(batch), device, overrides=vehicle_overrides(vehicle, suite))
        try:
            check_compatible(dict(state), env_spec(env, run_cfg.env.id), same_env=suite.task is None)
            starts = {}
            for name in sorted({cell.start_set for cell in batch}):
                try:
                    starts[name] = start_states(env.config, suite.start_sets[name], n, suite.seed)
                except ConfigError as error:  # e.g. takeoff_land's ground starts: named neither the set nor the task
                    flown = f"task={suite.task}" if suite.task else f"the run's task {env.config.task}"
                    raise ConfigError(f"start_sets.{name} cannot start {flown}: {error}") from None
            result = evaluate_policy(policy, env, suite.seed, device, _reset_options(batch, starts, winds))
        finally:
            env.close()
        for i, cell in enumerate(batch):
            block = slice(i * n, (i + 1) * n)
            results[cell] = {"success_rate": float(result["successes"][block].mean()),
                             "mean_return": float(result["returns"][block].mean()),
                             "mean_length": float(result["lengths"][block].mean()),
                             "successes": result["successes"][block]}
    return results


def load_flying(run: str | Path, checkpoint: str | None, device: torch.device,
                task: str | None) -> tuple[dict[str, Any], DictConfig, Any]:
    """A run's policy (load_policy) with its env config flying `task` on the run's vehicles (None: its own)."""
    state, run_cfg, agent = load_policy(run, checkpoint, device)
    if task is not None:
        check_quadrotor_env(run_cfg.env.id, f"run={run}", SUITE)
        run_cfg = OmegaConf.merge(run_cfg, {"env": task_env(run_cfg.env, task)})
    return state, run_cfg, agent


def run_suite(run: str | Path, suite: Suite, checkpoint: str | None = "best", device: str = "auto") -> dict[str, Any]:
    """The suite's results for a run's policy (and its specialists), as the JSON the command writes."""
    start = time.perf_counter()
    device_ = select_device(device)
    state, run_cfg, agent = load_flying(run, checkpoint, device_, suite.task)
    check_quadrotor_env(run_cfg.env.id, f"run={run}", SUITE)
    cells = suite.cells()
    results = evaluate_cells(state, run_cfg, lambda o: agent.act(o, deterministic=True), cells, suite, device_)
    specialist_results: dict[Cell, dict[str, Any]] = {}  # each cell: the best of the specialists that fly it
    specialist_checkpoints: dict[str, str] = {}
    for name, folder in suite.specialists.items():
        vehicle, latency = specialist_cells(name)
        s_state, s_cfg, s_agent = load_flying(folder, "best", device_, suite.task)
        specialist_checkpoints[name] = str(s_state["path"])
        flown = [cell for cell in suite.cells([vehicle]) if latency in (None, cell.latency_steps)]
        for cell, result in evaluate_cells(s_state, s_cfg, lambda o, a=s_agent: a.act(o, deterministic=True),
                                           flown, suite, device_).items():
            if cell not in specialist_results or result["success_rate"] > specialist_results[cell]["success_rate"]:
                specialist_results[cell] = {**result, "specialist": name}
    held_out = None
    if suite.held_out_episodes:
        starts = {} if suite.held_out_start_set is None else {
            "initial_state": suite.start_sets[suite.held_out_start_set]}
        env = make_vector_env(run_cfg.env, suite.held_out_episodes, device_, overrides=starts)
        try:
            check_compatible(state, env_spec(env, run_cfg.env.id), same_env=suite.task is None)
            result = evaluate_policy(lambda o: agent.act(o, deterministic=True), env, suite.held_out_seed, device_)
        finally:
            env.close()
        held_out = {"episodes": suite.held_out_episodes, "seed": suite.held_out_seed,
                    "start_set": suite.held_out_start_set,
                    "success_rate": result["success_rate"], "mean_return": result["mean_return"],
                    "mean_length": result["mean_length"],
                    "vehicles": held_out_vehicles(result["params"], result["successes"])}
    rows = []
    for cell in cells:
        r, s = results[cell], specialist_results.get(cell)
        rows.append({**dataclasses.asdict(cell), "success_rate": r["success_rate"], "mean_return": r["mean_return"],
                     "mean_length": r["mean_length"],
                     "specialist_success_rate": None if s is None else s["success_rate"],
                     "specialist": None if s is None else s["specialist"],
                     # per episode (outcome_text), the policy's and its specialist's on the same starts: the checks'
                     # sampling noise
                     "successes": outcome_text(r["successes"]),
                     "specialist_successes": None if s is None else outcome_text(s["successes"])})
    report = {
        "run": str(run), "checkpoint": str(state["path"]), "env_id": str(run_cfg.env.id), "task": suite.task,
        "trained_env_steps": int(state["counters"]["env_steps"]),
        "suite": {**{k: v for k, v in dataclasses.asdict(suite).items() if k != "targets"},
                  "targets": dataclasses.asdict(suite.targets)},
        "specialist_checkpoints": specialist_checkpoints, "cells": rows, "held_out": held_out,
    }
    report["checks"] = target_checks(report, suite)
    report["seconds"] = time.perf_counter() - start
    return report


# What the held-out breakdown groups the vehicles by: (key of held_out_vehicles' rows, label, unit).
HELD_OUT_FEATURES = (("latency_steps", "latency", "steps"), ("thrust_to_weight", "thrust-to-weight", ""),
                     ("motor_tau_fall_ms", "rotor fall", "ms"), ("motor_tau_rise_ms", "rotor rise", "ms"),
                     ("mass_g", "mass", "g"), ("wind_n", "wind", "N"))


def held_out_vehicles(params: Mapping[str, Any] | None, successes: np.ndarray) -> list[dict[str, float]] | None:
    """One row per held-out vehicle: its drawn mass [g], thrust-to-weight ratio, rotor rise and fall time
    constants [ms], latency [control steps], wind force [N], arm scale, and whether it succeeded (None where
    the env reports no episode parameters)."""
    if params is None:
        return None
    gravity = QuadrotorParams.from_model(load_model()).gravity  # every vehicle's MJCF has the same
    mass = np.asarray(params["mass"], dtype=float)
    ratio = thrust_to_weight(params["thrust_curve"], mass, gravity, params["thrust_scale"])
    columns = {"mass_g": 1e3 * mass, "thrust_to_weight": np.atleast_1d(ratio),
               "motor_tau_rise_ms": 1e3 * np.asarray(params["motor_tau_rise"], dtype=float),
               "motor_tau_fall_ms": 1e3 * np.asarray(params["motor_tau_fall"], dtype=float),
               "latency_steps": np.asarray(params["latency_steps"], dtype=float),
               "wind_n": np.linalg.norm(np.asarray(params["disturbance_force"], dtype=float), axis=1),
               "arm_scale": np.asarray(params["arm_scale"], dtype=float)}
    return [{**{k: round(float(v[i]), 6) for k, v in columns.items()}, "success": bool(successes[i])}
            for i in range(len(successes))]


def held_out_breakdown(vehicles: Sequence[Mapping[str, Any]], key: str) -> list[tuple[float, float, int, float]]:
    """Success of the held-out vehicles grouped by `key`: per distinct value where it takes at most four
    (latency), else per third of the drawn values; rows of (low, high, vehicles, success rate)."""
    values = np.array([v[key] for v in vehicles], dtype=float)
    success = np.array([v["success"] for v in vehicles], dtype=float)
    distinct = np.unique(values)
    if len(distinct) <= 4:
        groups = [(x, x, values == x) for x in distinct]
    else:
        edges = np.quantile(values, [0.0, 1 / 3, 2 / 3, 1.0])
        groups = [(edges[i], edges[i + 1], (values >= edges[i]) & ((values < edges[i + 1]) | (i == 2)))
                  for i in range(3)]
    return [(float(lo), float(hi), int(mask.sum()), float(success[mask].mean())) for lo, hi, mask in groups
            if mask.any()]


def format_held_out_breakdown(vehicles: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per feature of HELD_OUT_FEATURES: the held-out success rate per group of that feature."""
    lines = []
    for key, label, unit in HELD_OUT_FEATURES:
        groups = []
        for lo, hi, n, rate in held_out_breakdown(vehicles, key):
            span = f"{lo:.3g}" if lo == hi else f"{lo:.3g}-{hi:.3g}"
            groups.append(f"{span}: {100 * rate:.0f}% of {n}")
        lines.append(f"  by {label}{f' [{unit}]' if unit else ''}: " + " | ".join(groups))
    return lines


def _lookup(report: Mapping[str, Any]) -> dict[tuple[str, str, int, bool], Mapping[str, Any]]:
    return {(r["vehicle"], r["start_set"], r["latency_steps"], r["wind"]): r for r in report["cells"]}


def _below(rate: float, n: int, target: float) -> str:
    """The verdict on a success rate `rate` over `n` episodes against at least `target`."""
    if rate >= target - 1e-9:
        return PASS
    return FAIL if wilson_upper(rate, n) < target else UNSURE


def _gap(row: Mapping[str, Any]) -> float:
    """How far a cell's policy stays below its specialist (a fraction; negative where it flies more)."""
    return row["specialist_success_rate"] - row["success_rate"]


def _noise(status: str, n: int, option: str = "episodes") -> str:
    """What a check's detail adds where the sampling noise leaves its verdict open (`option`: what sets `n`)."""
    return f"; within the noise of {n} episodes ({option}= more tell)" if status == UNSURE else ""


def target_checks(report: Mapping[str, Any], suite: Suite) -> list[dict[str, Any]]:
    """The suite's targets as facts: one {check, status (PASS, FAIL, UNSURE or n/a), detail} each. A rate that
    misses its target is a FAIL only where the miss exceeds the noise of the suite's sampled starts (95%)."""
    t, cells, checks = suite.targets, _lookup(report), []
    latencies = [v for v in t.latency_steps if v in suite.latency_steps]
    n = int(suite.episodes)
    for vehicle in suite.vehicles:
        name = f"{vehicle}: >= {100 * t.min_success:.0f}% from {t.start_set} starts at latency " \
               f"{', '.join(map(str, t.latency_steps))}, with and without wind"
        if t.start_set not in suite.start_sets or len(latencies) != len(t.latency_steps):
            checks.append({"check": name, "status": NOT_CHECKED, "detail": "not in this suite"})
            continue
        rows = [cells[(vehicle, t.start_set, v, w)] for v in latencies for w in (False, True)]
        worst = min(rows, key=lambda r: r["success_rate"])
        verdicts = [_below(r["success_rate"], n, t.min_success) for r in rows]
        status = FAIL if FAIL in verdicts else UNSURE if UNSURE in verdicts else PASS
        checks.append({"check": name, "status": status,
                       "detail": f"lowest {100 * worst['success_rate']:.0f}% (latency {worst['latency_steps']}"
                                 f"{', wind' if worst['wind'] else ''})" + _noise(status, n)})
    for vehicle in suite.vehicles:
        name = f"{vehicle}: from {t.specialist_start_set} starts within {100 * t.specialist_gap:.0f} points " \
               "of its specialist"
        if t.specialist_start_set not in suite.start_sets:
            checks.append({"check": name, "status": "n/a", "detail": "not in this suite"})
            continue
        rows = [r for r in report["cells"] if r["vehicle"] == vehicle and r["start_set"] == t.specialist_start_set
                and r["specialist_success_rate"] is not None]
        if not rows:
            checks.append({"check": name, "status": NOT_CHECKED,
                           "detail": f"no specialist (specialists.{vehicle}=<run>)"})
            continue
        if max(r["specialist_success_rate"] for r in rows) == 0.0:  # it passed "0% vs 0%": no ceiling to be near
            checks.append({"check": name, "status": NOT_CHECKED,
                           "detail": f"its specialist ({rows[0]['specialist']}) flies none of these starts: no ceiling; "
                                     "train it"})
            continue
        worst = max(rows, key=_gap)
        verdicts = [PASS if _gap(r) <= t.specialist_gap + 1e-9 else FAIL if _gap(r) - gap_margin(r) > t.specialist_gap
                    else UNSURE for r in rows]
        status = FAIL if FAIL in verdicts else UNSURE if UNSURE in verdicts else PASS
        margin = gap_margin(worst)
        checks.append({"check": name, "status": status,
                       "detail": f"largest gap {100 * _gap(worst):+.0f}" + (f" +- {100 * margin:.0f}" if margin else "")
                                 + f" points: {100 * worst['success_rate']:.0f}% vs "
                                 f"{100 * worst['specialist_success_rate']:.0f}% of {worst['specialist']} (latency "
                                 f"{worst['latency_steps']}{', wind' if worst['wind'] else ''})" + _noise(status, n)})
    held_out = report.get("held_out")
    name = f"held-out vehicles from the training distribution: >= {100 * t.held_out:.0f}%"
    if held_out is None:
        checks.append({"check": name, "status": NOT_CHECKED, "detail": "held_out.episodes=0"})
    else:
        status = _below(held_out["success_rate"], int(held_out["episodes"]), t.held_out)
        checks.append({"check": name, "status": status,
                       "detail": f"{100 * held_out['success_rate']:.0f}% over {held_out['episodes']} vehicles "
                                 f"(seed {held_out['seed']})"
                                 + _noise(status, int(held_out["episodes"]), "held_out.episodes")})
    return checks


def table_grid(report: Mapping[str, Any]) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Row labels (vehicle, start set), column labels (latency, wind) and the success rates of the policy
    and of the specialists (nan where none) as (rows, columns) arrays."""
    suite, cells = report["suite"], _lookup(report)
    rows = [(v, s) for v in suite["vehicles"] for s in suite["start_sets"]]
    columns = [(lat, w) for w in (False, True) for lat in suite["latency_steps"]]
    policy = np.array([[cells[(v, s, lat, w)]["success_rate"] for lat, w in columns] for v, s in rows])
    specialist = np.array([[np.nan if cells[(v, s, lat, w)]["specialist_success_rate"] is None
                            else cells[(v, s, lat, w)]["specialist_success_rate"] for lat, w in columns]
                           for v, s in rows])
    return ([f"{v} / {s}" for v, s in rows], [f"lat {lat}{' + wind' if w else ''}" for lat, w in columns],
            policy, specialist)


def format_table(report: Mapping[str, Any]) -> str:
    """The suite's table (success in %, `policy / specialist` where a specialist flew the cell), the held-out
    vehicles and the PASS/FAIL/UNSURE lines."""
    suite = report["suite"]
    row_labels, column_labels, policy, specialist = table_grid(report)
    cell_width = 9 if np.isfinite(specialist).any() else 5
    label_width = max(len(label) for label in row_labels) + 1
    lines = [f"{report['task']}: " * bool(report.get("task")) + f"success [%] over {suite['episodes']} episodes per cell (seed {suite['seed']}; same starts in every "
             f"cell of a start set; wind: constant force uniform in +-{suite['wind']:g} N per axis)"
             + ("; policy / specialist" if cell_width == 9 else ""),
             f"{'vehicle / starts':{label_width}s}"
             + "".join(f"{c:>{max(cell_width, len(c)) + 1}s}" for c in column_labels)]
    for i, label in enumerate(row_labels):
        line = f"{label:{label_width}s}"
        for j, column in enumerate(column_labels):
            text = f"{100 * policy[i, j]:.0f}"
            if np.isfinite(specialist[i, j]):
                text += f" / {100 * specialist[i, j]:.0f}"
            line += f"{text:>{max(cell_width, len(column)) + 1}s}"
        lines.append(line)
    held_out = report.get("held_out")
    if held_out is not None:
        starts = held_out.get("start_set") or "the run's own"
        lines.append(f"held-out vehicles (the run's training distribution, seed {held_out['seed']}, {starts} starts): "
                     f"{100 * held_out['success_rate']:.0f}% over {held_out['episodes']} episodes")
        if held_out.get("vehicles"):
            lines += format_held_out_breakdown(held_out["vehicles"])
    lines.append("targets:")
    lines += [f"  {c['status']:6s} {c['check']}: {c['detail']}" for c in report["checks"]]
    return "\n".join(lines)


def write_report(report: Mapping[str, Any], folder: str | Path) -> tuple[Path, Path]:
    """robustness.json and the heatmap robustness.png in `folder`."""
    from robo_rl.plotting import plot_robustness_heatmap

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    row_labels, column_labels, policy, specialist = table_grid(report)
    held_out = report.get("held_out")
    title = f"{report['run']} ({report['trained_env_steps']:,} env steps)"
    if held_out is not None:
        title += f"; held-out vehicles {100 * held_out['success_rate']:.0f}%"
    png_path = plot_robustness_heatmap(row_labels, column_labels, policy, folder / "robustness.png", title,
                                       specialist=specialist if np.isfinite(specialist).any() else None)
    # the record last, and whole: a Ctrl-C while plotting left robustness.json without its heatmap
    json_path = write_atomically(folder / "robustness.json", lambda f: f.write(json.dumps(report, indent=2).encode()))
    return json_path, png_path


@hydra_command(config_path="../configs", config_name="robustness")
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    from hydra.core.hydra_config import HydraConfig

    # One thread: a forward pass on a vehicle's 1,600 observations gains nothing from a second, and its
    # OpenMP workers spin on cores that other processes need: a vehicle's cells took 0.7 s on one thread
    # and 17-22 s on two beside a training run on this 2-core machine.
    torch.set_num_threads(1)
    report = run_suite(cfg.run, suite_from_config(cfg), cfg.checkpoint, cfg.device)
    json_path, png_path = write_report(report, HydraConfig.get().runtime.output_dir)
    print(format_table(report))
    print(f"{len(report['cells'])} cells and {report['held_out']['episodes'] if report['held_out'] else 0} held-out "
          f"episodes in {report['seconds']:.1f} s; written to {json_path} and {png_path}")


if __name__ == "__main__":
    main()
