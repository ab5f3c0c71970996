"""Distill a teacher into a deployable student: `python -m robo_rl.distill teacher=<run dir>|expert`.

`teacher=expert` needs no trained teacher: the model-based expert (sim/quadrotor/expert.py), which reads each
simulated vehicle's true state, parameters and queued commands, labels every rollout, and the student takes
the env and agent settings of the train experiment `expert_experiment` (configs/experiment/<name>.yaml). Otherwise
the teacher is a run, typically trained with `env.privileged_actor=true` (its policy reads the drawn vehicle's
parameters; any other run's policy reads the student's own observation). Two more teachers may label a share of
the vehicles: `fast_rotor_teacher=<run>` those whose rotors respond faster than `fast_rotor_tau`, and
`latency_teacher=<run>` those whose commands act `latency_from` or more control steps late. A pool of
per-vehicle teachers (`teacher_pool=<folder>`, robo_rl.teacher_pool) brings its own vehicles: a share of the
rollouts flies them, each labelled by the run trained on it; `family_starts` may keep the other rollouts, which
the family's teachers label, to gentler starts than the student's own. The student
is a policy of the same env that sees only what the vehicle measures, with the histories its env config gives
it, fitted by DAgger (robo_rl.agents.distillation) in `num_envs` simulated vehicles drawn from the teacher's
distribution at the difficulty the teacher reached. `task=<quadrotor task>` has the student (and the teachers'
labels) fly another task on the same vehicles: a family teacher trained on hover tracks any reference, so that
it teaches reach and figure-eight. `also_tasks=[...]` has a share of the rollouts fly other tasks besides
`task`, which alone is evaluated and recorded as the student's env. Every `eval.interval_iterations` the
student flies the fixed evaluation episodes; the teachers flew the same ones once at the start, and the success
rates are printed side by side. The student kept (best_policy.pt) is the final one, fitted at a learning rate annealed to
`distillation.final_lr_fraction` of its start: the best of the evaluations picks by noise among students
that differ in what they fly (bench/RESULTS.md, "session 16").

The output is a run folder like `robo_rl.train`'s (config.yaml, checkpoints/, best_policy.pt,
summary.json, learning_curve.png, tensorboard/), so that `robo_rl.evaluate`, `robo_rl.robustness` and
`robo_rl.export` take the student as they take any run. Distillation takes minutes: an interrupted one is
started again rather than resumed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from robo_rl.agents.distillation import AggregatedDataset, DistillationConfig, StudentRegression
from robo_rl.agents.sac import SAC, SACConfig
from robo_rl.checkpoint import (CheckpointError, policy_file, require_run_dir, run_files, save_best_policy,
                                save_checkpoint)
from robo_rl.cli import DISTILL_PROGRESS_FILES, hydra_command
from robo_rl.envs import check_quadrotor_env, env_spec, make_vector_env, task_env
from robo_rl.evaluate import load_policy
from robo_rl.evaluation import as_tensor, evaluate_policy
from robo_rl.plotting import plot_learning_curve
from robo_rl.teacher_pool import check_reads_histories, error_limit, kept_members, member_env, teacher_input
from robo_rl.train import curriculum_levels, policy_state, seed_everything, select_device
from sim.errors import ConfigError
from sim.quadrotor.expert import ModelExpert
from sim.quadrotor.observation import unread_past_states

EXPERT = "expert"  # teacher=expert: the model-based expert labels every rollout


def expert_run_config(experiment: str) -> DictConfig:
    """The train config of `+experiment=<experiment>` (whose env and agent a student of the model-based expert
    takes); ConfigError naming `expert_experiment=` where there is no such experiment."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from robo_rl.options import CONFIG_DIR

    known = sorted(path.stem for path in (CONFIG_DIR / "experiment").glob("*.yaml"))
    if experiment not in known:
        raise ConfigError(f"expert_experiment={experiment}: with teacher={EXPERT}, one of {', '.join(known)} "
                          "(configs/experiment/)")
    overrides = [f"+experiment={experiment}"]
    if GlobalHydra.instance().is_initialized():  # inside a Hydra command: its search path holds configs/
        cfg = compose(config_name="train", overrides=overrides)
    else:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="train", overrides=overrides)
    check_quadrotor_env(cfg.env.id, f"expert_experiment={experiment}", f"teacher={EXPERT}")
    return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))  # a run's config as train records it


