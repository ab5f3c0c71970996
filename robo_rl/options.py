"""The options of each command (configs/<command>.yaml): their types and allowed values, checked as soon as
Hydra has composed them and before any work (`robo_rl.cli.hydra_command` calls `check_options`).

Without this, `num_envs=abc` or `seed=-1` surfaced as a ValueError deep inside int() or NumPy, and
`buffer.offline_ratio=nan` or `eval.episodes=0` ran. Each option has an annotation and, for numbers, an
allowed interval (sim.validation, as for the env configs); the `agent` group is checked against
SACConfig's fields and ranges. Env configs are checked where the env is built (sim.quadrotor.config,
sim.arm.env). A key that no config file of the command defines (Hydra refuses an unknown key unless it is
added with `+`, and then nothing would read it: `+total_env_step=1000` trained 500k steps) is refused too.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from sim.errors import ConfigError
from sim.validation import Interval, coerce, coerce_fields, number

SEED = Interval(0, 2**32 - 1)  # what NumPy's seeding takes
COUNT = Interval(1, 2**31 - 1)
SPEED = Interval(0.0, 1.0, open_low=True)  # a teleop device's |action| at full deflection: a demonstration's actions
# must lie in the action space, [-1, 1], which the policy's tanh spans
DEAD_ZONE = Interval(0.0, 1.0, open_high=True)  # a share of full deflection (1: every reading divided by zero)
STEPS = Interval(0, 10**12)
DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")

# option path -> (annotation, allowed interval of a number or None)
OPTIONS: dict[str, dict[str, tuple[Any, Interval | None]]] = {
    "train": {
        "seed": (int, SEED), "device": (str, None), "torch_threads": (int, Interval(1, 4096)),
        "total_env_steps": (int, STEPS), "num_envs": (int, Interval(1, 2**20)),
        "learning_starts": (int, STEPS), "updates_per_iteration": (int, Interval(1, 10**6)),
        "privileged_critic": (bool | str, None), "start_from_nominal_action": (bool, None),
        "demos": (str | None, None), "resume": (str | None, None), "init_from": (str | None, None),
        "reward_classifier": (str | None, None),
        "stop_at_success": (float | None, Interval(0.0, 1.0, open_low=True)),
        "eval.interval_env_steps": (int, Interval(1, 10**12)), "eval.episodes": (int, Interval(1, 10**6)),
        "eval.seed": (int, SEED), "checkpoint.interval_env_steps": (int, Interval(1, 10**12)),
        "checkpoint.keep": (int, COUNT), "buffer.capacity": (int, Interval(1, 10**10)),
        "buffer.offline_ratio": (float, Interval(0.0, 1.0)), "logging.tensorboard": (bool, None),
        "logging.log_interval_env_steps": (int, Interval(1, 10**12)), "logging.progress_bar": (bool, None),
        "logging.video": (bool, None), "intervention.kind": (str, None),
        # intervention=scripted's (absent under intervention=none): nan, inf or abc were a traceback in the run's folder
        "intervention.patience": (int, Interval(1, 10**6)), "intervention.duration": (int, Interval(1, 10**6)),
        "intervention.budget": (float, Interval(0.0, 1.0)), "intervention.until_env_steps": (int | None, STEPS),
        "curriculum.levels": (tuple[float, ...], Interval(0.0, 1.0)), "curriculum.advance_at": (float, Interval(0.0, 1.0)),
        "curriculum.patience": (int | None, Interval(1, 10**6)),
    },
    "evaluate": {
        "run": (str, None), "checkpoint": (str, None), "episodes": (int, Interval(1, 10**6)), "seed": (int, SEED),
        "device": (str, None), "vehicle": (str | None, None), "latency_steps": (tuple[int, int] | None, Interval(0, 50)),
        "randomization": (dict[str, Any] | None, None), "overrides": (dict[str, Any], None),
    },
    "robustness": {
        "run": (str, None), "checkpoint": (str, None), "device": (str, None), "episodes": (int, Interval(1, 10**6)),
        "seed": (int, SEED), "vehicles": (tuple[str, ...] | None, None), "latency_steps": (tuple[int, ...], None),
        "wind": (float, Interval(0.0, 10.0)), "start_sets": (dict[str, dict[str, Any] | None], None),
        "held_out.episodes": (int, Interval(0, 10**6)), "held_out.seed": (int, SEED),
        "held_out.start_set": (str | None, None),
        "specialists": (dict[str, str] | None, None), "specialists_dir": (str | None, None),
        "firmware_limits": (bool, None),
        "targets.start_set": (str, None),
        "targets.latency_steps": (tuple[int, ...], None), "targets.min_success": (float, Interval(0.0, 1.0)),
        "targets.specialist_start_set": (str, None), "targets.specialist_gap": (float, Interval(0.0, 1.0)),
        "targets.held_out": (float, Interval(0.0, 1.0)), "task": (str | None, None),
    },
    "distill": {
        "teacher": (str, None), "expert_experiment": (str, None), "checkpoint": (str, None), "device": (str, None),
        "torch_threads": (int, Interval(1, 4096)),
        "fast_rotor_teacher": (str | None, None), "fast_rotor_checkpoint": (str, None),
        "fast_rotor_tau": (float, Interval(0.0, 10.0)), "env_overrides": (dict[str, Any] | None, None),
        "teacher_pool": (str | None, None), "teacher_pool_share": (float, Interval(0.0, 1.0)),
        "teacher_pool_min_success": (float, Interval(0.0, 1.0)),
        "teacher_pool_latency_from": (int | None, Interval(1, 50)),
        "family_starts": (dict[str, Any] | None, None),
        "rollout_episode_seconds": (float | None, Interval(0.0, 3600.0, open_low=True)),
        "task": (str | None, None), "also_tasks": (tuple[str, ...], None),
        "seed": (int, SEED), "difficulty": (float | None, Interval(0.0, 1.0)), "num_envs": (int, Interval(1, 2**20)),
        "rollout_steps": (int, Interval(1, 10**6)), "iterations": (int, Interval(1, 10**6)),
        "student.actor_hidden": (tuple[int, ...] | None, None),
        "distillation.lr": (float, Interval(1e-8, 1.0)), "distillation.batch_size": (int, Interval(1, 2**20)),
        "distillation.updates_per_iteration": (int, Interval(1, 10**6)),
        "distillation.dataset_capacity": (int, Interval(1, 10**9)),
        "distillation.teacher_iterations": (int, Interval(0, 10**6)),
        "distillation.final_lr_fraction": (float, Interval(1e-6, 1.0)),
        "distillation.pre_squash_weight": (float, Interval(0.0, 100.0)), "distillation.compile": (bool, None),
        "eval.interval_iterations": (int, Interval(1, 10**6)), "eval.episodes": (int, Interval(1, 10**6)),
        "eval.seed": (int, SEED), "checkpoint_keep": (int, COUNT), "checkpoint_every_evaluation": (bool, None),
        "logging.progress_bar": (bool, None), "logging.tensorboard": (bool, None),
    },
    "teacher_pool": {
        "run": (str, None), "out": (str, None), "size": (int, Interval(1, 10**5)), "seed": (int, SEED),
        "min_latency": (int, Interval(0, 50)), "steps": (int, Interval(1, 10**12)), "jobs": (int, Interval(1, 4096)),
        "stop_at_success": (float | None, Interval(0.0, 1.0, open_low=True)), "ray_address": (str | None, None),
        "overrides": (tuple[str, ...], None),
        "env_overrides": (dict[str, Any] | None, None), "focus": (Any, None),
    },
    "export": {
        "run": (str, None), "checkpoint": (str, None), "out": (str | None, None), "pairs": (int, Interval(8, 1024)),
        "seed": (int, SEED), "safe_action": (str | tuple[float, ...], None),
        # what torch's TorchScript exporter writes (opset <= 20) and ONNX Runtime runs; the ends of both ranges are
        # exported in tests/robo_rl/export/test_bundle.py
        "onnx.opset": (int, Interval(8, 20)), "onnx.ir_version": (int, Interval(4, 13)), "c": (bool | str, None), "c_prefix": (str, None),
        "vehicle": (str | None, None),
    },
    "record": {
        "dataset": (str, None), "episodes": (int, Interval(1, 10**6)), "seed": (int, SEED),
        "num_envs": (int, Interval(1, 2**16)), "device": (str, None), "device_path": (str | None, None),
        "realtime": (bool, None), "expert_noise": (float, Interval(0.0, 10.0)),
        # the teleop devices' own (robo_rl.teleop): NaN or a dead zone of 1 made NaN actions, which ended the session
        # at the first key or stick and lost the accepted episodes
        "teleop.keyboard.hold_steps": (int, Interval(1, 1000)), "teleop.keyboard.speed": (float, SPEED),
        "teleop.gamepad.dead_zone": (float, DEAD_ZONE), "teleop.gamepad.speed": (float, SPEED),
        "teleop.spacemouse.full_scale": (float, Interval(0.0, 10**5, open_low=True)),
        "teleop.spacemouse.dead_zone": (float, DEAD_ZONE), "teleop.spacemouse.speed": (float, SPEED),
        # an axis beyond the device's, or fewer than three, failed at the first action (IndexError, a broadcast error)
        "teleop.spacemouse.axes": (tuple[int, int, int], Interval(0, 2)),
        "teleop.spacemouse.signs": (tuple[float, float, float], Interval(-10.0, 10.0)),
        "teleop.gamepad.mapping.axes": (tuple[int, int, int], Interval(0, 63)),  # the joystick API's ABS_CNT
        "teleop.gamepad.mapping.signs": (tuple[float, float, float], Interval(-10.0, 10.0)),
    },
}
# options whose null means "none" (no resume, no demos): an empty value (`resume=`, what a shell variable that was
# not set gives) is not that null but a slip, and treated as null it silently started a new 500k-step run
CHECKPOINT = "best, last or a checkpoint file of the run"
EMPTY_REFUSED: dict[str, dict[str, str]] = {
    "train": {"resume": "the run folder to continue", "demos": "a Minari dataset id or folder",
              "init_from": "the training run to start from", "reward_classifier": "the success classifier's file"},
    "distill": {"fast_rotor_teacher": "the fast-rotor teacher's run", "teacher_pool": "the teacher pool's folder",
                "checkpoint": CHECKPOINT, "fast_rotor_checkpoint": CHECKPOINT},
    "robustness": {"specialists_dir": "the folder of specialist runs (make specialists: outputs/specialists)",
                   "checkpoint": CHECKPOINT},
    "evaluate": {"checkpoint": CHECKPOINT},
    "export": {"out": "the bundle's folder", "checkpoint": CHECKPOINT},
    "record": {"device_path": "the device file, e.g. /dev/input/js1"},
    "teacher_pool": {"ray_address": "the Ray cluster's address, e.g. auto", "out": "the pool's folder"},
}
# options of one choice of a config group, absent under the others (intervention=none has no patience)
GROUP_CHOICE_OPTIONS = {"train": {"intervention.patience", "intervention.duration", "intervention.budget",
                                  "intervention.until_env_steps"}}
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
TORCH_DEVICE_COMMANDS = ("train", "evaluate", "robustness", "distill")  # where `device` is a torch device (record's is a teleop device)


def check_options(cfg: DictConfig, command: str, require_all: bool = True, resumed: bool = False) -> None:
    """Raise ConfigError naming the first option of `command` (a key of OPTIONS) that is missing (removed with
    `~option`; `require_all=False` for an older run's recorded config), of the wrong type or outside its range,
    an env id or intervention kind that does not exist, train's `demos` where no dataset is, or an `agent` group
    that SACConfig refuses. `resumed`: `cfg` is a resumed run's, whose budget the resume checks against the run."""
    # an env group's training budget (configs/README.md) first: train's total_env_steps defaults to it
    budget = OmegaConf.select(cfg, "env.total_env_steps", default=None)
    if command == "train" and budget is not None:
        value = coerce(budget, int, "env.total_env_steps")
        if value not in STEPS:
            raise ConfigError(f"env.total_env_steps must lie in {STEPS}, got {number(value)}")
    for path, (annotation, allowed) in OPTIONS.get(command, {}).items():
        if OmegaConf.select(cfg, path, default="<absent>", throw_on_missing=False) == "<absent>":
            if require_all and path not in GROUP_CHOICE_OPTIONS.get(command, ()):
                raise ConfigError(f"option {path} of {command} is missing (removed with ~{path}?); it must be given")
            continue
        raw = OmegaConf.select(cfg, path, throw_on_missing=True)
        value = coerce(OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_config(raw) else raw, annotation, path)
        if value == "" and path in EMPTY_REFUSED.get(command, {}):
            raise ConfigError(f"{path}= is empty; give {EMPTY_REFUSED[command][path]}, or omit {path}=")
        if allowed is not None:
            check_range(value, allowed, path)
    if command in TORCH_DEVICE_COMMANDS and "device" in cfg:
        check_device(str(cfg.device))
    if command == "train" and "privileged_critic" in cfg and isinstance(cfg.privileged_critic, str) \
            and cfg.privileged_critic != "auto":
        raise ConfigError(f"privileged_critic must be true, false or auto, got {cfg.privileged_critic!r}")
    if command == "train" and "privileged_critic" in cfg and OmegaConf.select(cfg, "env.id", default=None) is not None:
        check_privileged_critic(cfg)
    if command == "train" and OmegaConf.select(cfg, "stop_at_success", default=None) is not None \
            and OmegaConf.select(cfg, "runner.kind", default="local") != "local":
        raise ConfigError("stop_at_success ends a run with runner=local only (runner=ray evaluates asynchronously); "
                          "give stop_at_success=null")
    if command == "train" and OmegaConf.select(cfg, "init_from", default=None) is not None:
        from robo_rl.checkpoint import require_run_dir

        require_run_dir(cfg.init_from, "init_from", need_policy=True)  # before Hydra makes the run folder
        # another task's policy was refused only once the run had started (and in every teacher_pool member)
        started = OmegaConf.select(OmegaConf.load(Path(str(cfg.init_from)) / "config.yaml"), "env.id", default=None)
        given = OmegaConf.select(cfg, "env.id", default=None)
        if given is not None and started != given:
            raise ConfigError(f"init_from={cfg.init_from} trained {started}; this run trains {given}: give a run of "
                              "this env")
    if command == "train" and "agent" in cfg:
        check_agent(OmegaConf.to_container(cfg.agent, resolve=True))
        check_budget(cfg, warn_idle=not resumed)
    if command == "train" and "runner" in cfg:
        from robo_rl.distributed.cluster import check_runner

        check_runner(OmegaConf.to_container(cfg.runner, resolve=True))
    if command == "train" and "curriculum" in cfg:
        from robo_rl.train import curriculum_levels

        curriculum_levels(cfg)
    if command in ("train", "record") and OmegaConf.select(cfg, "env.id", default=None) is not None:
        from robo_rl.envs import check_env_config

        cameras = command == "record" or OmegaConf.select(cfg, "runner.kind", default="local") == "local"
        # before Hydra makes the run folder
        env_config = check_env_config(OmegaConf.to_container(cfg.env, resolve=True), cameras=cameras)
        if command == "train" and OmegaConf.select(cfg, "reward_classifier", default=None):
            from robo_rl.envs import camera_images
            from robo_rl.success_classifier import load_classifier

            images = camera_images(env_config)
            if not images:
                raise ConfigError(f"reward_classifier reads camera images; {cfg.env.id} has none here (turn its "
                                  "cameras on, e.g. env=so_arm100_pick_cube_pixels)")
            load_classifier(str(cfg.reward_classifier), images)  # a file that is not one, or of other cameras
    # before the run folder, and before train names the privileged critic that demos cannot feed: the user then
    # turned that off for nothing; a resumed run's recorded demos are in its checkpoint
    if command == "train" and require_all and cfg.get("demos"):
        from robo_rl.datasets import DatasetError, require_dataset

        try:
            require_dataset(cfg.demos, "demos")
        except DatasetError as error:
            raise ConfigError(str(error)) from None
    kind = OmegaConf.select(cfg, "intervention.kind", default=None)
    if command == "train" and kind is not None:
        from robo_rl.interventions import INTERVENTION_KINDS

        if kind not in INTERVENTION_KINDS:
            raise ConfigError(f"intervention.kind must be one of {', '.join(INTERVENTION_KINDS)}, got {kind!r}")
    if command == "robustness":  # the run's env, vehicle names, start sets and specialists' run folders
        from robo_rl.robustness import check_run, suite_from_config

        check_run(cfg.run)
        suite_from_config(cfg)
    if command == "distill":
        from robo_rl.checkpoint import CheckpointError
        from robo_rl.distill import (EXPERT, check_also_tasks, check_env_overrides, check_labelling_teacher,
                                     check_latency_teacher_labels, check_rollout_overrides,
                                     check_reads_student_observation, check_teacher, check_teacher_pool,
                                     expert_run_config)
        from robo_rl.envs import check_quadrotor_run

        expert = str(cfg.teacher) == EXPERT
        if expert and (Path(EXPERT) / "config.yaml").is_file():  # a run folder named expert here is not taken silently
            raise ConfigError(f"teacher={EXPERT} names the model-based expert, and ./{EXPERT} is also a run here; give "
                              f"teacher=./{EXPERT} for that run, or run from another folder for the expert")
        if expert:  # it labels every vehicle itself
            for option in ("fast_rotor_teacher", "latency_teacher", "teacher_pool"):
                if cfg[option] is not None:
                    raise ConfigError(f"{option}={cfg[option]}: teacher={EXPERT} labels every vehicle itself; omit {option}=")
            landing = [task for task in [cfg.task, *cfg.also_tasks] if task == "takeoff_land"]
            if landing:  # its collective thrust never falls below 90% of the weight: it flies 0% of them
                raise ConfigError(f"task={landing[0]}: teacher={EXPERT} does not land (its thrust stays near the "
                                  "weight); give a run as teacher= for take-off and landing")
            source = expert_run_config(str(cfg.expert_experiment))
        else:
            try:
                check_teacher(cfg.teacher, cfg.checkpoint)
                for option, checkpoint in (("fast_rotor_teacher", "fast_rotor_checkpoint"),
                                           ("latency_teacher", "latency_checkpoint")):
                    if cfg[option] is not None:
                        check_labelling_teacher(cfg[option], cfg[checkpoint], cfg.teacher, option)
            except CheckpointError as error:
                raise ConfigError(str(error)) from None
            check_quadrotor_run(cfg.teacher, "teacher", "distillation")
            source = cfg.teacher
        student_env = check_env_overrides(source, cfg.env_overrides, cfg.task)
        check_also_tasks(source, cfg.env_overrides, list(cfg.also_tasks), int(cfg.num_envs))
        if not isinstance(cfg.latency_from, int) or isinstance(cfg.latency_from, bool) or cfg.latency_from < 1:
            raise ConfigError(f"latency_from must be a whole number of control steps >= 1, got {cfg.latency_from!r}")
        for option in ("fast_rotor_teacher", "latency_teacher") if expert else ("teacher", "fast_rotor_teacher",
                                                                               "latency_teacher"):
            if cfg[option] is not None:
                check_reads_student_observation(student_env, cfg[option], cfg.task, option)
        if cfg.latency_teacher is not None:
            check_latency_teacher_labels(student_env, cfg.latency_from)
        if cfg.teacher_pool is not None:
            check_teacher_pool(cfg, student_env)
        check_rollout_overrides(cfg, student_env)
        if cfg.student.actor_hidden is not None and (not cfg.student.actor_hidden
                                                     or min(cfg.student.actor_hidden) < 1):
            raise ConfigError(f"student.actor_hidden must be a list of positive layer widths, got "
                              f"{list(cfg.student.actor_hidden)}")
    if command == "teacher_pool":  # before Hydra makes the pool's folder
        from robo_rl.checkpoint import CheckpointError, require_run_dir
        from robo_rl.teacher_pool import focus_regions

        focus_regions(cfg.focus)

        try:
            require_run_dir(cfg.run, "run")
        except CheckpointError as error:
            raise ConfigError(str(error)) from None
        from robo_rl.envs import check_quadrotor_run

        check_quadrotor_run(cfg.run, "run", "the teacher pool")
        out = Path(str(cfg.out))
        if out.exists() and not out.is_dir():
            raise ConfigError(f"out={cfg.out} is a file; give a new folder or this pool's")
        from robo_rl.teacher_pool import POOL_FILE

        # a run, say, whose folder got the pool's logs; Hydra's own log of this command is there by the task's check
        held = [entry for entry in out.iterdir() if entry.name != "teacher_pool.log"] if out.is_dir() else []
        if held and not (out / POOL_FILE).is_file():
            raise ConfigError(f"out={cfg.out} is a folder that holds no teacher pool ({POOL_FILE}); give a new folder "
                              "or this pool's")
        from robo_rl.distill import check_env_overrides

        most = int(check_env_overrides(cfg.run, cfg.env_overrides).randomization.latency_steps[1])
        if int(cfg.min_latency) > most:
            given = " with its env_overrides" if cfg.env_overrides else ""
            raise ConfigError(f"min_latency={cfg.min_latency}: the vehicles of run={cfg.run}{given} act at most {most} "
                              "control steps late; give at most that")
        from robo_rl.teacher_pool import drawn_pool

        from robo_rl.teacher_pool import check_member_overrides

        # too few vehicles at min_latency or in a focus region: refused before the folder is made
        check_member_overrides(drawn_pool(cfg)[1][0], list(cfg.overrides or []), int(cfg.steps))
        if cfg.ray_address is not None:
            from robo_rl.cli import require_module

            require_module("ray")  # make train installs robo-rl without Ray
        if cfg.ray_address not in (None, "local"):
            from robo_rl.distributed.cluster import ClusterError, check_reachable, joined_cluster

            try:
                if cfg.ray_address != "auto":
                    check_reachable(str(cfg.ray_address), option="ray_address", local="local")
                else:  # where `auto` finds no cluster, Ray says so only once asked to join
                    with joined_cluster("auto", 1, "ray_address", "a specialist reserves", "local"):
                        pass
            except ClusterError as error:
                raise ConfigError(str(error)) from None
    if command == "export" and "c" in cfg and c_choice(cfg.c) not in ("auto", "true", "false"):
        raise ConfigError(f"c must be auto, true or false, got {cfg.c!r}")
    if command in ("evaluate", "export") and OmegaConf.select(cfg, "vehicle", default=None) is not None:
        from robo_rl.export.bundle import check_vehicle_name
        from robo_rl.export.errors import ExportError

        try:
            check_vehicle_name(str(cfg.vehicle))
        except ExportError as error:
            raise ConfigError(str(error)) from None
    if command in OPTIONS:
        check_known_keys(OmegaConf.to_container(cfg, resolve=False), known_keys(command), command)


def check_range(value: Any, allowed: Interval, path: str) -> None:
    """ConfigError unless the number `value`, or every number of the list `value` (curriculum.levels: a level past
    the first went unchecked until the curriculum reached it, hours into the run), lies in `allowed`."""
    values = enumerate(value) if isinstance(value, (tuple, list)) else [(None, value)]
    for index, item in values:
        if isinstance(item, (int, float)) and not isinstance(item, bool) and item not in allowed:
            name = path if index is None else f"{path}[{index}]"
            raise ConfigError(f"{name} must lie in {allowed}, got {number(item)}")


def c_choice(value: Any) -> str:
    """export's `c` option as a word: Hydra reads c=true and c=false as booleans."""
    return {True: "true", False: "false"}.get(value, str(value)) if isinstance(value, bool) else str(value)


def check_known_keys(given: Mapping[str, Any], known: Mapping[str, Any], command: str, prefix: str = "") -> None:
    """ConfigError naming the first key of `given` that `known` (a tree of the keys the command's config files
    define) lacks; below a key whose default is not a non-empty mapping (`overrides: {}`, a list, null)
    anything goes: those values are checked where they are used (the env's or the agent's config)."""
    for key, value in given.items():
        path = f"{prefix}{key}"
        if key == "hydra" and not prefix:
            continue
        if key not in known:
            options = ", ".join(sorted(str(k) for k in known if k != "hydra"))
            raise ConfigError(f"unknown option {path} (added with +, nothing would read it); {prefix[:-1] or command} "
                              f"has: {options}")
        below = known[key]
        if isinstance(value, Mapping) and isinstance(below, Mapping) and below:
            check_known_keys(value, below, command, f"{path}.")


@functools.cache
def known_keys(command: str) -> dict[str, Any]:
    """The tree of keys that configs/<command>.yaml and every option of its config groups define."""
    top = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / f"{command}.yaml"), resolve=False)
    tree: dict[str, Any] = {}
    groups = [next(iter(entry)) for entry in top.pop("defaults", []) if isinstance(entry, Mapping)]
    _union(tree, top)
    for group in groups + ["experiment"] * (command == "train"):
        for option in sorted((CONFIG_DIR / group).glob("*.yaml")):
            content = OmegaConf.to_container(OmegaConf.load(option), resolve=False) or {}
            content.pop("defaults", None)
            global_package = option.read_text().lstrip().startswith("# @package _global_")
            _union(tree, content if global_package else {group: content})
    return tree


