"""Record demonstrations as a Minari dataset: `python -m robo_rl.record env=pick_cube episodes=20`.

device=scripted: the scripted expert drives a batch of envs; every episode that ends in success is kept,
until `episodes` are accepted. device=keyboard|gamepad|spacemouse: a person drives one env from the
terminal's keyboard, a gamepad (/dev/input/js*) or a 3Dconnexion SpaceMouse (/dev/hidraw*) (robo_rl.teleop;
`device_path=` picks the device file, `teleop.<device>.*` its options) in real time and accepts or rejects
each episode; quitting early (its quit key or Ctrl-C) keeps what was accepted. The dataset lands under the
Minari root (MINARI_DATASETS_PATH or ~/.minari/datasets) as `dataset` (default `<env>/scripted-v0`), loadable
by `minari.load_dataset` and by `python -m robo_rl.train demos=<dataset>`. A `dataset` that is no Minari id or
that exists already is refused before the first episode; one that appears while recording (another command wrote
it) gets the accepted episodes under its next free version instead, named on the way out.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np
from omegaconf import DictConfig, OmegaConf

from robo_rl.cli import hydra_command
from robo_rl.datasets import (NothingAccepted, check_new_dataset, episode_from_steps, free_dataset_id,
                              record_episodes, write_dataset)
from robo_rl.envs import make_vector_env
from robo_rl.teleop import TELEOP_DEVICES, Teleop, make_teleop
from sim.errors import ConfigError
from sim.observation import as_arrays, observation_row


def record(cfg: DictConfig) -> str:
    """Record `cfg.episodes` accepted episodes and write them as Minari dataset `cfg.dataset`; returns its path."""
    import torch

    if cfg.device != "scripted" and cfg.device not in TELEOP_DEVICES:
        raise ValueError(f"unknown demonstration device {cfg.device!r}; "
                         f"available: scripted, {', '.join(TELEOP_DEVICES)}")
    check_new_dataset(str(cfg.dataset))  # before the device and an hour of teleoperation, not after
    if cfg.device == "scripted" and cfg.get("device_path"):  # it was ignored: a person meant to drive
        raise ConfigError(f"device_path={cfg.device_path} is for a teleoperation device; device=scripted records the "
                          f"scripted expert (give device={' or '.join(TELEOP_DEVICES)} to drive)")
    if cfg.device != "scripted":  # before the env: a missing device fails at once
        section = cfg.get("teleop", {}).get(cfg.device)
        options: dict[str, Any] = OmegaConf.to_container(section, resolve=True) if section is not None else {}
        if cfg.get("device_path"):
            options["path"] = str(cfg.device_path)
        teleop = make_teleop(cfg.device, **options)
    env = make_vector_env(cfg.env, int(cfg.num_envs) if cfg.device == "scripted" else 1, torch.device("cpu"),
                          cameras=True)
    failure: Exception | None = None
    if cfg.device != "scripted":
        try:
            episodes = record_teleop(env, teleop, int(cfg.episodes), int(cfg.seed), bool(cfg.realtime))
        except RecordingStopped as stopped:  # an error mid-session: the accepted episodes are still written
            episodes, failure = stopped.accepted, stopped.error
        if not episodes:
            if failure is not None:
                raise failure
            print("no episode accepted: nothing written")
            return ""
    else:
        if not hasattr(env, "expert_actions"):
            raise ValueError(f"{cfg.env.id} has no scripted expert to record demonstrations from")
        rng = np.random.default_rng(int(cfg.seed))
        episodes = []
        with _ctrl_c_interrupts():
            try:
                record_episodes(env, lambda obs: env.expert_actions(obs, float(cfg.expert_noise), rng),
                                int(cfg.episodes), seed=int(cfg.seed), progress=True, accepted=episodes)
            except KeyboardInterrupt:  # as with a person's episodes: Ctrl-C keeps the accepted ones
                print(f"interrupted: keeping the {len(episodes)} accepted episode(s)")
            except NothingAccepted as error:
                raise ConfigError(f"expert_noise={cfg.expert_noise}: {error}; the expert does not succeed with this "
                                  "much noise, give less") from None
        if not episodes:
            print("no episode accepted: nothing written")
            return ""
    algorithm = "scripted expert" if cfg.device == "scripted" else f"{cfg.device} teleoperation"
    dataset = free_dataset_id(str(cfg.dataset))
    if dataset != str(cfg.dataset):  # written by another command meanwhile: the episodes are a person's work, keep them
        print(f"dataset {cfg.dataset} appeared while recording; writing the episodes as {dataset} instead")
    overrides = OmegaConf.to_container(cfg.env.get("overrides") or OmegaConf.create({}), resolve=True)
    path = write_dataset(dataset, episodes, cfg.env.id, env.single_observation_space,
                         env.single_action_space, algorithm_name=algorithm, env_config=overrides)
    steps = sum(len(e["actions"]) for e in episodes)
    print(f"wrote {len(episodes)} episodes ({steps} transitions) to {path}")
    if failure is not None:  # after the episodes are safe: the session still failed
        raise failure
    return str(path)


class RecordingStopped(Exception):
    """A teleoperation session ended by an error (`error`) after `accepted` episodes were accepted."""

    def __init__(self, error: Exception, accepted: list[dict[str, Any]]):
        super().__init__(str(error))
        self.error, self.accepted = error, accepted


def record_teleop(env: Any, teleop: Teleop, episodes: int, seed: int, realtime: bool = True,
                  say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Episodes driven by a person through `teleop` (any robo_rl.teleop device) in a one-env batch, each
    accepted or rejected by the operator; stops at `episodes` accepted or when the operator quits, Ctrl-C
    included (the episode under way, not yet accepted, is dropped). An error part-way (a device that fails, an
    action the env refuses) raises RecordingStopped holding it and the episodes accepted until then."""
    accepted: list[dict[str, Any]] = []
    say(teleop.help)
    with _ctrl_c_interrupts():
        try:
            _drive(env, teleop, episodes, seed, realtime, say, accepted)
        except KeyboardInterrupt:  # the accepted episodes are a person's work: Ctrl-C keeps them, as the quit key does
            say(f"interrupted: keeping the {len(accepted)} accepted episode(s)")
        except Exception as error:  # noqa: BLE001 (whatever it is, the person's accepted episodes are kept)
            if accepted:
                say(f"stopped by an error: keeping the {len(accepted)} accepted episode(s)")
            raise RecordingStopped(error, accepted) from error
    return accepted