def teacher_config(teacher: Any, experiment: str | None = None) -> DictConfig:
    """The run config a student's env and agent come from: teacher run `teacher`'s own, or with
    teacher=expert the train experiment `experiment`'s. A config given as `teacher` is returned as it is."""
    if OmegaConf.is_config(teacher):
        return teacher
    if str(teacher) == EXPERT:
        return expert_run_config(str(experiment))
    return OmegaConf.load(Path(str(teacher)) / "config.yaml")


def expert_labels(env: Any) -> Callable[[Any], torch.Tensor]:
    """The model-based expert's commands for vector env `env`'s current state (whatever the observation)."""
    expert = ModelExpert(env.unwrapped.batch)
    return lambda _obs: expert()


def check_teacher(run: Any, checkpoint: str | None = "last", role: str = "teacher") -> str:
    """`run` if it is a training run holding the policy `checkpoint` names, else a CheckpointError naming what
    is wrong (and the option, `role`, that gave it). A file from elsewhere is refused: its weights would be
    distilled while the run's config, which the checks and the student's record read, described another policy."""
    folder = require_run_dir(run, role, need_policy=True)
    path = policy_file(folder, checkpoint)
    if not path.resolve().is_relative_to(Path(folder).resolve()):
        raise CheckpointError(f"checkpoint={checkpoint} is not a file of {role}={run}; give best, last or one of "
                              "its checkpoints")
    return folder


def check_labelling_teacher(run: Any, checkpoint: str | None, teacher: Any, role: str) -> str:
    """`run` if it can label a share of `teacher`'s student's vehicles (the option `role` names it): a run
    holding `checkpoint` whose policy reads the student's observation (the teacher's env, no privileged actor);
    else a CheckpointError."""
    folder = check_teacher(run, checkpoint, role=role)
    own, theirs = (OmegaConf.load(Path(str(f)) / "config.yaml").env for f in (folder, teacher))
    if own.get("privileged_actor", False):
        raise CheckpointError(f"{role}={run} was trained with env.privileged_actor=true; it must read "
                              "the student's observation")
    if own.id != theirs.id:
        raise CheckpointError(f"{role}={run} flies {own.id}, teacher={teacher} flies {theirs.id}")
    # only quadrotors have rotor time constants and latency to route by
    check_quadrotor_env(theirs.id, f"teacher={teacher}", f"a {role}")
    return folder


def clear_interrupted_attempt(run_dir: Path) -> None:
    """Remove what an interrupted distillation into `run_dir` left (its TensorBoard events, its learning curve;
    config.yaml is rewritten), with a warning: a distillation starts again rather than resumes, and the new
    attempt's events would be mixed with the old ones."""
    if run_files(run_dir) != ["config.yaml"]:
        return
    for name in DISTILL_PROGRESS_FILES[1:]:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    warnings.warn(f"{run_dir} holds an interrupted distillation (config.yaml, no checkpoint): it starts again",
                  stacklevel=2)


def fast_rotors(params: dict[str, Any], tau: float) -> np.ndarray:
    """Which vehicles (rows of `info["params"]`) have rotors whose rise and fall time constants are both below
    `tau` [s]."""
    return (np.asarray(params["motor_tau_rise"]).reshape(-1) < tau) & (np.asarray(params["motor_tau_fall"]).reshape(-1) < tau)


def long_latency(params: dict[str, Any], steps: int) -> np.ndarray:
    """Which vehicles (rows of `info["params"]`) act on their commands at least `steps` control steps late."""
    return np.asarray(params["latency_steps"]).reshape(-1) >= steps


def teacher_difficulty(teacher_cfg: DictConfig, level: int) -> float | None:
    """The randomization difficulty the teacher's run had reached at curriculum level `level` (None: no
    curriculum, the env config's own)."""
    levels = curriculum_levels(teacher_cfg)
    return levels[min(level, len(levels) - 1)] if levels else None


