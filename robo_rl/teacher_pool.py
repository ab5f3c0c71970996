"""A pool of per-vehicle teachers for `robo_rl.distill` (`teacher_pool=<folder>`): RAPTOR's recipe at the scale
of this project.

A pool is a folder of training runs, each trained on one vehicle (its `env.overrides.vehicle_overrides` or a
named vehicle) at the latencies its config gives, e.g. the specialists that `bench/teacher_pool.py` trains on
vehicles drawn from a family's distribution. Where the family teachers fly a vehicle badly (at 20-30 ms of
latency they fly 0-4% of the held-out vehicles that a specialist flies: bench/RESULTS.md, session 18), a share of
the student's rollouts flies the pool's own vehicles instead, each labelled by the run trained on it.

`python -m robo_rl.teacher_pool run=<run>` makes a pool: it draws `size` vehicles from the run's training
distribution (those at `min_latency` control steps or more) and trains a specialist on each
(configs/experiment/specialist.yaml at the vehicle's drawn latency, `jobs` at a time), into `out`/v<i>, with the
draw in `out`/pool.json. `focus` regions add members after those where a plain draw holds few (the light,
slow-rotor Crazyflies at 20 ms: bench/RESULTS.md, session 25). Each member is a plain `robo_rl.train` run (ended
at its first evaluation of `stop_at_success` where that is given); a rerun
trains only the missing ones, so that a pool grows by focus regions without training its members again. A
member observes its position error limited as the distribution it is drawn from does (`position_error_limit`), so
that the student distilled from that distribution keeps its limit.

A member reads the student's observation cut to its own size: its layout is the student's with the same past
actions and fewer or as many past states (`sim.quadrotor.observation.quadrotor_layout` appends them last),
and it sees the position error limited by its own `position_error_limit`.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from tqdm import tqdm

from robo_rl.checkpoint import BEST_POLICY, is_run_dir, require_run_dir
from robo_rl.cli import hydra_command, hydra_value
from sim.errors import ConfigError
from sim.kernel_expr import ArrayMath
from sim.quadrotor.model import thrust_to_weight
from sim.quadrotor.observation import limited_position_error

SUMMARY = "summary.json"
POOL_FILE = "pool.json"
DRAW_FACTOR = 8  # with min_latency, vehicles drawn per member wanted: latencies 2-3 are half of a 0-3 draw


class MemberFailed(RuntimeError):
    """A pool member's training run exited with an error (its log says why)."""


@dataclass
class PoolMember:
    """One run of a pool: its folder, the best success rate its training evaluations reached, its env config."""

    run: Path
    best_success: float
    env: DictConfig

    @property
    def latency_steps(self) -> tuple[int, int]:
        """The [low, high] control-step latency its vehicle was trained at."""
        low, high = (self.env.get("overrides") or {}).get("randomization", {}).get("latency_steps", (0, 1))
        return int(low), int(high)


def _natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that puts v2 before v10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def pool_members(folder: Any, option: str = "teacher_pool") -> list[PoolMember]:
    """Every run in `folder` (its sub-folders holding a config.yaml), in natural name order; ConfigError naming
    `option` for a folder that holds no run, or a run that has not finished (no best_policy.pt or summary.json)."""
    path = Path(str(folder))
    if not path.is_dir():
        raise ConfigError(f"{option}={folder} is not a folder; give the folder of the pool's runs")
    if is_run_dir(path):  # its .hydra folder holds a config.yaml too: it read as an unfinished member
        raise ConfigError(f"{option}={folder} is a training run, not a pool; give the folder that holds the pool's "
                          "runs (python -m robo_rl.teacher_pool out=...)")
    runs = sorted((p for p in path.iterdir() if p.is_dir() and is_run_dir(p)), key=lambda p: _natural_key(p.name))
    if not runs:
        raise ConfigError(f"{option}={folder} holds no training run (sub-folders with the config.yaml that "
                          "`python -m robo_rl.train` writes)")
    members = []
    for run in runs:
        if not (run / BEST_POLICY).is_file() or not (run / SUMMARY).is_file():
            raise ConfigError(f"{option}={folder}: {run.name} has not finished training (no {BEST_POLICY} or "
                              f"{SUMMARY}); let it finish or move it out of the pool")
        try:
            history = json.loads((run / SUMMARY).read_text())["history"]
            best = max(float(entry["success_rate"]) for entry in history)
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{option}={folder}: {run / SUMMARY} is not a training summary ({error})") from None
        members.append(PoolMember(run, best, OmegaConf.load(run / "config.yaml").env))
    return members