@contextlib.contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt within the block, whatever the process had made of it (a library's
    worker setup may ignore it: the person's Ctrl-C then did nothing and the session ran on), restored after.
    Only the main thread can set a signal's handler; elsewhere the process's own stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _drive(env: Any, teleop: Teleop, episodes: int, seed: int, realtime: bool, say: Callable[[str], None],
           accepted: list[dict[str, Any]]) -> None:
    """record_teleop's loop, appending each accepted episode to `accepted` as soon as it is accepted."""
    with teleop:
        attempt = 0
        while len(accepted) < episodes and not teleop.quit_requested:
            obs, _ = env.reset(seed=seed + attempt)
            attempt += 1
            teleop.start_episode()
            say(f"episode {attempt} ({len(accepted)}/{episodes} accepted): go")
            first, steps, tick = observation_row(as_arrays(obs), 0), [], time.monotonic()
            while True:
                action = teleop.action()
                next_obs, reward, terminated, truncated, info = env.step(action[None])
                stop = bool(terminated[0] or truncated[0]) or teleop.end_requested or teleop.quit_requested
                last = observation_row(as_arrays(info["final_obs"] if truncated[0] else next_obs), 0)
                steps.append((last, action, float(reward[0]), bool(terminated[0]),
                              bool(stop and not terminated[0]), bool(info["is_success"][0])))
                if stop:
                    break
                if realtime:  # a person needs the real control rate to react
                    tick += 1.0 / env.config.control_hz
                    time.sleep(max(0.0, tick - time.monotonic()))
            if teleop.quit_requested:
                break
            say(f"episode {attempt}: {len(steps)} steps, success: {steps[-1][5]}")
            if teleop.ask_accept(say):
                accepted.append(episode_from_steps(first, steps, seed + attempt - 1))


@hydra_command(config_path="../configs", config_name="record")
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    record(cfg)


if __name__ == "__main__":
    main()