def env_at(env_cfg: DictConfig, difficulty: float | None, privileged_actor: bool,
           overrides: Any = None) -> DictConfig:
    """`env_cfg` with the teacher's or the student's observation, `overrides` merged into its own and, where
    given, the difficulty."""
    plain = OmegaConf.create(OmegaConf.to_container(env_cfg, resolve=True))
    changes: dict[str, Any] = {"privileged_actor": privileged_actor,
                               "overrides": OmegaConf.to_container(overrides, resolve=True) if overrides else {}}
    if difficulty is not None:
        changes["overrides"] = OmegaConf.merge(changes["overrides"], {"randomization": {"difficulty": float(difficulty)}})
    return OmegaConf.merge(plain, changes)


def check_env_overrides(teacher: Any, overrides: Any, task: str | None = None) -> Any:
    """The student's env config: the teacher run's env (flying `task`) with `overrides`; ConfigError unless
    they make a valid one. `teacher` is a run folder or its config (`teacher_config`)."""
    from robo_rl.envs import check_env_config

    env_cfg = env_at(task_env(teacher_config(teacher).env, task), None, False, overrides)
    return check_env_config(OmegaConf.to_container(env_cfg, resolve=True))


def check_reads_student_observation(student_env: Any, run: Any, task: str | None, option: str) -> None:
    """ConfigError unless the teacher `run` (given as `option`) can read the student's observation (env config
    `student_env`): the same past actions and as many past states or fewer (it reads the newest)."""
    own = check_env_overrides(run, None, task)
    check_reads_histories(f"{option}={run}", own.action_history, own.state_history, student_env)


def own_view(obs_dim: int, run_env: DictConfig, student_env: Any, inputs: int, role: str
             ) -> Callable[[torch.Tensor], torch.Tensor]:
    """What a teacher reads of the student's observation (or of the privileged one, `inputs` entries long, for
    a privileged teacher): the policy of `obs_dim` inputs trained on env config `run_env` sees the student's
    (env config `student_env`) newest past states only, up to its own count, and the position error limited as
    in its own training (the student's env_overrides may lift that limit). CheckpointError naming `role` where
    the rest is not `obs_dim` entries long (a policy of another robo-rl version)."""
    own_states = int((run_env.get("overrides") or {}).get("state_history", 0))
    unread = unread_past_states(student_env.action_history, own_states, student_env.state_history)
    read = inputs - (unread.stop - unread.start)
    if read != obs_dim:
        raise CheckpointError(f"{role} reads {obs_dim} inputs, the student's observation gives it {read} (trained by "
                              "another robo-rl version); train it again")
    return teacher_input(obs_dim, error_limit(run_env), student_env.position_error_limit, unread)


def check_also_tasks(teacher: Any, overrides: Any, also_tasks: list[str], num_envs: int) -> None:
    """ConfigError unless every one of `also_tasks` is a quadrotor task the student can also fly on `teacher`'s
    vehicles with `overrides` (every task observes the same histories, which the overrides set for all), and
    the `num_envs` vehicles leave at least one for each task."""
    if num_envs < 1 + len(also_tasks):
        raise ConfigError(f"num_envs={num_envs} cannot share its vehicles among {1 + len(also_tasks)} tasks "
                          f"(task and also_tasks={also_tasks}): give at least {1 + len(also_tasks)}")
    for other in also_tasks:
        check_env_overrides(teacher, overrides, other)


def check_latency_teacher_labels(config: Any, latency_from: int) -> None:
    """ConfigError unless the student's vehicles (env `config`) include some that act `latency_from` or more
    control steps late, which a latency teacher labels: without them it would teach nothing."""
    randomization = config.randomization
    most = int(randomization.latency_steps[1]) if randomization.enabled else 0
    if most < latency_from:
        raise ConfigError(f"latency_teacher labels the vehicles at latency_from={latency_from} or more control steps, "
                          f"but the student's vehicles act at most {most} late: widen them, e.g. "
                          f"'env_overrides={{randomization: {{latency_steps: [0, {latency_from}]}}}}'")