def kept_members(folder: Any, min_success: float, env_id: str, student_env: Any, latency_from: int | None,
                 option: str = "teacher_pool") -> list[PoolMember]:
    """The members of the pool in `folder` whose best evaluation reached `min_success`, after checking that
    each flies `env_id`, reads the student's observation (`student_env`, a QuadrotorEnvConfig) and, with
    `latency_from`, that some of them fly their vehicles at that many control steps or more (the family's
    rollouts fly only the latencies below it); ConfigError naming what does not fit."""
    from robo_rl.envs import check_env_config

    members = pool_members(folder, option)
    kept = [m for m in members if m.best_success >= min_success]
    if not kept:
        best = max(m.best_success for m in members)
        raise ConfigError(f"teacher_pool_min_success={min_success}: none of the {len(members)} runs of {option}="
                          f"{folder} reached it (best {best:.2f}); lower it")
    for member in kept:
        if member.env.id != env_id:
            raise ConfigError(f"{option}: {member.run} flies {member.env.id}, the student {env_id}")
        try:  # its env config with its task's defaults filled in
            own = check_env_config(OmegaConf.to_container(member.env, resolve=True))
        except ConfigError as error:
            raise ConfigError(f"{option}: {member.run}/config.yaml holds no valid env ({error})") from None
        limit = own.position_error_limit
        check_reads_histories(f"{option}: {member.run}", own.action_history, own.state_history, student_env)
        if student_env.position_error_limit not in (0.0, limit):
            raise ConfigError(f"{option}: {member.run} observes the position error limited to "
                              f"{limit} m, the student to {student_env.position_error_limit} m: "
                              "give the student the same limit or none (env_overrides={position_error_limit: 0.0})")
    if latency_from is not None and all(m.latency_steps[1] < latency_from for m in kept):
        raise ConfigError(f"teacher_pool_latency_from={latency_from}: none of the {len(kept)} kept runs of {option}="
                          f"{folder} flies its vehicle at that many control steps or more, so no rollout would fly "
                          "those latencies; lower it or give a pool trained at them")
    return kept


def check_reads_histories(teacher: str, action_history: int, state_history: int, student_env: Any) -> None:
    """ConfigError unless a teacher (named by `teacher` in the error) trained on `action_history` past actions
    and `state_history` past states can read the observation of the student's env config `student_env`: the
    same past actions and no more past states (it reads the newest)."""
    if action_history != student_env.action_history or state_history > student_env.state_history:
        raise ConfigError(f"{teacher} reads {action_history} past actions and {state_history} past states, the "
                          f"student {student_env.action_history} and {student_env.state_history}: a teacher needs "
                          "the same past actions and no more past states than the student")


def error_limit(env_cfg: DictConfig) -> float:
    """The position error limit [m] an env config observes with (0: none)."""
    return float((env_cfg.get("overrides") or {}).get("position_error_limit", 0.0))


