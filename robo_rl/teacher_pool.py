"""A pool of per-vehicle teachers for `robo_rl.distill` (`teacher_pool=<folder>`): RAPTOR's recipe at the scale
of this project.

A pool is a folder of training runs, each trained on one vehicle (its `env.overrides.vehicle_overrides` or a
named vehicle) at the latencies its config gives, e.g. the specialists that `bench/teacher_pool.py` trains on
vehicles drawn from a family's distribution. Where the family teachers fly a vehicle badly (at 20-30 ms of
latency they fly 0-4% of the held-out vehicles that a specialist flies: bench/RESULTS.md, session 18), a share of
the student's rollouts flies the pool's own vehicles instead, each labelled by the run trained on it.

A member reads the student's observation cut to its own size: its layout is the student's with the same past
actions and fewer or as many past states (`sim.quadrotor.observation.quadrotor_layout` appends them last),
and it sees the position error limited by its own `position_error_limit`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf

from robo_rl.checkpoint import BEST_POLICY, is_run_dir
from sim.errors import ConfigError
from sim.kernel_expr import ArrayMath
from sim.quadrotor.observation import limited_position_error

SUMMARY = "summary.json"


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
    `latency_from`, flies its vehicle only at that many control steps or more; ConfigError naming what does not
    fit."""
    members = pool_members(folder, option)
    kept = [m for m in members if m.best_success >= min_success]
    if not kept:
        best = max(m.best_success for m in members)
        raise ConfigError(f"teacher_pool_min_success={min_success}: none of the {len(members)} runs of {option}="
                          f"{folder} reached it (best {best:.2f}); lower it")
    for member in kept:
        if member.env.id != env_id:
            raise ConfigError(f"{option}: {member.run} flies {member.env.id}, the student {env_id}")
        overrides = member.env.get("overrides") or {}
        own = {"action_history": int(overrides.get("action_history", student_env.action_history)),
               "state_history": int(overrides.get("state_history", 0)), "position_error_limit": error_limit(member.env)}
        if own["action_history"] != student_env.action_history or own["state_history"] > student_env.state_history:
            raise ConfigError(f"{option}: {member.run} reads {own['action_history']} past actions and "
                              f"{own['state_history']} past states, the student {student_env.action_history} and "
                              f"{student_env.state_history}: a member needs the same past actions and no more past states")
        if student_env.position_error_limit not in (0.0, own["position_error_limit"]):
            raise ConfigError(f"{option}: {member.run} observes the position error limited to "
                              f"{own['position_error_limit']} m, the student to {student_env.position_error_limit} m: "
                              "give the student the same limit or none (env_overrides={position_error_limit: 0.0})")
        if latency_from is not None and member.latency_steps[0] < latency_from:
            raise ConfigError(f"teacher_pool_latency_from={latency_from}: {member.run} flies its vehicle at "
                              f"{member.latency_steps[0]} control steps; the pool must fly only the latencies "
                              "from it on")
    return kept


def error_limit(env_cfg: DictConfig) -> float:
    """The position error limit [m] an env config observes with (0: none)."""
    return float((env_cfg.get("overrides") or {}).get("position_error_limit", 0.0))


def teacher_input(obs_dim: int, position_error_limit: float, student_limit: float = 0.0
                  ) -> Callable[[torch.Tensor], torch.Tensor]:
    """What a teacher trained on `obs_dim` inputs with this `position_error_limit` [m] observes of a student's
    observation whose position error is limited to `student_limit` (0: none): its leading `obs_dim` entries (the
    same fields and past actions, the past states cut to the teacher's), the error limited as the teacher's was
    where the student's is not limited alike."""
    m = ArrayMath(torch)
    limit = position_error_limit if position_error_limit not in (0.0, student_limit) else 0.0

    def project(obs: torch.Tensor) -> torch.Tensor:
        obs = obs[:, :obs_dim]
        if not limit:
            return obs
        error = limited_position_error(m, [obs[:, k] for k in range(3)], limit)
        return torch.cat([torch.stack(error, 1), obs[:, 3:]], 1)

    return project


def member_env(member: PoolMember, student_env: Any, task_env: Callable[[DictConfig], DictConfig]) -> DictConfig:
    """The env config of the rollouts that fly `member`'s vehicle: its own run's (vehicle, randomization,
    latency) flying the student's task (`task_env`), observed as the student (`student_env`, a
    QuadrotorEnvConfig) observes."""
    observation = {key: getattr(student_env, key) for key in ("action_history", "state_history", "position_error_limit")}
    plain = OmegaConf.create(OmegaConf.to_container(task_env(member.env), resolve=True))
    return OmegaConf.merge(plain, {"privileged_actor": False, "overrides": observation})