def check_teacher_pool(cfg: DictConfig, student_env: Any) -> None:
    """ConfigError unless `cfg.teacher_pool` is a pool whose kept runs can label a share of the student's
    (`student_env`, a QuadrotorEnvConfig) rollouts, and that share leaves vehicles to the teacher's."""
    share = float(cfg.teacher_pool_share)
    if not 0.0 < share < 1.0:
        raise ConfigError(f"teacher_pool_share must be in (0, 1): the share of num_envs that fly the pool's vehicles, "
                          f"the rest the teacher's; got {share}")
    env_id = task_env(teacher_config(cfg.teacher, cfg.expert_experiment).env, cfg.task).id
    kept_members(cfg.teacher_pool, float(cfg.teacher_pool_min_success), env_id, student_env,
                 cfg.teacher_pool_latency_from)
    latency_from = cfg.teacher_pool_latency_from
    low = int(student_env.randomization.latency_steps[0]) if student_env.randomization.enabled else 0
    if latency_from is not None and latency_from <= low:
        raise ConfigError(f"teacher_pool_latency_from={latency_from}: the student's vehicles act at least {low} "
                          "control steps late, so the teacher's would fly none; raise it above that")


def family_rollout_overrides(cfg: DictConfig, student_env: Any, with_pool: bool) -> Any:
    """The env overrides of the rollouts the family's teachers label: the student's `env_overrides`, with
    `family_starts` as their start states, `rollout_episode_seconds` as their episode length and, beside a pool
    (`with_pool`) given `teacher_pool_latency_from`, only the latencies below it (`student_env`, a
    QuadrotorEnvConfig, gives the lowest)."""
    overrides = OmegaConf.create(OmegaConf.to_container(cfg.env_overrides, resolve=True) if cfg.env_overrides else {})
    if with_pool and cfg.teacher_pool_latency_from is not None:
        low = int(student_env.randomization.latency_steps[0])
        overrides = OmegaConf.merge(overrides, {"randomization": {
            "latency_steps": [low, int(cfg.teacher_pool_latency_from) - 1]}})
    if cfg.family_starts is not None:
        overrides = OmegaConf.merge(overrides, {"initial_state": OmegaConf.to_container(cfg.family_starts, resolve=True)})
    if cfg.rollout_episode_seconds is not None:
        overrides = OmegaConf.merge(overrides, {"episode_seconds": float(cfg.rollout_episode_seconds)})
    return overrides


def check_rollout_overrides(cfg: DictConfig, student_env: Any) -> None:
    """ConfigError naming the option unless `cfg.family_starts` (null, or fields of InitialStateConfig) and
    `cfg.rollout_episode_seconds` (null, or a length in seconds no shorter than the task's success window) each
    make a valid env of the rollouts the teachers label."""
    options = ("family_starts", "rollout_episode_seconds")
    for option in options:
        if cfg[option] is None:
            continue
        alone = OmegaConf.merge(cfg, {other: None for other in options if other != option})
        try:
            check_env_overrides(teacher_config(cfg.teacher, cfg.expert_experiment),
                                family_rollout_overrides(alone, student_env, False), cfg.task)
        except ConfigError as error:
            value = cfg[option]
            shown = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
            raise ConfigError(f"{option}={shown}: {error}") from None


@dataclass
class Rollout:
    """A vector env the student's rollouts fly and what it last returned."""

    env: Any
    obs: Any = None
    teacher_obs: Any = None
    fast_rows: Any = None  # (num_envs, 1) bool: vehicles the fast-rotor teacher labels
    late_rows: Any = None  # (num_envs, 1) bool: vehicles the latency teacher labels
    # a pool member's vehicle: its own teacher labels every env of this rollout (None: the family's teachers)
    label: Callable[[torch.Tensor], torch.Tensor] | None = None