def _union(tree: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, Mapping) and value and isinstance(tree.get(key), dict) and tree[key]:
            _union(tree[key], value)
        elif isinstance(value, Mapping) and value and key not in tree:
            tree[key] = {}
            _union(tree[key], value)
        elif key not in tree:
            tree[key] = value


def check_privileged_critic(cfg: DictConfig) -> None:
    """ConfigError, naming the option that asked for it, where the critic is to see privileged state that the env
    does not provide (the env then refused its own `privileged` setting as `unknown option config.privileged`)."""
    from robo_rl.envs import check_env_id, provides_privileged
    from robo_rl.train import privileged_critic

    check_env_id(cfg.env.id)
    if not privileged_critic(cfg) or provides_privileged(cfg.env.id):
        return
    option, instead = (("env.privileged_observation=true with privileged_critic=auto", "env.privileged_observation=false")
                       if cfg.privileged_critic == "auto" else ("privileged_critic=true", "privileged_critic=false or auto"))
    raise ConfigError(f"{option}: {cfg.env.id} provides no privileged observation for the critic (the quadrotor envs "
                      f"do); give {instead}")


def check_device(name: str) -> None:
    """ConfigError unless `name` is auto, cpu, mps, or a CUDA device that this machine has."""
    if not DEVICE.match(name):
        raise ConfigError(f"device must be auto, cpu, cuda, cuda:<index> or mps, got {name!r}")
    if name.startswith("cuda"):
        import torch

        index = int(name.split(":")[1]) if ":" in name else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ConfigError(f"device={name}: this machine has {torch.cuda.device_count()} CUDA devices; "
                              "use device=auto or cpu")


