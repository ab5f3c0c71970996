"""Evaluate a trained policy: `python -m robo_rl.evaluate run=<run dir> [vehicle=...] [latency_steps=[2,2]]`.

Runs the deterministic policy of the run's best evaluated (or newest, or a given) checkpoint on `episodes` seeded episodes
of the run's env with the requested changes, prints success rate and mean return, and writes them as
JSON under `<run>/evaluations/`. With `-m` over changes, every job adds a row and the last prints the
robustness table of all evaluations of the run.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robo_rl.checkpoint import agent_from_checkpoint, check_compatible, load_run_policy, write_atomically
from robo_rl.cli import hydra_command
from robo_rl.envs import check_quadrotor_env, env_spec, make_vector_env
from robo_rl.evaluation import evaluate_policy
from robo_rl.train import select_device
from sim.errors import ConfigError


def env_changes(cfg: DictConfig) -> dict[str, Any]:
    """The env config overrides an evaluation config asks for."""
    changes: dict[str, Any] = dict(OmegaConf.to_container(cfg.overrides, resolve=True) or {})
    randomization = dict(OmegaConf.to_container(cfg.randomization, resolve=True) or {}) if cfg.randomization else {}
    if cfg.latency_steps is not None:
        if "latency_steps" in randomization:
            raise ConfigError("latency_steps= and randomization.latency_steps are both given; give one")
        randomization["latency_steps"] = list(cfg.latency_steps)
    # one value per setting: the later one used to replace the other silently, and the record kept only it
    given = changes.get("randomization") or {}
    twice = sorted(set(given) & set(randomization))
    if twice:
        raise ConfigError(f"overrides.randomization and randomization= (or latency_steps=) both set {', '.join(twice)}; "
                          "give each once")
    if randomization:
        changes["randomization"] = {**given, **randomization}
    if cfg.vehicle:
        if "vehicle" in changes:
            raise ConfigError(f"vehicle={cfg.vehicle} and overrides.vehicle={changes['vehicle']} are both given; give one")
        changes["vehicle"] = cfg.vehicle
    return changes


def check_latency_applies(changes: dict[str, Any], env: Any) -> None:
    """ConfigError if `changes` ask for action latency on an env whose randomization is off, which applies none: the
    evaluation ran without it and recorded it as asked (the arm tasks' randomization is off by default)."""
    asked = (changes.get("randomization") or {}).get("latency_steps")
    if asked is not None and not env.config.randomization.enabled:
        raise ConfigError(f"latency_steps={list(asked)}: this run's env has its randomization off, which applies no "
                          "latency; add randomization={enabled: true} (it also draws the task's other randomized "
                          "quantities)")


def load_policy(run: str | Path, checkpoint: str | Path | None,
                device: torch.device) -> tuple[dict[str, Any], DictConfig, Any]:
    """A run's checkpoint (see `evaluate_run`) on `device`: its state, the run's config it records, and the
    agent rebuilt from it (act deterministically with `agent.act(obs, deterministic=True)`)."""
    state = load_run_policy(run, checkpoint, map_location=device)
    return state, OmegaConf.create(state["config"]), agent_from_checkpoint(state, device)


def evaluate_run(run: str | Path, checkpoint: str | Path | None = "best", episodes: int = 100, seed: int = 12345,
                 changes: dict[str, Any] | None = None, device: str = "auto") -> dict[str, Any]:
    """Evaluate a run's policy under env `changes`; returns the result row (also what the CLI writes).

    checkpoint: "best" (the best evaluated policy of the run, else its newest checkpoint), "last", or a file.
    """
    device_ = select_device(device)
    state, run_cfg, agent = load_policy(run, checkpoint, device_)
    if (changes or {}).get("vehicle") is not None:
        # it was the env config's "unknown option config.vehicle; valid options: task, control_hz, ..."
        check_quadrotor_env(run_cfg.env.id, f"vehicle={changes['vehicle']}", "a vehicle")
    env = make_vector_env(run_cfg.env, episodes, device_, overrides=changes or {}, cameras=True)
    try:
        check_latency_applies(changes or {}, env)
        check_compatible(state, env_spec(env, run_cfg.env.id))
        start = time.perf_counter()
        result = evaluate_policy(lambda o: agent.act(o, deterministic=True), env, seed, device_)
    finally:
        env.close()  # its render workers, where it has cameras
    return {
        "run": str(run), "checkpoint": state["path"], "env_id": run_cfg.env.id, "changes": changes or {},
        "episodes": episodes, "seed": seed, "trained_env_steps": state["counters"]["env_steps"],
        "success_rate": result["success_rate"], "mean_return": result["mean_return"],
        "mean_length": result["mean_length"], "seconds": time.perf_counter() - start,
    }


def robustness_table(run: str | Path) -> str:
    """All evaluations recorded for a run, one row each; a file that is not an evaluation's record (torn,
    edited) is left out with a warning naming it."""
    # the changes last and whole (cut at 60 characters, a vehicle's name was lost), and the checkpoint flown (best and
    # last looked alike)
    lines = [f"{'checkpoint':24s} {'episodes':>8s} {'success':>8s} {'return':>9s}  changes"]
    for path in sorted((Path(run) / "evaluations").glob("eval_*.json")):
        try:
            r = json.loads(path.read_text())
            lines.append(f"{Path(str(r.get('checkpoint', '?'))).name:24s} {int(r['episodes']):8d} "
                         f"{100 * float(r['success_rate']):7.1f}% {float(r['mean_return']):9.1f}  "
                         f"{json.dumps(r['changes'])}")
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            warnings.warn(f"{path} is not an evaluation's record ({type(error).__name__}: {error}); left out of the "
                          "table", stacklevel=2)
    return "\n".join(lines)


@hydra_command(config_path="../configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    torch.set_num_threads(2)
    row = evaluate_run(cfg.run, cfg.checkpoint, int(cfg.episodes), int(cfg.seed), env_changes(cfg), cfg.device)
    out = Path(cfg.run) / "evaluations" / f"eval_{time.strftime('%Y%m%d-%H%M%S')}_{time.time_ns() % 10**9:09d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(row, indent=2).encode()
    write_atomically(out, lambda f: f.write(text))  # a kill leaves no torn record for the next table to read
    print(json.dumps(row))
    print(f"success {100 * row['success_rate']:.1f}% over {row['episodes']} episodes, mean return "
          f"{row['mean_return']:.1f} (changes: {row['changes'] or 'none'}); written to {out}")
    print(robustness_table(cfg.run))


if __name__ == "__main__":
    main()