class Distiller:
    """One distillation in `run_dir` from a composed config (configs/distill.yaml)."""

    def __init__(self, cfg: DictConfig, run_dir: str | Path):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        torch.set_num_threads(int(cfg.torch_threads))
        self.device = select_device(cfg.device)
        seed_everything(int(cfg.seed))
        self.settings = DistillationConfig(**OmegaConf.to_container(cfg.distillation, resolve=True))
        self.settings.validate()
        self.expert = str(cfg.teacher) == EXPERT
        if self.expert:  # the experiment's whole distribution, its student network
            teacher_cfg, self.teacher, self.teacher_path = expert_run_config(str(cfg.expert_experiment)), None, None
            level = len(curriculum_levels(teacher_cfg)) - 1
            agent_config = dataclasses.asdict(SACConfig(**OmegaConf.to_container(teacher_cfg.agent, resolve=True)))
        else:
            state, teacher_cfg, self.teacher = load_policy(check_teacher(cfg.teacher, cfg.checkpoint), cfg.checkpoint,
                                                             self.device)
            self.teacher_path = state["path"]
            level = int(state["counters"].get("curriculum_level", 0))
            agent_config = state["agent_config"]
        self.difficulty = (float(cfg.difficulty) if cfg.difficulty is not None
                           else teacher_difficulty(teacher_cfg, level))
        # a privileged teacher reads the privileged observation, any other policy the student's own
        self.privileged_teacher = bool(teacher_cfg.env.get("privileged_actor", False))
        flown = task_env(teacher_cfg.env, cfg.task)  # the student's task, on the teacher's vehicles
        self.student_env_cfg = env_at(flown, self.difficulty, False, cfg.env_overrides)
        teacher_env_cfg = env_at(flown, self.difficulty, self.privileged_teacher, cfg.env_overrides)
        privileged = self.privileged_teacher or bool(teacher_cfg.env.get("privileged_observation", False))
        # the rollouts: `task` and each of `also_tasks` flown in an equal share of the num_envs vehicles that
        # the teacher_pool's vehicles leave
        members = self._pool_members(teacher_cfg)
        family_overrides = family_rollout_overrides(cfg, self.student_env, bool(members))
        env_cfgs = [env_at(task_env(teacher_cfg.env, task), self.difficulty, False, family_overrides)
                    for task in [cfg.task, *cfg.also_tasks]]
        pool_envs = round(int(cfg.num_envs) * float(cfg.teacher_pool_share)) if members else 0
        shares = np.array_split(np.arange(int(cfg.num_envs) - pool_envs), len(env_cfgs))
        self.rollouts = [Rollout(make_vector_env(env_cfg, len(share), self.device, threads=int(cfg.torch_threads),
                                                 privileged=privileged)) for env_cfg, share in zip(env_cfgs, shares)]
        if self.expert:
            for rollout in self.rollouts:
                rollout.label = expert_labels(rollout.env)
        student_size = self.rollouts[0].env.single_observation_space.shape[0]
        for member in members:
            _, _, policy = load_policy(member.run, "best", self.device)
            project = own_view(policy.obs_dim, member.env, self.student_env, student_size, f"teacher_pool run {member.run}")
            env = make_vector_env(member_env(member, self.student_env, lambda env: task_env(env, cfg.task),
                                             cfg.rollout_episode_seconds),
                                  max(1, round(pool_envs / len(members))), self.device,
                                  threads=int(cfg.torch_threads), privileged=privileged)
            self.rollouts.append(Rollout(env, label=lambda obs, p=policy, f=project: p.act(f(obs), deterministic=True)))
        self.pool_runs = [str(member.run) for member in members]
        self.env = self.rollouts[0].env
        teacher_inputs = self.env.privileged_size if self.privileged_teacher else self.env.single_observation_space.shape[0]
        # what each teacher reads of the student's observation (own_view)
        self.views: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {} if self.teacher is None else {
            "teacher": own_view(self.teacher.obs_dim, teacher_cfg.env, self.student_env, teacher_inputs,
                                f"teacher={cfg.teacher}")}
        self.eval_env = make_vector_env(self.student_env_cfg, int(cfg.eval.episodes), self.device)
        self.teacher_eval_env = make_vector_env(teacher_env_cfg, int(cfg.eval.episodes), self.device)
        self.spec = env_spec(self.env, flown.id)
        self.fast_teacher, self.fast_teacher_path = self._load_labelling_teacher("fast_rotor_teacher", "fast_rotor_checkpoint")
        self.latency_teacher, self.latency_teacher_path = self._load_labelling_teacher("latency_teacher", "latency_checkpoint")
        agent_cfg = dict(agent_config, actor_average_rate=0.0, compile=False)
        if cfg.student.actor_hidden is not None:
            agent_cfg["actor_hidden"] = list(cfg.student.actor_hidden)
        space = self.env.single_action_space
        # a SAC agent whose actor is the student: evaluation, export and the suite load it like any run's
        self.student = SAC(self.spec["observation_size"], space.low, space.high, SACConfig(**agent_cfg),
                           critic_obs_dim=self.env.privileged_size if privileged else None, device=self.device)
        self.regression = StudentRegression(
            self.student.actor, self.settings.lr, int(cfg.iterations) * int(self.settings.updates_per_iteration),
            self.settings.final_lr_fraction, self.settings.pre_squash_weight, bool(self.settings.compile))
        self.dataset = AggregatedDataset(int(self.settings.dataset_capacity), self.spec["observation_size"],
                                         self.spec["action_size"], self.device)
        self.run_cfg = OmegaConf.merge(teacher_cfg, {
            "env": self.student_env_cfg, "agent": agent_cfg, "seed": int(cfg.seed), "curriculum": {"levels": []},
            "distill": {"teacher": str(cfg.teacher), "teacher_checkpoint": self.teacher_path,
                        "fast_rotor_teacher_checkpoint": self.fast_teacher_path,
                        "latency_teacher_checkpoint": self.latency_teacher_path, "teacher_pool_runs": self.pool_runs,
                        "difficulty": self.difficulty, **OmegaConf.to_container(cfg, resolve=True)}})
        self.env_steps = self.updates = 0
        self.wall_seconds = 0.0
        self.history: list[dict[str, Any]] = []
        clear_interrupted_attempt(self.run_dir)
        self.writer = None
        if cfg.logging.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tensorboard"))

    def _pool_members(self, teacher_cfg: DictConfig) -> list[Any]:
        """The kept runs of `teacher_pool` (robo_rl.teacher_pool), [] without one."""
        cfg = self.cfg
        self.student_env = check_env_overrides(teacher_cfg, cfg.env_overrides, cfg.task)
        if cfg.teacher_pool is None:
            return []
        return kept_members(cfg.teacher_pool, float(cfg.teacher_pool_min_success), task_env(teacher_cfg.env, cfg.task).id,
                            self.student_env, cfg.teacher_pool_latency_from)

    def _load_labelling_teacher(self, option: str, checkpoint_option: str) -> tuple[Any, str | None]:
        """The policy and checkpoint path of the teacher that option `option` names for a share of the vehicles
        (None, None without one); it must read the student's observation."""
        cfg = self.cfg
        if cfg[option] is None:
            return None, None
        folder = check_labelling_teacher(cfg[option], cfg[checkpoint_option], cfg.teacher, option)
        state, run_cfg, policy = load_policy(folder, cfg[checkpoint_option], self.device)
        self.views[option] = own_view(policy.obs_dim, run_cfg.env, self.student_env, self.spec["observation_size"],
                                      f"{option}={cfg[option]}")
        return policy, str(state["path"])

    def run(self) -> dict[str, Any]:
        """Distill for `iterations`; returns the summary (also written to summary.json)."""
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(OmegaConf.to_yaml(self.run_cfg))
        start = time.perf_counter()
        views = self.views
        teacher = (expert_labels(self.teacher_eval_env) if self.expert
                   else lambda o: self.teacher.act(views["teacher"](o), deterministic=True))
        self.teacher_result = evaluate_policy(teacher, self.teacher_eval_env, int(cfg.eval.seed), self.device)
        self.fast_teacher_result = None
        if self.fast_teacher is not None:
            self.fast_teacher_result = evaluate_policy(
                lambda o: self.fast_teacher.act(views["fast_rotor_teacher"](o), deterministic=True),
                                                       self.eval_env, int(cfg.eval.seed), self.device)
        self._evaluate(start)
        for index, rollout in enumerate(self.rollouts):
            self._observe(rollout, *rollout.env.reset(seed=int(cfg.seed) + index))
        iterations = int(cfg.iterations)
        bar = tqdm(range(iterations), desc="distill", unit="it", dynamic_ncols=True,
                   disable=not cfg.logging.progress_bar)
        for iteration in bar:
            for rollout in self.rollouts:
                self._rollout(rollout, self.settings.teacher_share(iteration))
            loss = self._fit()
            if self.writer:
                self.writer.add_scalar("distill/loss", loss, self.env_steps)
            if (iteration + 1) % int(cfg.eval.interval_iterations) == 0 or iteration + 1 == iterations:
                entry = self._evaluate(start)
                if cfg.checkpoint_every_evaluation and iteration + 1 < iterations:
                    self._save_checkpoint()
                bar.set_postfix({"student": f"{100 * entry['success_rate']:.0f}%",
                                 EXPERT if self.expert else "teacher": f"{100 * self.teacher_result['success_rate']:.0f}%",
                                 "loss": f"{loss:.4f}"})
        bar.close()
        self.wall_seconds = time.perf_counter() - start
        self._save_checkpoint()
        save_best_policy(self.run_dir, {**self._policy_state(), "evaluation": self.history[-1]})
        return self._finish()

    @torch.no_grad()
    def _rollout(self, rollout: Rollout, teacher_share: float) -> None:
        """`rollout_steps` steps in every env of `rollout`, flown by the teacher with probability `teacher_share`
        per env and step and by the student otherwise; every visited observation enters the dataset labelled
        with the action of the teacher of its vehicle."""
        env = rollout.env
        for _ in range(int(self.cfg.rollout_steps)):
            obs_t = as_tensor(rollout.obs, self.device)
            target = self._label(rollout, obs_t) if rollout.label is None else rollout.label(obs_t)
            self.dataset.add(obs_t, target)
            action = self.student.act(obs_t, deterministic=True)
            if teacher_share > 0:
                flown_by_teacher = torch.rand(len(action), 1, device=self.device) < teacher_share
                action = torch.where(flown_by_teacher, target, action)
            obs, _, _, _, info = env.step(action if env.backend == "torch" else action.cpu().numpy())
            self._observe(rollout, obs, info)
            self.env_steps += env.num_envs

    def _label(self, rollout: Rollout, obs: torch.Tensor) -> torch.Tensor:
        """The family's labels of a rollout's observations `obs`: each vehicle's action by the teacher of its kind."""
        views = self.views
        target = self.teacher.act(views["teacher"](as_tensor(rollout.teacher_obs, self.device)), deterministic=True)
        if self.latency_teacher is not None:
            late = self.latency_teacher.act(views["latency_teacher"](obs), deterministic=True)
            target = torch.where(rollout.late_rows, late, target)
        # the fast-rotor teacher trained across every latency: its vehicles are its own at any latency
        if self.fast_teacher is not None:
            fast = self.fast_teacher.act(views["fast_rotor_teacher"](obs), deterministic=True)
            target = torch.where(rollout.fast_rows, fast, target)
        return target

    def _observe(self, rollout: Rollout, obs: Any, info: dict[str, Any]) -> None:
        """Record what `rollout`'s envs returned: the student's and the teacher's observations and, from the
        episode parameters that reset and restarting steps report, which vehicles the fast-rotor and the
        latency teachers label."""
        rollout.obs = obs
        rollout.teacher_obs = info["privileged_obs"] if self.privileged_teacher else obs
        if "params" not in info:
            return
        if self.fast_teacher is not None:
            rows = fast_rotors(info["params"], float(self.cfg.fast_rotor_tau))
            rollout.fast_rows = torch.as_tensor(rows, device=self.device)[:, None]
        if self.latency_teacher is not None:
            rows = long_latency(info["params"], int(self.cfg.latency_from))
            rollout.late_rows = torch.as_tensor(rows, device=self.device)[:, None]

    def _fit(self) -> float:
        """`updates_per_iteration` regression steps on the aggregated data; the mean loss."""
        losses = [self.regression.update(*self.dataset.sample(self.settings.batch_size))
                  for _ in range(self.settings.updates_per_iteration)]
        self.updates += len(losses)
        return sum(losses) / len(losses)

    def _evaluate(self, start: float) -> dict[str, Any]:
        """The student on the fixed evaluation episodes; appended to the history and logged."""
        result = evaluate_policy(lambda o: self.student.act(o, deterministic=True), self.eval_env,
                                 int(self.cfg.eval.seed), self.device)
        self.wall_seconds = time.perf_counter() - start
        entry = {"env_steps": self.env_steps, "updates": self.updates, "wall_seconds": self.wall_seconds,
                 "difficulty": self.difficulty, "success_rate": result["success_rate"],
                 "mean_return": result["mean_return"], "mean_length": result["mean_length"],
                 "teacher_success_rate": self.teacher_result["success_rate"],
                 "teacher_mean_return": self.teacher_result["mean_return"],
                 "teacher_mean_length": self.teacher_result["mean_length"]}
        if self.fast_teacher_result is not None:
            entry["fast_rotor_teacher_success_rate"] = self.fast_teacher_result["success_rate"]
        self.history.append(entry)
        if self.writer:
            for key in ("success_rate", "mean_return", "mean_length", "teacher_success_rate"):
                self.writer.add_scalar(f"eval/{key}", entry[key], self.env_steps)
        return entry

    def _save_checkpoint(self) -> None:
        """The student and the evaluation history as the checkpoint of the env steps so far."""
        save_checkpoint(self.run_dir, self.env_steps, {**self._policy_state(), "history": self.history},
                        keep=int(self.cfg.checkpoint_keep))

    def _policy_state(self) -> dict[str, Any]:
        """What evaluation and export read from a checkpoint (as `robo_rl.train` writes it)."""
        return policy_state(self.run_cfg, self.spec, self.student, self.device, {
            "env_steps": self.env_steps, "updates": self.updates, "episodes": 0, "wall_seconds": self.wall_seconds,
            "intervention_steps": 0, "curriculum_level": 0})

    def _finish(self) -> dict[str, Any]:
        if self.writer:
            self.writer.close()
        plot_learning_curve(self.history, self.run_dir / "learning_curve.png",
                            title=f"{self.spec['id']} student of {Path(str(self.cfg.teacher)).name}")
        summary = {"env_id": self.spec["id"], "seed": int(self.cfg.seed), "env_steps": self.env_steps,
                   "updates": self.updates, "wall_seconds": self.wall_seconds, "teacher": str(self.cfg.teacher),
                   "teacher_success_rate": self.teacher_result["success_rate"], "difficulty": self.difficulty,
                   "fast_rotor_teacher": None if self.fast_teacher is None else str(self.cfg.fast_rotor_teacher),
                   "latency_teacher": None if self.latency_teacher is None else str(self.cfg.latency_teacher),
                   "teacher_pool_runs": len(self.pool_runs),
                   "final": self.history[-1], "history": self.history, "run_dir": str(self.run_dir)}
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


@hydra_command(config_path="../configs", config_name="distill")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: distill into Hydra's run directory and print the result."""
    from hydra.core.hydra_config import HydraConfig

    run_dir = HydraConfig.get().runtime.output_dir
    summary = Distiller(cfg, run_dir).run()
    best = max(summary["history"], key=lambda e: e["success_rate"])
    print(f"student {run_dir}: {summary['env_steps']:,} env steps, {summary['updates']:,} updates, "
          f"{summary['wall_seconds']:.1f} s; evaluation success {100 * summary['final']['success_rate']:.0f}% "
          f"(kept; best evaluation {100 * best['success_rate']:.0f}%), "
          f"{'the model-based expert' if summary['teacher'] == EXPERT else 'teacher'} "
          f"{100 * summary['teacher_success_rate']:.0f}% on the "
          f"same episodes at difficulty {summary['difficulty']}"
          + (f", fast-rotor teacher {100 * summary['history'][0]['fast_rotor_teacher_success_rate']:.0f}%"
             if summary["fast_rotor_teacher"] else ""))


if __name__ == "__main__":
    main()
