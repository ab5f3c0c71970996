"""Train an agent: `python -m robo_rl.train env=hover seed=1 ...` (Hydra; `-m seed=0,1,2` sweeps).

The loop: batched collection in `num_envs` simulated robots, transitions into the replay buffer, SAC
updates, and every `eval.interval_env_steps` a deterministic evaluation on `eval.episodes` seeded
episodes, TensorBoard scalars and an atomic checkpoint. At the end: a final evaluation, a checkpoint,
`learning_curve.png` and `summary.json` in the run directory. `demos=<Minari dataset id or directory>` loads
demonstrations into the offline pool; `intervention=scripted` lets the env's scripted expert take over
stalled episodes (robo_rl.interventions), tagging those transitions as interventions. `resume=<run dir>` continues a run from its
newest intact checkpoint (networks, optimizers, temperature, buffers, counters, RNG states; episodes that were
in flight restart) with its own config: only RESUME_OPTIONS may be given with it (e.g. a larger
`total_env_steps` to extend the run); any other option that differs from the run's stops it with one
ResumeError. A run stopped before its first checkpoint starts again from step 0 with its recorded config.
The run's own `.hydra` record is never rewritten: each resume's goes to `.hydra_resumes/<time>/`.

What a kill (even SIGKILL) at any moment costs: the steps since the newest complete checkpoint, at most
`checkpoint.interval_env_steps` (50,000 by default) plus the steps trained while that checkpoint was being
written in the background (the next one waits for it, so never a second interval).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from robo_rl.agents.sac import SAC, SACConfig
from robo_rl.allocator import keep_freed_memory
from robo_rl.buffers import MixedReplay, ReplayBuffer, Source, free_memory
from robo_rl.collector import CollectedStep, Collector
from robo_rl.checkpoint import (BEST_POLICY, CHECKPOINT_FORMAT, CheckpointError, CheckpointWriter, check_compatible, flat_config,
                                 check_policy_probe, detached_copy, list_checkpoints, load_checkpoint, policy_file,
                                 policy_probe, remove_orphans, require_run_dir, save_best_policy, write_atomically)
from robo_rl.cli import RESUME_RECORDS, hydra_command
from robo_rl.datasets import load_transitions
from robo_rl.envs import env_config_at, env_spec, make_vector_env
from robo_rl.evaluation import evaluate_policy
from robo_rl.interventions import ScriptedIntervener, make_intervener
from robo_rl.options import check_options
from robo_rl.plotting import plot_learning_curve
from sim.errors import ConfigError

# What a resumed run may take from the command that resumes it; every other option stays the run's own.
RESUME_OPTIONS = ("total_env_steps", "device", "torch_threads", "logging.progress_bar", "checkpoint.keep",
                  "checkpoint.interval_env_steps", "runner", "runner.address", "runner.num_actors",
                  "runner.actor_threads")


class ResumeError(ValueError):
    """`resume=` asks for something a resumed run cannot do (change its config, train nothing)."""


class TrainingDiverged(ValueError):
    """The agent's losses, parameters or optimizer state are no longer finite (learning rates too high, most
    likely): the run stops instead of saving them as its checkpoints and ending with status 0."""


def _trained_without_checkpoints(run: Path, interval: int, num_envs: int) -> str:
    """What shows that `run` trained past its first checkpoint ("" if nothing does): its summary.json (it finished),
    or a best policy evaluated after it (the first checkpoint is written on the first step of `num_envs` env steps
    at or past `interval`, after that step's evaluation). Its checkpoints were deleted then; a run killed before its
    first checkpoint was written starts again as before."""
    if (run / "summary.json").exists():
        return "to its end (summary.json)"
    best = run / BEST_POLICY
    if best.exists():
        try:
            steps = int(load_checkpoint(best).get("evaluation", {}).get("env_steps", 0))
        except Exception:  # noqa: BLE001 (a damaged best policy proves nothing either way; the run starts again)
            return ""
        if steps >= interval + num_envs:
            return f"{steps:,} env steps (best_policy.pt)"
    return ""


def _refuse_a_student(run: Path, config: Any) -> None:
    """ResumeError for a run that robo_rl.distill made (its config has a `distill` section): train's resume read
    it as an unknown option after warning that the run would start again."""
    if "distill" in config:
        raise ResumeError(f"resume={run} is a student that python -m robo_rl.distill trained, which train cannot "
                          "continue; distill again into a new folder")


def _hydra_record_dir(resume: str | None) -> str:
    """Where Hydra records an invocation (config, overrides) inside its run directory: `.hydra` for a new
    run; for a resume, a new folder beside it, so that the run's own record keeps what it was started with."""
    if not resume:
        return ".hydra"
    return f"{RESUME_RECORDS}/{time.strftime('%Y-%m-%d_%H-%M-%S')}_{os.getpid()}"


# hydra.run.dir: the run being resumed (which must exist: Hydra would create it), else a new folder
OmegaConf.register_new_resolver(
    "run_dir", lambda resume, default: require_run_dir(resume, "resume") if resume else default, replace=True)
OmegaConf.register_new_resolver("hydra_record_dir", _hydra_record_dir, replace=True, use_cache=True)


def select_device(name: str) -> torch.device:
    """"auto" -> CUDA when available, else CPU; otherwise the named device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_states() -> dict[str, Any]:
    """Every global RNG state, for checkpoints (as tensors and plain values: what loads with weights_only)."""
    name, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    numpy_state = {"bit_generator": name, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
                   "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)}
    states = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Inverse of `rng_states`."""
    random.setstate(states["python"])
    numpy_state = states["numpy"]
    if isinstance(numpy_state, dict):  # format 2; format 1 holds numpy.random.get_state()'s tuple
        numpy_state = (numpy_state["bit_generator"], numpy_state["keys"].numpy().astype(np.uint32),
                       numpy_state["position"], numpy_state["has_gauss"], numpy_state["cached_gaussian"])
    np.random.set_state(numpy_state)
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        # one state per GPU the run saw; a machine with fewer GPUs restores the ones it has
        for index, state in enumerate(states["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state, index)


def privileged_critic(cfg: DictConfig) -> bool:
    """Whether the critic sees privileged state: cfg.privileged_critic, where "auto" means "if the env
    group says its env provides it" (env.privileged_observation)."""
    if cfg.privileged_critic == "auto":
        return bool(cfg.env.get("privileged_observation", False))
    return bool(cfg.privileged_critic)


def git_commit() -> str | None:
    """The source commit, recorded with every run."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The config keys of command-line overrides ("+a.b=1" -> "a.b"), Hydra's own (hydra.*) left out."""
    keys = [item.split("=", 1)[0].lstrip("+~") for item in overrides]
    return [key for key in keys if key != "hydra" and not key.startswith("hydra.")]


def resumed_config(saved: DictConfig, given: DictConfig, overrides: Sequence[str], run: str | Path) -> DictConfig:
    """A resumed run's config: its own (`saved`) with the RESUME_OPTIONS among `overrides` (the command
    line's "key=value" strings) taken from `given` (this invocation's config) and `device` always from
    `given` (a machine's). ResumeError naming the first other option whose value differs from the run's."""
    cfg = saved.copy()
    for key in override_keys(overrides):
        if key == "resume":
            continue
        new, old = (OmegaConf.select(c, key, default=None) for c in (given, saved))
        if key in RESUME_OPTIONS:
            OmegaConf.update(cfg, key, new, force_add=True)
            continue
        plain_new, plain_old = (OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                                for v in (new, old))
        if plain_new != plain_old:
            raise ResumeError(f"resume={run}: {key} is {_short(plain_old)} in the run and {_short(plain_new)} here; "
                              f"a resumed run keeps its config (only {', '.join(RESUME_OPTIONS)} may be given "
                              "with resume=); start a new run to change it")
    cfg.device = given.device
    return cfg


def check_record_unedited(run: Path, trained: dict[str, Any]) -> None:
    """ResumeError where the run's config.yaml was edited since its checkpoints were written (`trained`, the
    newest one's config): a resume goes on with the checkpoint's config, so the edit was silently ignored and the
    record no longer said how the run was trained. The options a resume may change (RESUME_OPTIONS) are left out."""
    try:
        recorded = OmegaConf.to_container(OmegaConf.load(run / "config.yaml"), resolve=True)
    except Exception as error:  # noqa: BLE001 (missing, torn or unresolvable: the same answer)
        raise ResumeError(f"resume={run}: its config.yaml is missing or unreadable ({error}); the run's record of how "
                          "it was trained must stay with it") from None

    def kept(key: str) -> bool:
        return not any(key == option or key.startswith(option + ".") for option in (*RESUME_OPTIONS, "resume"))

    own, theirs = ({key: value for key, value in flat_config(c).items() if kept(key)} for c in (recorded, trained))
    edited = sorted(key for key in own.keys() | theirs.keys() if own.get(key, "<absent>") != theirs.get(key, "<absent>"))
    if edited:
        key = edited[0]
        more = f" (and {len(edited) - 1} more options)" if len(edited) > 1 else ""
        raise ResumeError(f"resume={run}: config.yaml was edited since the run's checkpoints were written: {key} is "
                          f"{_short(own.get(key, '<absent>'))} there, {_short(theirs.get(key, '<absent>'))} in the "
                          f"checkpoint{more}; a resume goes on with the checkpoint's config: restore config.yaml, or "
                          "start a new run (init_from= starts from this run's policy)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def curriculum_levels(cfg: DictConfig) -> tuple[float, ...]:
    """The difficulty of each curriculum level, rising; empty without a curriculum."""
    levels = tuple(float(v) for v in (cfg.get("curriculum", {}) or {}).get("levels", ()) or ())
    if any(b <= a for a, b in zip(levels, levels[1:])):
        raise ConfigError(f"curriculum.levels must rise, got {list(levels)}")
    return levels


def check_replay_memory(cfg: DictConfig, replay: MixedReplay, device: torch.device) -> None:
    """ConfigError naming buffer.capacity where the replay buffer would not fit in the memory free on `device` (a
    capacity in its allowed range crashed torch's allocator at the first transition, after the untrained policy
    had been saved: a traceback and a half-made run)."""
    # the offline pool takes its memory only where demos or interventions (scripted, or a robot's through the inbox)
    # fill it
    offline = bool(cfg.get("demos")) or OmegaConf.select(cfg, "intervention.kind", default="none") != "none" \
        or OmegaConf.select(cfg, "runner.inbox", default=None) is not None
    needed = replay.online.nbytes + (replay.offline.nbytes if offline else 0)
    free = free_memory(device)
    if free is not None and needed > free:
        pools = "replay buffer (online and offline pools)" if offline else "replay buffer"
        where = f"free on {device}" if device.type == "cuda" else "this machine has free"
        raise ConfigError(f"buffer.capacity={int(cfg.buffer.capacity)} needs {needed / 1e9:.1f} GB for the {pools}, "
                          f"more than the {free / 1e9:.1f} GB {where}; lower it")


def policy_state(cfg: DictConfig, spec: dict[str, Any], agent: SAC, device: torch.device,
                 counters: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's policy part, what evaluation, the suite and export read: the run's config, env spec,
    agent and its probe actions, `counters`, source commit and device."""
    return {
        "format": CHECKPOINT_FORMAT,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "env_spec": spec,
        "agent_config": dataclasses.asdict(agent.config),
        "critic_obs_dim": agent.critic_obs_dim,
        "agent": agent.training_state(),
        "policy_probe": policy_probe(agent, spec["observation_size"]),
        "counters": counters,
        "commit": git_commit(),
        "device": str(device),
    }


class Trainer:
    """One training run in `run_dir` from a composed config (see configs/train.yaml).

    With `cfg.resume` set, the run in that directory continues (see the module docstring); `overrides` are
    the command line's "key=value" strings, which decide what the resuming command asks to change.
    """

    def __init__(self, cfg: DictConfig, run_dir: str | Path, overrides: Sequence[str] = ()):
        self.run_dir = Path(run_dir)
        resume_state = resume_dir = None
        restart = given_total = False
        if cfg.get("resume"):
            resume_dir = Path(require_run_dir(cfg.resume, "resume"))
            if resume_dir.resolve() != self.run_dir.resolve():  # e.g. a sweep (-m) puts its jobs elsewhere
                raise ResumeError(f"resume={cfg.resume} must continue in its own folder, not in {self.run_dir}")
            resume_state, saved = self._resume_point(resume_dir)
            restart = resume_state is None
            given_total = "total_env_steps" in override_keys(overrides)
            cfg = resumed_config(saved, cfg, overrides, cfg.resume)
            # an older run's config.yaml, perhaps edited since; the learning_starts warning is for new runs (before
            # the error that refuses a resume to fewer env steps, it announced an untrained policy)
            check_options(cfg, "train", require_all=False, resumed=True)
        self.cfg = cfg
        torch.set_num_threads(int(cfg.torch_threads))
        self.device = select_device(cfg.device)
        seed_everything(int(cfg.seed))
        self.privileged = privileged_critic(cfg)
        self.levels = curriculum_levels(cfg)
        self.level = int(resume_state["counters"].get("curriculum_level", 0)) if resume_state is not None else 0
        self.intervener: ScriptedIntervener | None = None
        self._make_envs()
        self.spec = env_spec(self.env, cfg.env.id)
        critic_obs_dim = int(self.env.privileged_size) if self.privileged else None
        agent_cfg = SACConfig(**OmegaConf.to_container(cfg.agent, resolve=True))
        space = self.env.single_action_space
        images = self.spec.get("observation_images")
        self.classifier = None
        if cfg.get("reward_classifier"):
            from robo_rl.success_classifier import load_classifier

            self.classifier = load_classifier(cfg.reward_classifier, images or {}, self.device)
        self.agent = SAC(self.spec["observation_size"], space.low, space.high, agent_cfg,
                         critic_obs_dim=critic_obs_dim, device=self.device, images=images)
        if cfg.start_from_nominal_action and getattr(self.env, "nominal_action", None) is not None:
            self.agent.center_actor_on(torch.as_tensor(self.env.nominal_action))
        # a resumed run restores its own agent below; init_from only starts a new one
        self.started_from = self._start_from(cfg.init_from) if cfg.get("init_from") and resume_state is None else None
        obs_dim, act_dim = self.spec["observation_size"], self.spec["action_size"]
        capacity = int(cfg.buffer.capacity)
        self.replay = MixedReplay(ReplayBuffer(capacity, obs_dim, act_dim, critic_obs_dim, self.device, images),
                                  ReplayBuffer(capacity, obs_dim, act_dim, critic_obs_dim, self.device, images),
                                  float(cfg.buffer.offline_ratio))
        check_replay_memory(cfg, self.replay, self.device)  # the run folder has no policy yet
        self.env_steps = self.updates = 0
        self.intervention_steps = 0
        self.episodes_done = 0
        self.metrics: dict[str, torch.Tensor] = {}  # the last update's
        self.recent_returns: list[float] = []  # episodes finished since the last training log
        self.recent_intervention_rates: list[float] = []
        self.wall_seconds = 0.0  # accumulated over resumes
        self.history: list[dict[str, Any]] = []
        if resume_state is not None:
            self._restore(resume_state)
            total = int(cfg.total_env_steps)
            if given_total and total <= self.env_steps:
                raise ResumeError(f"resume={self.run_dir}: total_env_steps={total}, but the run is at "
                                  f"{self.env_steps} env steps; give more to extend it")
            if not given_total and self.env_steps >= total and (self.run_dir / "summary.json").is_file():
                raise ResumeError(f"resume={self.run_dir}: the run is complete ({self.env_steps} of {total} env "
                                  "steps); give total_env_steps=<more> to extend it")
        if resume_dir is not None:  # accepted: now clear what a kill left behind
            self._tidy_after_kill(resume_dir, resume_state)
        if resume_state is None:
            if cfg.get("demos"):
                self._load_demos(cfg.demos)
            if not restart:  # a restarted run keeps the record it was started with
                self.run_dir.mkdir(parents=True, exist_ok=True)
                text = OmegaConf.to_yaml(cfg).encode()
                write_atomically(self.run_dir / "config.yaml", lambda f: f.write(text))
        self.checkpoints = CheckpointWriter(self.run_dir, keep=int(cfg.checkpoint.keep))
        self.writer = None
        if cfg.logging.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tensorboard"))

    @property
    def random_actions(self) -> bool:
        """Whether the envs are stepped with uniform random actions now: before `learning_starts` env steps, unless
        the agent started from a trained one (`init_from`), which then acts from the first step."""
        return self.env_steps < int(self.cfg.learning_starts) and not self.cfg.get("init_from")

    def _start_from(self, run: str) -> str:
        """Load into the agent (actor, critics and their targets, temperature, optimizer states) the best policy
        of the training run `run`; its checkpoint path. CheckpointError unless that run flew this env with the
        same observation, privileged observation, action and networks."""
        state = load_checkpoint(policy_file(require_run_dir(run, "init_from", need_policy=True), "best"), self.device)
        try:
            check_compatible(state, self.spec)
        except CheckpointError as error:
            raise CheckpointError(f"init_from={run}: {error}") from None
        if state.get("critic_obs_dim") != self.agent.critic_obs_dim:
            raise CheckpointError(f"init_from={run}: its critic observes {state.get('critic_obs_dim')} values, this "
                                  f"run's {self.agent.critic_obs_dim} (privileged_critic differs)")
        try:
            self.agent.load_training_state(state["agent"])
        except (RuntimeError, ValueError, KeyError) as error:  # e.g. other hidden sizes or critic count
            # torch's first line only says "Error(s) in loading state_dict"; the first mismatch follows it
            lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
            detail = lines[min(1, len(lines) - 1)].rstrip(".")
            detail = detail if len(detail) <= 160 else detail[:157] + "..."  # torch lists every missing key
            raise CheckpointError(f"init_from={run}: its networks do not fit this run's agent config ({detail}); "
                                  "give the agent options it was trained with, or a run of robo_rl.train") from None
        return str(state["path"])

    def _make_envs(self) -> None:
        """The training and evaluation envs at the current curriculum level (closing any earlier ones), and the
        collector stepping the training envs (its intervener's counters carried over)."""
        cfg, threads = self.cfg, int(self.cfg.torch_threads)
        for old in (getattr(self, "env", None), getattr(self, "eval_env", None)):
            if old is not None:
                old.close()
        env_cfg = env_config_at(cfg.env, self.difficulty)
        self.env = make_vector_env(env_cfg, int(cfg.num_envs), self.device, threads=threads, privileged=self.privileged,
                                   cameras=True)
        if self.privileged and not hasattr(self.env, "privileged_size"):
            raise ValueError(f"privileged_critic=true, but {cfg.env.id} provides no privileged observation")
        self.eval_env = make_vector_env(env_cfg, int(cfg.eval.episodes), self.device, threads=threads, cameras=True)
        counters = self.intervener.state_dict() if self.intervener is not None else None
        self.intervener = make_intervener(cfg.intervention, self.env)  # its expert flies this env
        if self.intervener is not None and counters is not None:
            self.intervener.load_state_dict(counters)
        self.collector = Collector(self.env, self.device, self.privileged, self.intervener)

    @property
    def difficulty(self) -> float | None:
        """The env's randomization difficulty at the current curriculum level (None without a curriculum)."""
        return self.levels[self.level] if self.levels else None

    def _advance_curriculum(self, result: dict[str, Any]) -> bool:
        """Move to the next curriculum level (new envs) if the evaluation at this one reached `advance_at`, or if
        `patience` evaluations at this level brought no new best success rate."""
        if not self.levels or self.level + 1 >= len(self.levels):
            return False
        if result["success_rate"] < float(self.cfg.curriculum.advance_at) and not self._plateaued():
            return False
        self.level += 1
        self._make_envs()
        return True

    def _plateaued(self) -> bool:
        """Whether the last `curriculum.patience` evaluations at this level (from the history, so that a resumed
        run counts on) all stayed below the level's best success rate before them."""
        patience = self.cfg.curriculum.get("patience")
        if patience is None:
            return False
        rates = [entry["success_rate"] for entry in self.history if entry.get("difficulty") == self.difficulty]
        best = max(range(len(rates)), key=lambda i: rates[i]) if rates else 0  # the first of equal bests
        return len(rates) - 1 - best >= int(patience)

    def _resume_point(self, run: Path) -> tuple[dict[str, Any] | None, DictConfig]:
        """The state a resumed run continues from and its config: the newest intact checkpoint (damaged newer
        ones skipped with a warning), or None and the recorded config.yaml for a run stopped before its first
        checkpoint. Changes nothing on disk (see `_tidy_after_kill`)."""
        if not list_checkpoints(run):
            try:
                saved = OmegaConf.load(run / "config.yaml")
            except Exception as error:  # missing or torn: nothing to start the run again from
                raise ResumeError(f"resume={run}: no checkpoint and no readable config.yaml ({error}); the run "
                                  "stopped before it started, run it again without resume=") from error
            _refuse_a_student(run, saved)
            trained = _trained_without_checkpoints(run, int(saved.checkpoint.interval_env_steps), int(saved.num_envs))
            if trained:
                raise ResumeError(f"resume={run}: no checkpoint, but the run has trained {trained}: resuming would "
                                  "start it again from step 0 over its best policy and summary (were its checkpoints "
                                  f"deleted?); start a new run, e.g. init_from={run}/best_policy.pt to fine-tune it")
            warnings.warn(f"resume={run}: no checkpoint yet (the run stopped before its first, due at "
                          f"checkpoint.interval_env_steps={saved.checkpoint.interval_env_steps}); it starts again "
                          "from step 0 with its recorded config.yaml", stacklevel=3)
            return None, saved
        state = load_checkpoint(run)
        _refuse_a_student(run, state["config"])
        check_record_unedited(run, state["config"])
        return state, OmegaConf.create(state["config"])

    @staticmethod
    def _tidy_after_kill(run: Path, state: dict[str, Any] | None) -> None:
        """Once a resume is accepted: delete the temporary files of writes that a kill stopped, and rename the
        checkpoints newer than the one resumed from (none of them loaded) to `*.damaged`, kept for inspection
        but never read or overwritten, each with a warning."""
        for orphan in remove_orphans(run):
            warnings.warn(f"removed {orphan}, the remains of a write that was stopped", stacklevel=3)
        if state is None:
            return
        for damaged in list_checkpoints(run):
            if damaged.name > Path(state["path"]).name:
                damaged.rename(damaged.with_name(damaged.name + ".damaged"))
                warnings.warn(f"renamed the damaged checkpoint {damaged} to {damaged.name}.damaged", stacklevel=3)

    def _load_demos(self, dataset: str) -> None:
        """Put every transition of a demonstration dataset into the offline pool, tagged DEMO."""
        if self.privileged:
            raise ValueError("demos cannot feed a privileged critic (datasets hold no privileged state); "
                             "set privileged_critic=false")
        overrides = OmegaConf.to_container(self.cfg.env.get("overrides") or OmegaConf.create({}), resolve=True)
        transitions = self._rewarded(load_transitions(dataset, self.spec, overrides))
        self.replay.add(Source.DEMO, **transitions)
        self.demo_transitions = len(transitions["reward"])

    # ------------------------------------------------------------------ main loop
    def run(self) -> dict[str, Any]:
        """Train until `total_env_steps`, evaluating and checkpointing on the way; returns the summary."""
        try:
            self._train()
        finally:  # also on an error or Ctrl-C: the checkpoint being written and the scalars logged reach the disk
            self.checkpoints.close()
            if self.writer:
                self.writer.flush()
        return self.finish()

    def _train(self) -> None:
        cfg, agent = self.cfg, self.agent
        total = int(cfg.total_env_steps)
        next_eval = self._next_multiple(cfg.eval.interval_env_steps)
        next_checkpoint = self._next_multiple(cfg.checkpoint.interval_env_steps)
        next_log = self._next_multiple(cfg.logging.log_interval_env_steps)
        self.collector.reset(int(cfg.seed) + self.env_steps)
        bar = self._progress_bar(total)
        start = time.perf_counter() - self.wall_seconds
        if not self.history:  # the untrained policy: where the learning curve starts
            first = self._evaluate_at(start)
            self._keep_if_best(first)
            if self._reached_target(first):
                total = self.env_steps
        while self.env_steps < total:
            # Collect one step in every env: uniform random actions first (unless the agent started from a trained
            # one, init_from), then the stochastic policy.
            self._store(self.collector.step(agent.act if not self.random_actions else None, self.env_steps))
            bar.update(self.collector.num_envs)

            # Learn.
            if self.env_steps >= cfg.learning_starts:
                for _ in range(int(cfg.updates_per_iteration)):
                    self._update()

            if self.env_steps >= next_log:
                next_log = self._next_multiple(cfg.logging.log_interval_env_steps)
                self._log_training(time.perf_counter() - start)
            if self.env_steps >= next_eval or self.env_steps >= total:
                next_eval = self._next_multiple(cfg.eval.interval_env_steps)
                self._check_finite()  # nor kept as the best policy
                result = self._evaluate_at(start)
                self._keep_if_best(result)
                if self._reached_target(result):  # the run ends here, its last checkpoint written below
                    total = self.env_steps
                bar.set_postfix(success=f"{100 * result['success_rate']:.0f}%", ret=f"{result['mean_return']:.0f}")
                if self._advance_curriculum(result):  # the episodes under way end; new ones start harder
                    self.collector.reset(int(cfg.seed) + self.env_steps)
            if self.env_steps >= next_checkpoint or self.env_steps >= total:
                next_checkpoint = self._next_multiple(cfg.checkpoint.interval_env_steps)
                self.wall_seconds = time.perf_counter() - start
                self._check_finite()  # a diverged agent is never checkpointed: its last good checkpoint stays
                self.save()
        bar.close()

    def _progress_bar(self, total: int) -> tqdm:
        return tqdm(total=total, initial=self.env_steps, unit="step", unit_scale=True, dynamic_ncols=True,
                    disable=not self.cfg.logging.progress_bar, desc="train")

    def _store(self, collected: CollectedStep) -> None:
        """Put collected transitions into the replay buffers by source and count them."""
        for source, transitions in collected.tagged:
            self.replay.add(source, **self._rewarded(transitions))
        self.recent_returns.extend(collected.finished_returns)
        self.recent_intervention_rates.extend(collected.finished_intervention_rates)
        self.episodes_done += len(collected.finished_returns)
        self.intervention_steps += collected.intervention_steps
        self.env_steps += collected.env_steps

    def _rewarded(self, transitions: dict[str, Any]) -> dict[str, Any]:
        """Transitions with the reward classifier's verdict on their next observations as the reward (unchanged
        without a classifier)."""
        if self.classifier is None:
            return transitions
        next_obs = transitions["next_obs"]
        rows = range(0, len(transitions["reward"]), 1024)  # demos arrive all at once
        verdict = torch.cat([self.classifier.success({k: v[i:i + 1024].to(self.device) for k, v in next_obs.items()})
                             for i in rows])
        return {**transitions, "reward": verdict.float().to(transitions["reward"].device)}

    def _update(self) -> None:
        """One agent.update call on a batch drawn from the replay buffers."""
        batch_size = self.agent.config.batch_size * self.agent.config.critic_updates_per_actor_update
        self.metrics = self.agent.update(self.replay.sample(batch_size))
        self.updates += 1

    def _check_finite(self) -> None:
        """TrainingDiverged naming what is no longer finite: the last update's losses, a parameter (the temperature
        included) or an optimizer's state. With learning rates of 1 the critic loss reached inf and Adam's state
        froze the updates, and the run ended with status 0 and no word."""
        bad = [f"train/{key} is {float(value):.3g}" for key, value in self.metrics.items()
               if not math.isfinite(float(value))]
        if not bad:
            tensors = [(f"parameter {name}", value) for name, value in self.agent.named_parameters()]
            for optimizer in ("actor_optimizer", "critic_optimizer", "temperature_optimizer"):
                for slot in getattr(getattr(self.agent, optimizer, None), "state", {}).values():
                    tensors += [(f"{optimizer}'s {key}", value) for key, value in slot.items()
                                if isinstance(value, torch.Tensor) and value.is_floating_point()]
            bad = [f"{name} is not finite" for name, value in tensors if not bool(torch.isfinite(value).all())][:1]
        if bad:
            rates = ", ".join(f"agent.{key}={self.cfg.agent.get(key)}" for key in ("actor_lr", "critic_lr",
                                                                                    "temperature_lr"))
            raise TrainingDiverged(f"training diverged by env step {self.env_steps:,}: {bad[0]} ({rates}); lower the "
                                   "learning rates (the run's earlier checkpoints and best policy are kept)")

    def _next_multiple(self, interval: int) -> int:
        interval = int(interval)
        return (self.env_steps // interval + 1) * interval

    # ------------------------------------------------------------ evaluation, logs
    def _evaluate_at(self, start: float) -> dict[str, Any]:
        """`evaluate`, with the entry's wall_seconds taken when its result is known (the evaluation included)."""
        entry = self.evaluate()
        entry["wall_seconds"] = self.wall_seconds = time.perf_counter() - start
        return entry

    def evaluate(self) -> dict[str, Any]:
        """Deterministic policy on the fixed evaluation episodes; appended to the history and logged."""
        result = evaluate_policy(lambda o: self.agent.act(o, deterministic=True), self.eval_env,
                                 int(self.cfg.eval.seed), self.device)
        return self._record_evaluation(result, {"env_steps": self.env_steps, "updates": self.updates,
                                                "intervention_steps": self.intervention_steps,
                                                "difficulty": self.difficulty})

    def _record_evaluation(self, result: dict[str, Any], counters: dict[str, Any]) -> dict[str, Any]:
        """The history entry of an evaluation `result` of the policy at `counters` (env_steps, updates,
        intervention_steps, difficulty), appended and logged."""
        entry = {**counters, "wall_seconds": self.wall_seconds, "success_rate": result["success_rate"],
                 "mean_return": result["mean_return"], "mean_length": result["mean_length"]}
        self.history.append(entry)
        if self.writer:
            for key in ("success_rate", "mean_return", "mean_length"):
                self.writer.add_scalar(f"eval/{key}", entry[key], entry["env_steps"])
        return entry

    def _log_training(self, elapsed: float) -> None:
        """TensorBoard scalars of the training so far; the episode statistics since the last call are consumed."""
        returns, intervention_rates = self.recent_returns, self.recent_intervention_rates
        self.recent_returns, self.recent_intervention_rates = [], []
        if not self.writer:
            return
        for key, value in self.metrics.items():
            self.writer.add_scalar(f"train/{key}", float(value), self.env_steps)
        if returns:
            self.writer.add_scalar("train/episode_return", float(np.mean(returns)), self.env_steps)
        if self.cfg.intervention.get("kind", "none") != "none":
            if intervention_rates:  # share of each finished episode's steps flown by the intervener
                self.writer.add_scalar("train/episode_intervention_rate", float(np.mean(intervention_rates)), self.env_steps)
            self.writer.add_scalar("train/intervention_steps", self.intervention_steps, self.env_steps)
        self.writer.add_scalar("time/env_steps_per_second", self.env_steps / max(elapsed, 1e-9), self.env_steps)
        self.writer.add_scalar("time/updates", self.updates, self.env_steps)

    # --------------------------------------------------------------- checkpoints
    def _policy_state(self) -> dict[str, Any]:
        """What evaluation and export need: config, env spec, agent, counters, source commit."""
        return policy_state(self.cfg, self.spec, self.agent, self.device, {
            "env_steps": self.env_steps, "updates": self.updates, "episodes": self.episodes_done,
            "wall_seconds": self.wall_seconds, "intervention_steps": self.intervention_steps,
            "curriculum_level": self.level})

    def save(self) -> None:
        """Checkpoint everything needed to resume: a snapshot now, written atomically in the background
        (on disk once `checkpoints.wait()` returns)."""
        state = {**detached_copy(self._policy_state()), "replay": self.replay.state_dict(),  # (copies already)
                 "history": detached_copy(self.history), "rng": rng_states()}
        self.checkpoints.submit(self.env_steps, state)

    def _reached_target(self, result: dict[str, Any]) -> bool:
        """Whether the evaluation `result`, at the final curriculum level, reached `stop_at_success`: the run then
        ends, its best policy that one or an earlier one as good."""
        target = self.cfg.get("stop_at_success")
        final = self.levels[-1] if self.levels else None
        return target is not None and result.get("difficulty") == final and result["success_rate"] >= float(target)

    def _keep_if_best(self, result: dict[str, Any], policy: dict[str, Any] | None = None) -> None:
        """Save the evaluated policy (`policy`, a `_policy_state()` taken when it was evaluated; None: the
        agent now) as the run's best if no earlier evaluation beat it (success rate, then return)."""
        def rank(entry: dict[str, Any]) -> tuple[float, float]:
            return entry["success_rate"], entry["mean_return"]

        final = self.levels[-1] if self.levels else None
        if result.get("difficulty") != final:  # a policy of an easier curriculum level is no run's best
            return
        if all(rank(result) > rank(other) for other in self.history
               if other is not result and other.get("difficulty") == final):
            save_best_policy(self.run_dir, {**(policy or self._policy_state()), "evaluation": result})

    def _restore(self, state: dict[str, Any]) -> None:
        check_compatible(state, self.spec)
        missing = [key for key in ("replay", "history", "rng") if key not in state]
        if missing:
            raise CheckpointError(f"checkpoint {state['path']} holds no {', '.join(missing)}: not a training checkpoint")
        saved = state.get("device")
        if saved is not None and torch.device(saved).type != self.device.type:
            warnings.warn(f"resuming a run trained on {saved} on {self.device} (device={self.cfg.device}): it "
                          "continues with the same networks, buffers and counters, but not bit for bit as it "
                          f"would have on {saved}; set device={torch.device(saved).type} to keep it there",
                          stacklevel=2)
        saved_critic = state.get("critic_obs_dim")
        if saved_critic != self.agent.critic_obs_dim:  # e.g. the privileged observation gained episode parameters
            raise CheckpointError(f"checkpoint {state['path']}: its critic sees {saved_critic} inputs, this env's "
                                  f"privileged observation has {self.agent.critic_obs_dim} (the run was trained by "
                                  "another robo-rl version); it cannot be resumed, but its policy still evaluates "
                                  "and exports: start a new run to train further")
        try:  # a checkpoint that passed its checksum but not written by this code's Trainer: one clear error
            self.agent.load_training_state(state["agent"])
            self.replay.load_state_dict(state["replay"])
            counters = state["counters"]
            self.env_steps, self.updates = int(counters["env_steps"]), int(counters["updates"])
            self.episodes_done, self.wall_seconds = int(counters["episodes"]), float(counters["wall_seconds"])
            self.intervention_steps = int(counters.get("intervention_steps", 0))
            self.history = list(state["history"])
            restore_rng_states(state["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as error:
            raise CheckpointError(f"checkpoint {state['path']} does not fit this run's agent and buffers: "
                                  f"{str(error).strip().splitlines()[0][:300] if str(error).strip() else repr(error)}") from error
        check_policy_probe(state, self.agent)
        if self.intervener is not None:
            self.intervener.load_state_dict({"total_steps": self.intervention_steps})

    def _write_video(self) -> None:
        """rollout.gif of the best policy, rendered offscreen in a child process (MuJoCo picks its GL
        backend once per process); a failure is reported, never fatal to the run."""
        command = [sys.executable, "-m", "robo_rl.video", f"run={self.run_dir}"]  # key=value, not Hydra: taken as given
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            print(f"warning: no rollout video ({' '.join(command)} failed):\n{done.stderr[-2000:]}", file=sys.stderr)

    def finish(self) -> dict[str, Any]:
        """Write the learning curve and summary.json; return the summary."""
        if self.writer:
            self.writer.close()
        plot_learning_curve(self.history, self.run_dir / "learning_curve.png", title=self.cfg.env.id)
        if self.cfg.logging.get("video"):
            self._write_video()
        summary = {"env_id": self.cfg.env.id, "seed": int(self.cfg.seed), "env_steps": self.env_steps,
                   "updates": self.updates, "intervention_steps": self.intervention_steps,
                   "wall_seconds": self.wall_seconds,
                   "final": self.history[-1] if self.history else None, "history": self.history,
                   "run_dir": str(self.run_dir)}
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


def runner_kind(cfg: DictConfig, overrides: Sequence[str]) -> str:
    """Which runner trains: the command's, or for `resume=` the run's own unless the command names one
    (a run may continue on the other runner: the actors hold no state)."""
    if cfg.get("resume") and "runner" not in override_keys(overrides):
        try:
            saved = OmegaConf.load(Path(cfg.resume) / "config.yaml")
        except Exception:  # noqa: BLE001 (no readable record: the Trainer reports the run's state)
            return "local"
        return str(OmegaConf.select(saved, "runner.kind", default="local"))
    return str(cfg.runner.kind)


@hydra_command(config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: train in Hydra's run directory and print where everything went."""
    hydra_cfg = hydra.core.hydra_config.HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    keep_freed_memory()
    overrides = list(hydra_cfg.overrides.task)
    trainer = Trainer
    if runner_kind(cfg, overrides) == "ray":
        from robo_rl.distributed.learner import RayTrainer as trainer
    summary = trainer(cfg, run_dir, overrides=overrides).run()
    final = summary["final"] or {}
    print(f"run {run_dir}: {summary['env_steps']:,} env steps, {summary['updates']:,} updates, "
          f"{summary['wall_seconds']:.1f} s; evaluation success {100 * final.get('success_rate', 0):.0f}%, "
          f"return {final.get('mean_return', float('nan')):.1f}")


if __name__ == "__main__":
    main()