def teacher_input(obs_dim: int, position_error_limit: float, student_limit: float = 0.0, unread: slice | None = None
                  ) -> Callable[[torch.Tensor], torch.Tensor]:
    """What a teacher trained on `obs_dim` inputs with this `position_error_limit` [m] observes of a student's
    observation whose position error is limited to `student_limit` (0: none): its leading `obs_dim` entries (the
    same fields and past actions, the past states cut to the teacher's) once the `unread` entries are left out
    (the student's older past states, which a privileged observation holds before its privileged rows), the
    error limited as the teacher's was where the student's is not limited alike."""
    m = ArrayMath(torch)
    limit = position_error_limit if position_error_limit not in (0.0, student_limit) else 0.0

    def project(obs: torch.Tensor) -> torch.Tensor:
        if unread is not None and unread.stop > unread.start:
            obs = torch.cat([obs[:, :unread.start], obs[:, unread.stop:]], 1)
        obs = obs[:, :obs_dim]
        if not limit:
            return obs
        error = limited_position_error(m, [obs[:, k] for k in range(3)], limit)
        return torch.cat([torch.stack(error, 1), obs[:, 3:]], 1)

    return project


def member_env(member: PoolMember, student_env: Any, task_env: Callable[[DictConfig], DictConfig],
               episode_seconds: float | None = None) -> DictConfig:
    """The env config of the rollouts that fly `member`'s vehicle: its own run's (vehicle, randomization,
    latency) flying the student's task (`task_env`), observed as the student (`student_env`, a
    QuadrotorEnvConfig) observes, in episodes of `episode_seconds` (None: the task's own)."""
    overrides: dict[str, Any] = {key: getattr(student_env, key)
                                 for key in ("action_history", "state_history", "position_error_limit")}
    if episode_seconds is not None:
        overrides["episode_seconds"] = float(episode_seconds)
    plain = OmegaConf.create(OmegaConf.to_container(task_env(member.env), resolve=True))
    return OmegaConf.merge(plain, {"privileged_actor": False, "overrides": overrides})


@dataclass(frozen=True)
class FocusRegion:
    """`size` more pool vehicles where the plain draw is thin: those of the same distribution whose drawn
    values (FOCUS_KEYS) lie in the `where` ranges, both ends included."""

    size: int
    where: dict[str, tuple[float, float]]


# what a focus region may bound: a drawn vehicle's fields, and its thrust-to-weight ratio at full thrust
FOCUS_KEYS = ("latency_steps", "thrust_to_weight", "mass", "motor_tau_rise", "motor_tau_fall", "rotor_offset",
              "yaw_torque_ratio")
FOCUS_BATCH = 4096  # vehicles drawn at once while looking for a region's
FOCUS_MAX_DRAWS = 64 * FOCUS_BATCH


def focus_regions(focus: Any, option: str = "focus") -> list[FocusRegion]:
    """The regions of a `focus` option (a list of {size, where: {key: [low, high]}}); ConfigError naming the
    entry and what is allowed otherwise."""
    entries = OmegaConf.to_container(focus, resolve=True) if isinstance(focus, (DictConfig, ListConfig)) else focus
    if entries is None:
        return []
    allowed = f"a list of {{size: <vehicles>, where: {{<{'|'.join(FOCUS_KEYS)}>: [low, high]}}}}"
    if not isinstance(entries, list):
        raise ConfigError(f"{option} must be {allowed}, got {entries!r}")
    regions = []
    for k, entry in enumerate(entries):
        name = f"{option}[{k}]"
        if not isinstance(entry, dict) or set(entry) != {"size", "where"}:
            raise ConfigError(f"{name} must be {{size: <vehicles>, where: {{<key>: [low, high]}}}}, got {entry!r}")
        size, where = entry["size"], entry["where"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"{name}.size must be a whole number of vehicles >= 1, got {size!r}")
        if not isinstance(where, dict) or not where:
            raise ConfigError(f"{name}.where must bound at least one of {', '.join(FOCUS_KEYS)} by [low, high], "
                              f"got {where!r}")
        bounds = {}
        for key, value in where.items():
            if key not in FOCUS_KEYS:
                raise ConfigError(f"{name}.where.{key}: not a drawn value; bound one of {', '.join(FOCUS_KEYS)}")
            if (not isinstance(value, list) or len(value) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in value)
                    or value[0] > value[1]):
                raise ConfigError(f"{name}.where.{key} must be [low, high] with finite low <= high, got {value!r}")
            bounds[key] = (float(value[0]), float(value[1]))
        regions.append(FocusRegion(size, bounds))
    return regions


