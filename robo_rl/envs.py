"""Building the batched environments a run trains and evaluates on, from its `env` config group."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import torch
from omegaconf import DictConfig, OmegaConf

import sim  # noqa: F401  (registers the robo_rl/* ids)
from sim.errors import ConfigError
from sim.registration import make_env_config


def make_vector_env(env_cfg: Mapping[str, Any], num_envs: int, device: torch.device,
                    overrides: Mapping[str, Any] | None = None, threads: int = 0, privileged: bool = False,
                    cameras: bool = False) -> Any:
    """`gymnasium.make_vec` of env_cfg.id with its backend and config overrides (plus `overrides`);
    `threads` C threads for the MuJoCo batch backend (0: one per core); `privileged` asks the env to put
    privileged observations for an asymmetric critic into its infos; env_cfg.privileged_actor makes them the
    observation (a teacher's); `cameras`: the caller takes dict observations with camera images (otherwise a
    config with cameras is refused with one line)."""
    check_env_id(env_cfg.get("id"))
    for name, value in (("env.overrides", env_cfg.get("overrides")), ("overrides", overrides)):
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping of the env's config fields, got {value!r}")
    for name in ("privileged_actor", "compile"):  # any string was taken as true: privileged_actor=no trained a teacher
        if not isinstance(env_cfg.get(name, False), bool):
            raise ConfigError(f"env.{name} must be true or false, got {env_cfg.get(name)!r}")
    config = make_env_config(env_cfg["id"], _own_vehicle_only(env_cfg["id"], dict(env_cfg.get("overrides") or {}),
                                                              overrides or {}),
                             dict(overrides or {}))
    if not cameras:
        refuse_cameras(config)
    kwargs: dict[str, Any] = {"backend": env_cfg.get("backend", "torch"), "config": config}
    if privileged:
        kwargs["privileged"] = True
    if env_cfg.get("privileged_actor", False):
        kwargs["privileged_actor"] = True
    if kwargs["backend"] == "torch":
        kwargs["device"] = device
        kwargs["compile"] = bool(env_cfg.get("compile", False))
    elif kwargs["backend"] == "mujoco_batch":
        kwargs["nthread"] = threads
    return gym.make_vec(env_cfg["id"], num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)


def env_config_at(env_cfg: Mapping[str, Any], difficulty: float | None) -> Mapping[str, Any]:
    """The env group `env_cfg` with its randomization at `difficulty` (a curriculum level); None: unchanged."""
    if difficulty is None:
        return env_cfg
    plain = OmegaConf.to_container(env_cfg, resolve=True) if OmegaConf.is_config(env_cfg) else dict(env_cfg)
    overrides = dict(plain.get("overrides") or {})
    overrides["randomization"] = {**dict(overrides.get("randomization") or {}), "difficulty": difficulty}
    return {**plain, "overrides": overrides}


def _own_vehicle_only(env_id: str, base: dict, overrides: Mapping[str, Any]) -> dict:
    """`base` (env `env_id`'s config overrides) without its `vehicle_overrides` where `overrides` fly another named
    vehicle: those numbers describe the vehicle the run was configured with (a user's identification, a family's
    nominal vehicle), and merged key by key they would land on the other one. The run's vehicle is the one its
    config makes (the task's default where it names none: crazyflie_l2f_paper for hover, whose numbers were put
    on crazyflie_rltools, the simulator's default, when that was asked for)."""
    if "vehicle" not in overrides or "vehicle_overrides" not in base:
        return base
    if overrides["vehicle"] == make_env_config(env_id, base).vehicle:
        return base
    return {key: value for key, value in base.items() if key != "vehicle_overrides"}


def check_env_config(env_cfg: Mapping[str, Any], cameras: bool = False) -> Any:
    """The env config that env_cfg's id and `overrides` make, checked as building the env would check it (cameras
    only where `cameras`), without building it; ConfigError otherwise."""
    env_id = env_cfg.get("id")
    check_env_id(env_id)
    overrides = env_cfg.get("overrides")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"env.overrides must be a mapping of the env's config fields, got {overrides!r}")
    config = make_env_config(env_id, dict(overrides or {}))
    if not cameras:
        refuse_cameras(config)
    return config


def camera_images(config: Any) -> dict[str, tuple[int, int, int]]:
    """The camera images an env config's observation holds, (height, width, 3) by name; {} without cameras."""
    cameras = getattr(config, "cameras", None)
    if not getattr(cameras, "enabled", False):
        return {}
    return {name: (cameras.height, cameras.width, 3) for name in cameras.names}


def refuse_cameras(config: Any) -> None:
    """ConfigError for an env config with cameras, where the command takes state observations only."""
    if camera_images(config):
        raise ConfigError("env.overrides.cameras.enabled: camera observations are recorded, trained and evaluated "
                          "by robo_rl.record, robo_rl.train (runner=local) and robo_rl.evaluate; runner=ray, export, "
                          "distill and the robustness suite take state observations only")


def check_env_id(env_id: Any) -> None:
    """ConfigError unless `env_id` is one of robo-rl's registered gymnasium ids."""
    known = sorted(i for i in gym.registry if i.startswith("robo_rl/"))
    if not isinstance(env_id, str) or env_id not in known:
        raise ConfigError(f"env.id must be one of {', '.join(known)}, got {env_id!r}")


def provides_privileged(env_id: str) -> bool:
    """Whether the env `env_id` gives privileged observations (`privileged=True`) for an asymmetric critic: the
    quadrotor envs do (QuadrotorVectorEnv); the arm envs take no such setting."""
    from sim.registration import QUADROTOR_ENV_IDS

    return env_id in QUADROTOR_ENV_IDS


def env_spec(env: Any, env_id: str) -> dict[str, Any]:
    """What a checkpoint records about the env it was trained on (and is checked against on load)."""
    from robo_rl.observations import image_shapes, state_size

    space = env.single_observation_space
    images = image_shapes(space)
    return {
        "id": env_id,
        "observation_size": state_size(space),  # with cameras: the size of the "state" vector
        **({"observation_images": {name: list(shape) for name, shape in images.items()}} if images else {}),
        "action_size": int(env.single_action_space.shape[0]),
        "action_low": env.single_action_space.low.tolist(),
        "action_high": env.single_action_space.high.tolist(),
        "observation_layout": getattr(env, "policy_layout", getattr(env, "layout", None)).to_dict()
        if hasattr(env, "layout") else None,
        "control_hz": getattr(getattr(env, "config", None), "control_hz", None),
    }


def task_env(env_cfg: DictConfig, task: str | None) -> DictConfig:
    """A quadrotor env config flying task `task` (None: its own) on the same vehicles: the task's env id, targets,
    reference, reward and success criterion, with the config's nominal vehicle kept, around which its
    randomization draws (each task's defaults name their own). ConfigError for an unknown task or an env
    that is no quadrotor's."""
    if task is None:
        return env_cfg
    from sim.quadrotor.config import default_config
    from sim.quadrotor.tasks import task_named
    from sim.registration import QUADROTOR_ENV_IDS, make_env_config

    new = task_named(task)
    if env_cfg.id not in QUADROTOR_ENV_IDS:
        raise ConfigError(f"task={task}: {env_cfg.id} is not a quadrotor task")
    vehicle = OmegaConf.select(env_cfg, "overrides.vehicle", default=None) or \
        default_config(QUADROTOR_ENV_IDS[env_cfg.id]).vehicle
    plain = OmegaConf.create(OmegaConf.to_container(env_cfg, resolve=True))
    flown = OmegaConf.merge(plain, {"id": new.env_id, "overrides": {"vehicle": vehicle}})
    try:  # the run's own overrides (its starts, its randomization) may not suit the task: takeoff_land starts on the floor
        make_env_config(flown.id, OmegaConf.to_container(flown.get("overrides") or {}, resolve=True))
    except ConfigError as error:
        raise ConfigError(f"task={task} with this run's env overrides: {error}") from None
    return flown


def check_quadrotor_env(env_id: Any, option: str, who: str) -> None:
    """ConfigError naming `option` unless `env_id` is a quadrotor env, which `who` (the command that needs one)
    flies: it sets the vehicle, its latency and its rotors."""
    from sim.registration import QUADROTOR_ENV_IDS

    if not isinstance(env_id, str) or env_id not in QUADROTOR_ENV_IDS:
        raise ConfigError(f"{option}: {who} flies quadrotors ({', '.join(QUADROTOR_ENV_IDS)}); this run's env is "
                          f"{env_id}")


def check_quadrotor_run(run: Any, option: str, who: str) -> None:
    """ConfigError unless the training run `run` (given as `option`) flies a quadrotor, as `who` needs."""
    check_quadrotor_env(OmegaConf.select(OmegaConf.load(Path(str(run)) / "config.yaml"), "env.id"), f"{option}={run}", who)