def check_agent(agent: Mapping[str, Any]) -> None:
    """ConfigError unless the `agent` group makes a valid SACConfig (its fields, types and ranges)."""
    from robo_rl.agents.sac import SACConfig

    if not isinstance(agent, Mapping):
        raise ConfigError(f"agent must be a mapping of SACConfig fields, got {agent!r}")
    SACConfig(**coerce_fields(SACConfig, agent, "agent")).validate()


def check_budget(cfg: DictConfig, warn_idle: bool = True) -> None:
    """ConfigError where train's budget cannot train: total_env_steps below one step of every env (0 made a run
    without a policy), or a replay buffer smaller than one minibatch (agent.batch_size: every sample repeated
    transitions). With `warn_idle`, a new run's learning_starts beyond its last env step is warned about: no
    update runs, which a smoke test of the run's machinery may want."""
    import warnings

    total, envs = int(cfg.total_env_steps), int(cfg.num_envs)
    if total < envs:
        raise ConfigError(f"total_env_steps={total} is less than one step of each of the num_envs={envs} envs; give "
                          f"at least {envs}")
    capacity, batch = int(cfg.buffer.capacity), int(cfg.agent.batch_size)
    if capacity < batch:
        raise ConfigError(f"buffer.capacity={capacity} holds less than one minibatch (agent.batch_size={batch}); "
                          f"give at least {batch}")
    last = -(-total // envs) * envs  # the env steps the run ends at: whole steps of every env
    if warn_idle and int(cfg.learning_starts) > last and not cfg.get("resume"):
        warnings.warn(f"learning_starts={int(cfg.learning_starts)} lies beyond the run's last env step ({last}, "
                      f"total_env_steps={total} with num_envs={envs}): no update will run, and the run's policy stays "
                      "its untrained initial one", stacklevel=2)
