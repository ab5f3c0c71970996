"""Demonstration datasets as Minari datasets: write accepted episodes, load them as replay transitions.

A dataset is named by a Minari id (`pick_cube/scripted-v0`) under the Minari root (`MINARI_DATASETS_PATH`,
else ~/.minari/datasets), or given as the path of its directory. Episodes are stored with Minari's
conventions (observations T+1, actions, rewards, terminations, truncations T; `infos["is_success"]`), so
`minari.load_dataset(id)` reads them without robo-rl. Loading checks the env the dataset was recorded on
(the id in Minari's `env_spec` metadata, which `write_dataset` records) and every episode against the env
the run trains on, and raises one `DatasetError` naming the mismatch: arms with the same observation and
action sizes and bounds (the Panda and the SO-ARM100, reach and pick-cube) are different envs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import gymnasium as gym
import numpy as np
import torch

from sim.observation import as_arrays, observation_row

DATA_FORMAT = "hdf5"


class DatasetError(ValueError):
    """A dataset that is missing, unreadable, or does not fit the env."""


class NothingAccepted(DatasetError):
    """`record_episodes` saw `give_up_after` finished episodes in a row that it could not accept."""


def record_episodes(env: Any, act: Callable[[np.ndarray], np.ndarray], episodes: int, seed: int,
                    accept: Callable[[dict[str, Any]], bool] | None = None,
                    progress: bool = False, accepted: list[dict[str, Any]] | None = None,
                    give_up_after: int = 200) -> list[dict[str, Any]]:
    """Run `act` in a batched env (same-step autoreset) until `episodes` episodes are accepted.

    Returns episodes as dicts of arrays (observations (T+1, obs), actions, rewards, terminations,
    truncations, is_success (T,)) and the seed that resets the env to the episode's start: `seed` for the first
    episode of a one-env batch, None for the others (they start where an autoreset left them). `accept` decides
    per finished episode (default: the episode ended in success). Each accepted episode is appended to
    `accepted` as it finishes (so that a caller keeps them when interrupted). NothingAccepted after `give_up_after` unaccepted episodes in a row
    (an expert too noisy to succeed recorded forever).
    """
    from tqdm import tqdm

    accept = accept or (lambda episode: bool(episode["is_success"][-1]))
    n = env.num_envs
    obs, _ = env.reset(seed=seed)
    obs = as_arrays(obs)
    steps: list[list[tuple]] = [[] for _ in range(n)]
    starts = [observation_row(obs, i) for i in range(n)]
    first = [True] * n  # the env's first episode, which reset(seed=seed) started
    accepted = [] if accepted is None else accepted
    rejected_in_a_row = 0
    bar = tqdm(total=episodes, desc="record", unit="episode", disable=not progress)
    while len(accepted) < episodes:
        action = np.asarray(act(obs), dtype=np.float32)
        next_obs, reward, terminated, truncated, info = env.step(action)
        next_obs = as_arrays(next_obs)
        done = np.asarray(terminated) | np.asarray(truncated)
        final = as_arrays(info["final_obs"]) if done.any() else next_obs
        for i in range(n):
            last = observation_row(final if done[i] else next_obs, i)
            steps[i].append((last, action[i], float(reward[i]), bool(terminated[i]), bool(truncated[i]),
                             bool(np.asarray(info["is_success"])[i])))
            if done[i]:
                episode = episode_from_steps(starts[i], steps[i], seed if n == 1 and first[i] else None)
                first[i] = False
                if accept(episode) and len(accepted) < episodes:
                    accepted.append(episode)
                    bar.update(1)
                    rejected_in_a_row = 0
                elif not accept(episode):
                    rejected_in_a_row += 1
                    bar.set_postfix(rejected_in_a_row=rejected_in_a_row, refresh=False)
                    if rejected_in_a_row >= give_up_after:
                        bar.close()
                        raise NothingAccepted(f"{rejected_in_a_row} episodes in a row were not accepted (none ended "
                                              f"in success), {len(accepted)} of {episodes} accepted before")
                steps[i], starts[i] = [], observation_row(next_obs, i)
        obs = next_obs
    bar.close()
    return accepted


def stack_observations(rows: list[Any]) -> Any:
    """Observations (T, ...) from a list of single observations: float32 vectors; with cameras a dict of the
    float32 state and the uint8 images."""
    if isinstance(rows[0], Mapping):
        return {k: np.stack([r[k] for r in rows]).astype(np.float32 if k == "state" else np.uint8) for k in rows[0]}
    return np.stack(rows).astype(np.float32)


def episode_from_steps(first_obs: Any, steps: list[tuple], seed: int | None) -> dict[str, Any]:
    """An episode dict from its first observation and per-step tuples (next_obs, action, reward,
    terminated, truncated, is_success)."""
    observations = stack_observations([first_obs] + [s[0] for s in steps])
    return {"observations": observations, "actions": np.stack([s[1] for s in steps]).astype(np.float32),
            "rewards": np.array([s[2] for s in steps]), "terminations": np.array([s[3] for s in steps]),
            "truncations": np.array([s[4] for s in steps]), "is_success": np.array([s[5] for s in steps]),
            "seed": seed}


def check_dataset_id(dataset_id: str) -> tuple[str | None, str, int]:
    """The namespace, name and version of `dataset_id`; DatasetError unless it is an id Minari can write:
    (namespace/)name-v<version>."""
    from minari.dataset.minari_dataset import parse_dataset_id

    # Minari's pattern makes the version optional, then parse_dataset_id fails on int(None) with a TypeError
    # ("foo", "pick_cube/scripted"); Minari cannot write a dataset without one either
    try:  # Minari writes by id only (a folder path is for reading)
        return parse_dataset_id(dataset_id)
    except (ValueError, TypeError):
        raise DatasetError(f"dataset={dataset_id} must be a Minari id, (namespace/)name-v<version> such as "
                           "pick_cube/scripted-v0 (letters, digits, - and _; a namespace of at least two), written "
                           "under MINARI_DATASETS_PATH or ~/.minari/datasets") from None


def free_dataset_id(dataset_id: str) -> str:
    """`dataset_id` itself if no dataset is there yet, else the same id with the lowest higher version that is free."""
    from minari.dataset.minari_dataset import gen_dataset_id

    namespace, name, version = check_dataset_id(dataset_id)
    while dataset_path(dataset_id).exists():
        version += 1
        dataset_id = gen_dataset_id(namespace, name, version)
    return dataset_id


def check_new_dataset(dataset_id: str) -> Path:
    """The directory a new dataset `dataset_id` goes to; DatasetError if the id is not one Minari can write, a
    dataset is there already (never overwritten: the message names the next free version), or its folder cannot
    be made (checked before a recording, not after it)."""
    check_dataset_id(dataset_id)
    path = dataset_path(dataset_id)
    if path.exists():
        raise DatasetError(f"dataset {dataset_id!r} exists at {path}; choose a new version "
                           f"(e.g. dataset={free_dataset_id(dataset_id)})")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise DatasetError(f"dataset={dataset_id} cannot be written at {path}: {existing} is "
                           f"{'not a folder' if not existing.is_dir() else 'not writable'} (the root is "
                           f"{_root_source()}); give another dataset= or MINARI_DATASETS_PATH")
    return path


def datasets_root() -> Path:
    """The Minari root, absolute: MINARI_DATASETS_PATH (DatasetError if it is set but empty), else
    ~/.minari/datasets. (Minari takes a relative root relative to each file it writes, and fails half-way.)"""
    root = os.environ.get("MINARI_DATASETS_PATH")
    if root is not None and not root.strip():
        raise DatasetError("MINARI_DATASETS_PATH is set but empty; allowed: a folder for the datasets, or unset for "
                           "~/.minari/datasets")
    return Path(os.path.abspath(root if root is not None else Path.home() / ".minari" / "datasets"))


def _root_source() -> str:
    root = os.environ.get("MINARI_DATASETS_PATH")
    return f"MINARI_DATASETS_PATH={root}" if root is not None else "~/.minari/datasets"


@contextlib.contextmanager
def _interrupts_deferred(message: str) -> Iterator[None]:
    """Ctrl-C (SIGINT) prints `message` once and is otherwise ignored within the block: the episodes an earlier
    Ctrl-C promised to keep are being written. Only the main thread can set a signal's handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    told: list[bool] = []

    def tell(signum: int, frame: Any) -> None:
        if not told:
            print(message, flush=True)
            told.append(True)

    previous = signal.signal(signal.SIGINT, tell)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _minari_root(root: Path) -> Iterator[None]:
    """Minari writes under MINARI_DATASETS_PATH as it is at each call: point it at `root` within the block."""
    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous


def write_dataset(dataset_id: str, episodes: Iterable[Mapping[str, Any]], env_id: str,
                  observation_space: gym.Space, action_space: gym.Space, author: str = "robo-rl",
                  author_email: str = "robo-rl@users.noreply.github.com", algorithm_name: str = "scripted expert",
                  description: str = "", env_config: Mapping[str, Any] | None = None) -> Path:
    """Write `episodes` (as `record_episodes` returns them) as Minari dataset `dataset_id`; returns its directory.
    `env_config`: the env's config overrides the episodes were recorded with, kept in the dataset's env spec (its
    `config` keyword: Minari's `recover_environment` makes that env), and checked when a run loads the dataset.

    Refuses to overwrite an existing dataset: bump the version (`-v1`) instead. The dataset appears whole or not at
    all (written in a hidden folder of the root, which Minari does not list, then moved into place), and Ctrl-C
    does not stop the write.
    """
    import minari
    from minari.data_collector import EpisodeBuffer

    path = check_new_dataset(dataset_id)
    buffers = [
        EpisodeBuffer(id=index, seed=episode.get("seed"), observations=as_arrays(episode["observations"]),
                      actions=np.asarray(episode["actions"]), rewards=list(map(float, episode["rewards"])),
                      terminations=list(map(bool, episode["terminations"])),
                      truncations=list(map(bool, episode["truncations"])),
                      infos={"is_success": np.asarray(episode["is_success"], dtype=bool)})
        for index, episode in enumerate(episodes)
    ]
    if not buffers:
        raise DatasetError("no episodes to write")
    from robo_rl.train import git_commit

    # the code that recorded it (Minari warned on every recording that none was linked)
    commit = git_commit()
    env: Any = env_id
    if env_config is not None:
        registered = gym.spec(env_id)
        env = dataclasses.replace(registered, kwargs={**registered.kwargs, "config": dict(env_config)})
    root = datasets_root()
    with _interrupts_deferred(f"writing the {len(buffers)} episodes to {path}: they are kept (Ctrl-C waits)"):
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".robo_rl-writing-", dir=root))
        try:
            with _minari_root(staging):
                minari.create_dataset_from_buffers(
                    dataset_id, buffers, env=env, eval_env=env, observation_space=observation_space,
                    action_space=action_space, algorithm_name=algorithm_name, author=author,
                    author_email=author_email,
                    code_permalink=f"robo-rl@{commit}" if commit else "robo-rl (installed without its git history)",
                    description=description or f"{len(buffers)} episodes of {env_id}", data_format=DATA_FORMAT)
            for made in staging.rglob("namespace_metadata.json"):  # a namespace Minari made for it
                kept = root / made.relative_to(staging)
                if not kept.exists():
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(made, kept)
            path.parent.mkdir(parents=True, exist_ok=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            os.rename(staging / dataset_id, path)  # fails where another command wrote this id meanwhile
        except OSError:
            raise DatasetError(f"dataset {dataset_id!r} appeared at {path} while these episodes were written; they "
                               f"are kept at {staging / dataset_id}") from None
        shutil.rmtree(staging, ignore_errors=True)
    return path


def dataset_path(dataset: str | os.PathLike) -> Path:
    """The directory of a dataset given by Minari id or by path."""
    candidate = Path(dataset)
    if candidate.is_dir() or candidate.is_absolute() or str(dataset).startswith("."):
        return candidate
    # the root as minari.storage.datasets_root_dir.get_dataset_path finds it; that function also creates it, which
    # a look before recording (record checks that the dataset is new) or a refused load must not
    return datasets_root() / str(dataset)


def require_dataset(dataset: str | os.PathLike, option: str | None = None) -> Path:
    """The folder of the dataset `dataset` names; DatasetError (naming `option` where given) if none is there."""
    path = dataset_path(dataset)
    if not (path / "data").is_dir():
        given = f"{option}={dataset}" if option else repr(str(dataset))
        raise DatasetError(f"no Minari dataset at {path} (from {given}): record one with "
                           "`python -m robo_rl.record` or give its directory")
    return path


def recorded_env_id(data: Any) -> str | None:
    """The id of the env a Minari dataset was recorded on (its `env_spec` metadata), or None if it names none."""
    env_spec = _env_spec(data)
    if isinstance(env_spec, dict):
        return env_spec.get("id") if isinstance(env_spec.get("id"), str) else None
    return getattr(env_spec, "id", None)


def recorded_env_config(data: Any) -> dict[str, Any] | None:
    """The env config overrides a Minari dataset was recorded with (its env spec's `config` keyword, which
    `write_dataset` records), or None where it records none."""
    env_spec = _env_spec(data)
    kwargs = env_spec.get("kwargs") if isinstance(env_spec, dict) else getattr(env_spec, "kwargs", None)
    config = kwargs.get("config") if isinstance(kwargs, dict) else None
    return config if isinstance(config, dict) else None


def _env_spec(data: Any) -> Any:
    env_spec = data.storage.metadata.get("env_spec")
    if isinstance(env_spec, str):
        try:
            return json.loads(env_spec)
        except ValueError:
            return None
    return env_spec


# Settings of an arm env that a recorded transition does not depend on: where episodes start, when they are cut
# off, and domain randomization (demos recorded without it feed a run with it, as README section 6 does)
START_AND_RANDOMIZATION = ("cube_x", "cube_y", "reach_box", "episode_seconds", "randomization.",
                           "cameras.randomization.")


def check_recorded_config(path: Path, env_id: str, recorded: Mapping[str, Any] | None,
                          run: Mapping[str, Any] | None) -> None:
    """DatasetError where a dataset's episodes were recorded on an arm env config whose transitions mean something
    else than the run's (another reward, control rate, action scale, gains or cameras); a warning where the dataset
    records no config to check."""
    from sim.registration import ARM_ENV_IDS

    if env_id not in ARM_ENV_IDS or run is None:
        return
    if recorded is None:
        warnings.warn(f"dataset at {path} records no env config (recorded before robo-rl kept it): its reward and "
                      "control settings cannot be checked against the run's", stacklevel=3)
        return
    from sim.arm.env import make_arm_config
    from sim.errors import ConfigError

    from robo_rl.checkpoint import flat_config

    kwargs = gym.spec(env_id).kwargs
    try:
        theirs = make_arm_config(kwargs["task"], kwargs.get("robot", "panda_like"), config=dict(recorded))
    except (ConfigError, TypeError, ValueError) as error:
        raise DatasetError(f"dataset at {path} records an env config {env_id} does not take: {error}") from None
    mine = make_arm_config(kwargs["task"], kwargs.get("robot", "panda_like"), config=dict(run))
    flat = [flat_config(json.loads(json.dumps(dataclasses.asdict(c), default=str))) for c in (theirs, mine)]
    differ = sorted(key for key in flat[0].keys() | flat[1].keys()
                    if flat[0].get(key) != flat[1].get(key) and not key.startswith(START_AND_RANDOMIZATION))
    if differ:
        raise DatasetError(f"dataset at {path} was recorded with env.overrides.{differ[0]}={flat[0].get(differ[0])!r}, "
                           f"the run has {flat[1].get(differ[0])!r}: its transitions mean something else here; record "
                           "demos with the run's env overrides")


def read_episodes(dataset: str | os.PathLike) -> tuple[Path, list[Any], str | None, dict[str, Any] | None]:
    """A dataset's folder, its episodes (Minari's EpisodeData), the id of the env it was recorded on and that env's
    config overrides; DatasetError if it is missing, unreadable, inconsistent or empty."""
    import minari

    path = require_dataset(dataset)
    from minari.dataset.minari_storage import MinariStorage

    try:
        storage = MinariStorage.read(path / "data")
        total, stored = storage.total_episodes, _stored_episodes(path / "data", storage.metadata.get("data_format"))
    except Exception as error:  # h5py/arrow raise many types for a damaged file
        raise DatasetError(f"cannot read the dataset at {path}: {_reason(error)}") from error
    # Minari takes metadata.json's total_episodes as it is (np.arange of it: 3e9 was a 24 GB array and a hang)
    if type(total) is not int or total != stored:
        raise DatasetError(f"dataset at {path}: metadata.json gives total_episodes {total!r}, the data holds {stored} "
                           "episodes; allowed: that count")
    try:
        data = minari.MinariDataset(storage)
        episodes = list(data.iterate_episodes())
        recorded_on, recorded_config = recorded_env_id(data), recorded_env_config(data)
    except Exception as error:  # h5py/arrow raise many types for a damaged file
        raise DatasetError(f"cannot read the dataset at {path}: {_reason(error)}") from error
    if not episodes:
        raise DatasetError(f"dataset at {path} has no episodes")
    return path, episodes, recorded_on, recorded_config


def _reason(error: Exception) -> str:
    """What went wrong, also where the library's message is empty (a bare assert) or only a key."""
    text = str(error)
    return f"{type(error).__name__} {text}".strip() if not text or isinstance(error, KeyError) else text


def load_labelled_frames(dataset: str | os.PathLike) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The camera frames of a dataset recorded with cameras, each labelled by the `is_success` recorded for the
    step that led to it: frames {camera: (N, H, W, 3) uint8}, labels (N,) bool, episode index (N,)."""
    path, episodes, _, _ = read_episodes(dataset)
    frames: dict[str, list[np.ndarray]] = {}
    labels, index = [], []
    for number, episode in enumerate(episodes):
        where = f"dataset at {path}: episode {episode.id}"
        observations = episode.observations
        cameras = sorted(k for k in observations if k != "state") if isinstance(observations, Mapping) else []
        if not cameras:
            raise DatasetError(f"{where} has no camera images; record the dataset with the env's cameras on "
                               "(e.g. env=so_arm100_pick_cube_pixels)")
        success = np.asarray((episode.infos or {}).get("is_success", []))
        if success.dtype.kind not in "bi" or success.shape != (len(episode.actions),):
            raise DatasetError(f"{where} has no is_success label per step (infos.is_success)")
        if number and sorted(frames) != cameras:
            raise DatasetError(f"{where} has cameras {cameras}, the first episode {sorted(frames)}")
        for name in cameras:
            frames.setdefault(name, []).append(np.asarray(observations[name])[1:])  # the frame after each step
        labels.append(success.astype(bool))
        index.append(np.full(len(success), number))
    if len(episodes) < 2:
        raise DatasetError(f"dataset at {path} has {len(episodes)} episode; a classifier needs at least 2 "
                           "(training and held-out frames come from different episodes)")
    all_labels = np.concatenate(labels)
    if all_labels.all() or not all_labels.any():
        raise DatasetError(f"dataset at {path} has frames of one class only ({int(all_labels.sum())} successes "
                           f"of {len(all_labels)}); a classifier needs both")
    return {k: np.concatenate(v) for k, v in frames.items()}, all_labels, np.concatenate(index)


def load_transitions(dataset: str | os.PathLike, spec: Mapping[str, Any],
                     env_config: Mapping[str, Any] | None = None) -> dict[str, torch.Tensor]:
    """Every transition of a dataset as tensors (obs, action, reward, next_obs, terminated), checked against
    the env `spec` (robo_rl.envs.env_spec: observation and action sizes and bounds) and, given the run's env config
    overrides `env_config`, against the config the dataset was recorded with (`check_recorded_config`)."""
    path, episodes, recorded_on, recorded_config = read_episodes(dataset)
    if recorded_on != spec["id"]:
        raise DatasetError(f"dataset at {path} was recorded on {recorded_on or 'an env it does not name'}; the run "
                           f"trains {spec['id']} and takes demonstrations recorded on it (python -m robo_rl.record "
                           f"env=<that env>)")
    check_recorded_config(path, spec["id"], recorded_config, env_config)
    obs_size, act_size = int(spec["observation_size"]), int(spec["action_size"])
    images = {name: tuple(shape) for name, shape in (spec.get("observation_images") or {}).items()}
    low, high = np.asarray(spec["action_low"]), np.asarray(spec["action_high"])
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "action", "reward", "next_obs", "terminated")}
    for episode in episodes:
        where = f"dataset at {path}: episode {episode.id}"
        observations = episode.observations
        if images and not isinstance(observations, Mapping):
            raise DatasetError(f"{where} has no camera images; the env {spec['id']} observes "
                               f"{', '.join(images)} besides its state")
        if isinstance(observations, Mapping) and set(observations) != {"state", *images}:
            raise DatasetError(f"{where} has observations {sorted(observations)}; the env {spec['id']} has "
                               f"{sorted(['state', *images])}")
        obs = _numeric(observations["state"] if images else observations, "observations", where)
        actions = _numeric(episode.actions, "actions", where)
        if obs.ndim != 2 or obs.shape[1] != obs_size:
            raise DatasetError(f"{where} has observations of shape {obs.shape}, "
                               f"the env {spec['id']} has {obs_size} per step")
        frames = {}
        for name, shape in images.items():
            frames[name] = np.asarray(observations[name])
            if frames[name].dtype != np.uint8 or frames[name].shape != (len(obs), *shape):
                raise DatasetError(f"{where} has {name} images of shape {frames[name].shape} and dtype "
                                   f"{frames[name].dtype}; the env {spec['id']} has ({len(obs)}, "
                                   f"{', '.join(map(str, shape))}) uint8")
        if actions.ndim != 2 or actions.shape[1] != act_size or len(actions) != len(obs) - 1:
            raise DatasetError(f"{where} has actions of shape {actions.shape}; "
                               f"expected ({len(obs) - 1}, {act_size}) for {spec['id']}")
        steps = len(actions)
        rewards = _numeric(episode.rewards, "rewards", where)
        terminations = _numeric(episode.terminations, "terminations", where)
        for name, array in (("rewards", rewards), ("terminations", terminations)):
            if array.shape != (steps,):  # one per step: a 2-D or short array would misalign the transitions
                raise DatasetError(f"{where} has {name} of shape {array.shape}; expected ({steps},), one per action")
        for name, array in (("observations", obs), ("actions", actions), ("rewards", rewards)):
            if not np.isfinite(array).all():  # in float32, the replay buffer's type: 1e39 is inf there
                raise DatasetError(f"{where} has NaN or Inf {name} (in float32); allowed: finite numbers "
                                   f"within +-{np.finfo(np.float32).max:.3g}")
        if (actions < low - 1e-6).any() or (actions > high + 1e-6).any():
            raise DatasetError(f"{where} has actions outside [{low}, {high}]")
        if not np.isin(terminations, (0.0, 1.0)).all():  # a flag: anything else would scale the bootstrap
            raise DatasetError(f"{where} has terminations other than true/false (0/1)")
        rows["obs"].append({"state": obs[:-1], **{k: v[:-1] for k, v in frames.items()}} if images else obs[:-1])
        rows["next_obs"].append({"state": obs[1:], **{k: v[1:] for k, v in frames.items()}} if images else obs[1:])
        rows["action"].append(actions)
        rows["reward"].append(rewards)
        rows["terminated"].append(terminations)

    def joined(parts: list[Any]) -> Any:
        if isinstance(parts[0], dict):
            return {k: torch.as_tensor(np.concatenate([p[k] for p in parts])) for k in parts[0]}
        return torch.as_tensor(np.concatenate(parts), dtype=torch.float32)

    return {k: joined(v) for k, v in rows.items()}


def _stored_episodes(data_dir: Path, data_format: Any) -> int:
    """How many episodes a Minari data folder holds: groups `episode_<i>` of main_data.hdf5 (hdf5), or folders
    `<i>` (arrow), as Minari's storages write them."""
    if data_format == "hdf5":
        import h5py

        with h5py.File(data_dir / "main_data.hdf5", "r") as file:
            return sum(1 for key in file if key.startswith("episode_"))
    return sum(1 for item in data_dir.iterdir() if item.is_dir() and item.name.isdigit())


def _numeric(values: Any, name: str, where: str) -> np.ndarray:
    """An episode's array `name` as float32; DatasetError naming it if it is not numbers (bool, int or float).

    Values beyond float32's range become inf here (no warning): the finiteness checks after this refuse them.
    """
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":  # bytes, strings or objects: np.isfinite and float casts fail on them
        raise DatasetError(f"{where} has {name} of dtype {array.dtype}; allowed: numbers (bool, int or float)")
    with np.errstate(over="ignore"):
        return array.astype(np.float32)