def in_region(vehicle: dict[str, Any], region: FocusRegion, gravity: float) -> bool:
    """Whether a drawn pool vehicle (`drawn_vehicles`) lies in `region`."""
    values = {**vehicle, "thrust_to_weight": thrust_to_weight(vehicle["thrust_curve"], vehicle["mass"], gravity)}
    return all(low <= values[key] <= high for key, (low, high) in region.where.items())


def draw_vehicles(env_cfg: DictConfig, count: int, seed: int) -> list[dict[str, Any]]:
    """The first `count` vehicles that `env_cfg`'s distribution draws with `seed` (`drawn_vehicles`)."""
    from robo_rl.envs import make_vector_env

    env = make_vector_env(env_cfg, count, torch.device("cpu"))
    _, info = env.reset(seed=seed)
    env.close()
    return drawn_vehicles(info["params"], nominal_rotor_offset(env_cfg))


def draw_pool(env_cfg: DictConfig, size: int, seed: int, min_latency: int = 0,
              focus: Sequence[FocusRegion] = ()) -> list[dict[str, Any]]:
    """`size` vehicles of the distribution `env_cfg` draws (its difficulty as given), each as the
    `vehicle_overrides` of a specialist's config plus its `latency_steps`: the first `size` drawn at
    `min_latency` control steps or more; then each `focus` region's vehicles, drawn from a stream of their own
    so that the plain members stay those of a pool without them, at `min_latency` or more unless the region
    bounds `latency_steps` itself. Every env is seeded on its own, so a larger
    draw of the same seed begins with a smaller one's vehicles. ConfigError where too few reach `min_latency`
    or a region is too rare to fill."""
    count = size if min_latency == 0 else DRAW_FACTOR * size
    drawn = draw_vehicles(env_cfg, count, seed)
    pool = [member for member in drawn if member["latency_steps"] >= min_latency][:size]
    if len(pool) < size:
        raise ConfigError(f"min_latency={min_latency}: only {len(pool)} of {len(drawn)} drawn vehicles act that late; "
                          "lower it or size")
    if focus:
        from sim.quadrotor.model import QuadrotorParams, load_model

        gravity = QuadrotorParams.from_model(load_model()).gravity  # every vehicle's MJCF has the same
    for k, region in enumerate(focus):
        found: list[dict[str, Any]] = []
        for batch in range(FOCUS_MAX_DRAWS // FOCUS_BATCH):
            stream = int(np.random.SeedSequence([seed, k, batch]).generate_state(1)[0])
            found += [v for v in draw_vehicles(env_cfg, FOCUS_BATCH, stream)
                      if ("latency_steps" in region.where or v["latency_steps"] >= min_latency)
                      and in_region(v, region, gravity)]
            if len(found) >= region.size:
                break
        if len(found) < region.size:
            raise ConfigError(f"focus[{k}]: only {len(found)} of {FOCUS_MAX_DRAWS} drawn vehicles lie in "
                              f"{region.where}; widen it or lower its size")
        pool += found[:region.size]
    return pool


def nominal_rotor_offset(env_cfg: DictConfig) -> float:
    """How far out along x and y [m] the rotors of the vehicle that `env_cfg` randomizes around lie."""
    from robo_rl.envs import check_env_config
    from sim.quadrotor.config import vehicle_from_config
    from sim.quadrotor.model import QuadrotorParams, load_model

    nominal = QuadrotorParams.from_model(load_model(vehicle_from_config(
        check_env_config(OmegaConf.to_container(env_cfg, resolve=True)))))
    return float(np.abs(nominal.rotor_positions[0, 0]))


def drawn_vehicles(params: dict[str, Any], rotor_offset: float) -> list[dict[str, Any]]:
    """Each env's drawn vehicle, from the episode parameters an env reports (`info["params"]`) of a
    distribution around a vehicle whose rotors lie `rotor_offset` [m] out along x and y, as
    `vehicle_overrides` of a specialist's config plus its `latency_steps`."""
    p = {k: np.asarray(v) for k, v in params.items()}
    return [{"mass": float(p["mass"][i]), "inertia": [float(x) for x in p["inertia"][i]],
             "rotor_offset": float(rotor_offset * p["arm_scale"][i]),
             "thrust_curve": [float(x) for x in p["thrust_curve"][i]],
             "yaw_torque_ratio": float(np.abs(p["yaw_torque_coefficients"][i]).mean()),
             "motor_tau_rise": float(p["motor_tau_rise"][i]), "motor_tau_fall": float(p["motor_tau_fall"][i]),
             "latency_steps": int(p["latency_steps"][i])} for i in range(len(p["mass"]))]


def trained_on(run: Path, vehicle: dict[str, Any], latency: int, position_error_limit: float = 0.0) -> bool:
    """Whether the run in `run` trained on this vehicle (its vehicle_overrides) at this latency alone, observing
    its position error with this limit [m] (0: none)."""
    env = OmegaConf.load(run / "config.yaml").env
    own = OmegaConf.to_container(env.overrides.get("vehicle_overrides") or {})
    same = set(own) == set(vehicle) and all(np.allclose(own[k], vehicle[k], rtol=1e-9, atol=0.0) for k in vehicle)
    return (same and list(env.overrides.randomization.latency_steps) == [latency, latency]
            and error_limit(env) == position_error_limit)


def check_pool_folder(folder: Path, pool: list[dict[str, Any]], option: str = "out",
                      position_error_limit: float = 0.0) -> None:
    """ConfigError unless `folder` is new or a folder of this pool: every member it already holds (v<i>) was
    trained on the pool's i-th vehicle at its latency, observing the pool's position error limit (not another
    seed's, size's or distribution's)."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{option}={folder} is a file; give a new folder or this pool's")
    for i, member in enumerate(pool):
        vehicle = {k: v for k, v in member.items() if k != "latency_steps"}
        run = folder / f"v{i}"
        if (run / "config.yaml").is_file() and not trained_on(run, vehicle, member["latency_steps"], position_error_limit):
            raise ConfigError(f"{option}={folder}: v{i} was trained on another vehicle, latency or position error "
                              "limit than this pool draws (another run, seed, min_latency, focus or env_overrides); give a "
                              "new folder")


# what a member's training takes from the command besides its vehicle: a rerun that changes one of them would keep
# the members trained so far and record the new value over theirs in pool.json
MEMBER_TRAINING = ("steps", "stop_at_success", "overrides")


def check_same_training(folder: Path, record: dict[str, Any]) -> None:
    """ConfigError where `folder` holds members trained with other MEMBER_TRAINING options (its pool.json) than the
    rerun's `record`: pool.json would then describe the kept members wrongly."""
    kept = [run.name for run in sorted(folder.glob("v*")) if (run / SUMMARY).is_file()] if folder.is_dir() else []
    if not kept or not (folder / POOL_FILE).is_file():
        return
    recorded = json.loads((folder / POOL_FILE).read_text())
    for option in MEMBER_TRAINING:
        if option in recorded and recorded[option] != record[option]:
            raise ConfigError(f"{option}={record[option]}: the {len(kept)} members already in out={folder} trained with "
                              f"{option}={recorded[option]} ({POOL_FILE}); give that, or a new folder")


def limit_overrides(position_error_limit: float) -> list[str]:
    """The `robo_rl.train` overrides that make a member observe its position error limited to this [m] (0: none)."""
    return [f"++env.overrides.position_error_limit={position_error_limit}"] if position_error_limit else []


def member_command(run: Path, member: dict[str, Any], steps: int, overrides: Sequence[str] = ()) -> list[str]:
    """The `robo_rl.train` command that trains the specialist of pool vehicle `member` into `run`, with the
    further Hydra `overrides` of every member."""
    vehicle = json.dumps({k: v for k, v in member.items() if k != "latency_steps"}).replace('"', "")
    latency = member["latency_steps"]
    return [sys.executable, "-m", "robo_rl.train", "+experiment=specialist", f"+env.overrides.vehicle_overrides={vehicle}",
            f"env.overrides.randomization.latency_steps=[{latency},{latency}]", f"total_env_steps={steps}",
            "torch_threads=1", "logging.progress_bar=false", *overrides, f"hydra.run.dir={hydra_value(run)}"]


def check_member_overrides(member: dict[str, Any], overrides: Sequence[str], steps: int) -> None:
    """ConfigError naming `overrides=` where the member command they make does not compose (an unknown key, bad
    syntax) or `robo_rl.train` would refuse it (a value out of range), so that a mistake is refused once, not by
    every member in its log after the pool has started."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    from robo_rl.cli import is_user_error, one_line, unknown_option
    from robo_rl.options import check_options

    given = [str(arg).lstrip("+~").split("=", 1)[0] for arg in overrides]
    owned = [key for key in given if key in ("resume", "hydra.run.dir")]
    if owned:  # each member failed after the pool had started: a resume continues another run, not a new member
        raise ConfigError(f"overrides={list(overrides)}: {owned[0]} is the pool's own (each member is a new run, "
                          f"<out>/v<i>); leave it out")
    if not overrides or not GlobalHydra.instance().is_initialized():  # outside a Hydra command: the members check
        return
    args = [arg for arg in member_command(Path("unused"), member, steps, overrides)[3:] if not arg.startswith("hydra.")]
    try:
        with warnings.catch_warnings():  # a member's warnings go to its log, as its own run prints them
            warnings.simplefilter("ignore")
            check_options(compose(config_name="train", overrides=args), "train")
    except Exception as error:  # noqa: BLE001 (Hydra's and OmegaConf's composition errors have no common base)
        if not is_user_error(error):
            raise
        raise ConfigError(f"overrides={list(overrides)}: {one_line(unknown_option(error, 'train') or error)}") from None


def best_success(run: Path) -> float:
    """The best success rate a finished run's training evaluations reached."""
    return max(float(entry["success_rate"]) for entry in json.loads((run / SUMMARY).read_text())["history"])


def run_member(folder: Path, index: int, member: dict[str, Any], steps: int, overrides: Sequence[str] = ()) -> int:
    """Train the specialist of pool vehicle `index` into `folder`/v<index>, its log beside it; the exit status.
    Its checkpoints, which hold the replay buffer (about 230 MB each), are deleted: the pool needs its best
    policy."""
    run = folder / f"v{index}"
    shutil.rmtree(run, ignore_errors=True)  # an unfinished attempt (killed mid-run): train refuses a folder with a run
    with open(folder / f"v{index}.log", "w") as log:
        done = subprocess.run(member_command(run, member, steps, overrides), stdout=log, stderr=subprocess.STDOUT)
    if done.returncode == 0:
        shutil.rmtree(run / "checkpoints", ignore_errors=True)
    return done.returncode


def train_member(folder: Path, index: int, member: dict[str, Any], steps: int, overrides: Sequence[str] = ()) -> float:
    """Train the specialist of pool vehicle `index` into `folder`/v<index> (`run_member`), unless it is there; its
    best evaluation's success rate."""
    run = folder / f"v{index}"
    if not (run / SUMMARY).is_file():
        code = run_member(folder, index, member, steps, overrides)
        if code != 0:
            raise MemberFailed(f"training pool vehicle {index} failed (exit {code}): see {folder / f'v{index}.log'}")
    return best_success(run)


def member_files(index: int, member: dict[str, Any], steps: int, overrides: Sequence[str] = ()
                 ) -> tuple[int, dict[str, bytes]]:
    """`run_member` in a temporary folder (on a Ray worker, which need not share the pool's file system): the
    exit status and the files, by name in the pool folder (v<index>.log, and v<index>/... where it finished)."""
    with tempfile.TemporaryDirectory(prefix="teacher_pool_") as tmp:
        code = run_member(Path(tmp), index, member, steps, overrides)
        run = Path(tmp) / f"v{index}"
        files = {f"v{index}.log": (Path(tmp) / f"v{index}.log").read_bytes()}
        if code == 0:
            files.update({f"{run.name}/{p.relative_to(run)}": p.read_bytes() for p in run.rglob("*") if p.is_file()})
        return code, files


def store_member(folder: Path, index: int, files: dict[str, bytes]) -> None:
    """Write a member's files (`member_files`) into `folder`: its run folder appears whole or not at all."""
    incoming = folder / f".v{index}.incoming"
    shutil.rmtree(incoming, ignore_errors=True)
    for name, data in files.items():
        path = folder / name if "/" not in name else incoming / name.split("/", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if incoming.is_dir():
        shutil.rmtree(folder / f"v{index}", ignore_errors=True)  # an unfinished local attempt
        incoming.rename(folder / f"v{index}")


def train_pool(folder: Path, pool: list[dict[str, Any]], steps: int, jobs: int, progress: bool = True,
               ray_address: str | None = None, record: dict[str, Any] | None = None, overrides: Sequence[str] = (),
               position_error_limit: float = 0.0) -> list[float]:
    """A specialist per pool vehicle not yet trained in `folder`; every member's best success. Without
    `ray_address`, `jobs` at a time on this machine; with it (local: a new Ray cluster here; auto or host:port:
    that cluster), each a Ray task of one CPU wherever the cluster has one, its files sent back to `folder`
    as it finishes. Every member observes its position error limited to `position_error_limit` [m] (0: none),
    with the further `robo_rl.train` `overrides`. `record` (the draw) is written to pool.json once the folder
    is known to hold this pool."""
    check_pool_folder(folder, pool, position_error_limit=position_error_limit)
    overrides = limit_overrides(position_error_limit) + list(overrides)
    folder.mkdir(parents=True, exist_ok=True)
    if record is not None:
        check_same_training(folder, record)
        (folder / POOL_FILE).write_text(json.dumps(record, indent=1))
    todo = [(i, member) for i, member in enumerate(pool) if not (folder / f"v{i}" / SUMMARY).is_file()]
    failed: list[int] = []  # the others go on: an unattended pool keeps every member that trains
    with tqdm(total=len(pool), initial=len(pool) - len(todo), desc="teacher pool", unit="vehicle",
              disable=not progress) as bar:
        if ray_address is None:
            with ThreadPoolExecutor(jobs) as workers:
                futures = {workers.submit(train_member, folder, i, member, steps, overrides): i for i, member in todo}
                for future in as_completed(futures):
                    if isinstance(future.exception(), MemberFailed):
                        failed.append(futures[future])
                    elif future.exception() is not None:
                        raise future.exception()
                    bar.update(1)
        else:
            failed = _train_on_ray(folder, todo, steps, overrides, ray_address, bar)
    if failed:
        first = sorted(failed)[0]
        raise RuntimeError(f"{len(failed)} of the {len(todo)} pool members to train failed (v{', v'.join(map(str, sorted(failed)))}); "
                           f"see {folder / f'v{first}.log'} and the others' logs beside it")
    return [best_success(folder / f"v{i}") for i in range(len(pool))]


def _train_on_ray(folder: Path, todo: list[tuple[int, dict[str, Any]]], steps: int, overrides: Sequence[str],
                  address: str, bar: tqdm) -> list[int]:
    """Train `todo`'s members as Ray tasks on the cluster at `address`; the indices of those that failed."""
    import ray

    from robo_rl.distributed.cluster import joined_cluster

    with joined_cluster(None if address == "local" else address, 1, "ray_address", "a specialist reserves", "local"):
        remote = ray.remote(num_cpus=1, max_retries=2)(member_files)  # retried where a node is lost, not on a failed run
        pending = {remote.remote(i, member, steps, list(overrides)): i for i, member in todo}
        failed = []
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(ready)
            code, files = ray.get(ready)
            store_member(folder, index, files)
            if code != 0:
                failed.append(index)
            bar.update(1)
    return failed


# The last draw of `drawn_pool`, keyed by the options it depends on: the option check draws the pool (so that a
# region no draw fills is refused before Hydra makes the folder) and `main` then takes the same draw.
_last_draw: dict[str, tuple[DictConfig, list[dict[str, Any]]]] = {}


def drawn_pool(cfg: DictConfig) -> tuple[DictConfig, list[dict[str, Any]]]:
    """The env config that the `teacher_pool` command's options `cfg` draw the pool from, and the pool's
    vehicles (`draw_pool`); ConfigError where the draw cannot give them."""
    from robo_rl.distill import env_at

    run_config = Path(str(cfg.run)) / "config.yaml"
    key = OmegaConf.to_yaml({"run_config": run_config.read_text(),
                             **{name: cfg[name] for name in ("env_overrides", "size", "seed", "min_latency", "focus")}})
    if key not in _last_draw:
        env_cfg = env_at(OmegaConf.load(run_config).env, 1.0, False, cfg.env_overrides)
        drawn = draw_pool(env_cfg, int(cfg.size), int(cfg.seed), int(cfg.min_latency), focus_regions(cfg.focus))
        _last_draw.clear()
        _last_draw[key] = (env_cfg, drawn)
    env_cfg, pool = _last_draw[key]
    return env_cfg, copy.deepcopy(pool)


@hydra_command(config_path="../configs", config_name="teacher_pool")
def main(cfg: DictConfig) -> None:
    """Draw the pool from the run's distribution, train its missing members, write pool.json, print each best."""
    run = Path(require_run_dir(cfg.run, "run"))
    # the option check's draw lives in the imported module, not in this one where `python -m` runs it as __main__
    env_cfg, pool = importlib.import_module("robo_rl.teacher_pool").drawn_pool(cfg)
    folder = Path(str(cfg.out))
    limit = error_limit(env_cfg)
    record = {"run": str(run), "env_overrides": OmegaConf.to_container(cfg.env_overrides) if cfg.env_overrides else None,
              "size": int(cfg.size), "seed": int(cfg.seed), "min_latency": int(cfg.min_latency),
              "focus": OmegaConf.to_container(cfg.focus, resolve=True) if cfg.focus else [],
              "steps": int(cfg.steps), "stop_at_success": cfg.stop_at_success, "position_error_limit": limit,
              "overrides": list(cfg.overrides), "vehicles": pool}
    stop = [] if cfg.stop_at_success is None else [f"stop_at_success={float(cfg.stop_at_success)}"]
    best = train_pool(folder, pool, int(cfg.steps), int(cfg.jobs), ray_address=cfg.ray_address, record=record,
                      overrides=stop + list(cfg.overrides), position_error_limit=limit)
    for threshold in (0.5, 0.9):
        print(f"{sum(b >= threshold for b in best)} of {len(best)} specialists reached {threshold:.0%}")
    print(f"pool {folder}: python -m robo_rl.distill ... teacher_pool={folder} "
          f"teacher_pool_latency_from={int(cfg.min_latency) or 'null'}")


if __name__ == "__main__":
    main()
