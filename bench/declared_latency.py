"""What telling the policy its action latency buys: robo-rl's commands with a one-hot of each env's latency.

A deployment knows its own pipeline's delay and could declare it to the policy; each specialist knows its
latency from training at that latency alone. This script runs `robo_rl.train`, `robo_rl.distill` or
`robo_rl.robustness` with every quadrotor env's observation extended by a one-hot of the env's current
action latency (0-3 control steps; the last one where an episode ended for `final_obs`), so that the teachers,
the student and the suite all see it. `DECLARED_LATENCY_OFFSET=k` declares a latency k steps off the true one
(clamped to 0-3), to measure a wrong declaration. Nothing else changes; runs made through it load only
through it (their observation is 4 longer). bench/RESULTS.md, "session 18", has the 3-seed comparison.

    python bench/declared_latency.py train +experiment=hover_family seed=0 torch_threads=1 hydra.run.dir=<T>/family
    python bench/declared_latency.py distill teacher=<T>/family ... hydra.run.dir=<student>
    DECLARED_LATENCY_OFFSET=-1 python bench/declared_latency.py robustness run=<student> held_out.start_set=moderate
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import robo_rl.envs as envs  # noqa: E402

LATENCIES = 4  # the one-hot's length: the family's 0-3 control steps
COMMANDS = ("train", "distill", "robustness")


def one_hot(latency: Any, like: Any) -> Any:
    """A one-hot (n, LATENCIES) of `latency` (clamped to 0-3), as the array type and dtype of `like`."""
    if isinstance(like, torch.Tensor):
        steps = torch.as_tensor(latency, device=like.device).long().clamp(0, LATENCIES - 1)
        return torch.nn.functional.one_hot(steps, LATENCIES).to(like.dtype)
    steps = np.clip(np.asarray(latency).astype(np.int64), 0, LATENCIES - 1)
    return np.eye(LATENCIES, dtype=like.dtype)[steps]


def appended(obs: Any, extra: Any) -> Any:
    """`obs` with the columns `extra` after its own."""
    return torch.cat([obs, extra], 1) if isinstance(obs, torch.Tensor) else np.concatenate([obs, extra], 1)


def widened(space: gym.spaces.Box) -> gym.spaces.Box:
    """`space` with LATENCIES more entries in [0, 1] on its last axis."""
    shape = space.low.shape[:-1] + (LATENCIES,)
    return gym.spaces.Box(np.concatenate([space.low, np.zeros(shape, space.low.dtype)], -1),
                          np.concatenate([space.high, np.ones(shape, space.high.dtype)], -1), dtype=space.dtype)


class DeclaredLatency:
    """A quadrotor vector env whose observations end with a one-hot of each env's declared latency."""

    def __init__(self, env: Any, offset: int):
        self.env, self.offset = env, offset
        self.single_observation_space = widened(env.single_observation_space)
        self.observation_space = widened(env.observation_space)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def declared(self) -> Any:
        """Each env's current latency [control steps] plus the offset."""
        latency = self.env.unwrapped.batch.latency
        latency = latency.clone() if isinstance(latency, torch.Tensor) else np.array(latency)
        return latency + self.offset

    def reset(self, *args: Any, **kwargs: Any) -> tuple[Any, dict]:
        """The env's reset, the observations extended."""
        obs, info = self.env.reset(*args, **kwargs)
        return appended(obs, one_hot(self.declared(), obs)), info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """The env's step, the observations extended (a finished episode's last one by its own latency)."""
        before = self.declared()
        obs, reward, terminated, truncated, info = self.env.step(actions)
        obs = appended(obs, one_hot(self.declared(), obs))
        if "final_obs" in info:
            info["final_obs"] = appended(info["final_obs"], one_hot(before, info["final_obs"]))
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def main() -> None:
    """Patch robo_rl.envs.make_vector_env, then run the command with the remaining (Hydra) arguments."""
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python bench/declared_latency.py {{{','.join(COMMANDS)}}} <hydra arguments>")
    try:
        offset = int(os.environ.get("DECLARED_LATENCY_OFFSET", "0"))
    except ValueError:
        sys.exit(f"DECLARED_LATENCY_OFFSET={os.environ['DECLARED_LATENCY_OFFSET']!r}: must be an integer")
    make = envs.make_vector_env
    envs.make_vector_env = lambda *args, **kwargs: DeclaredLatency(make(*args, **kwargs), offset)
    command = sys.argv.pop(1)
    sys.argv[0] = f"robo_rl.{command}"
    sys.argv.insert(1, f"--config-path={ROOT / 'configs'}")  # Hydra resolves the modules' own path from __main__
    importlib.import_module(f"robo_rl.{command}").main()  # imported after the patch: it binds the patched function


if __name__ == "__main__":
    main()
