"""Peer benchmark: Stable-Baselines3 SAC gradient updates/s (run inside bench/.venv-sb3).

A dummy env with the quadrotor's sizes (observation 50, action 4) fills SB3's replay buffer with random
transitions; then `model.train(gradient_steps, batch_size)` is timed, which is exactly SB3's update
(two critics, one actor step per critic step, automatic entropy). Prints JSON.
"""

from __future__ import annotations

import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC, __version__
from stable_baselines3.common.logger import Logger

from peers import BenchArgumentParser, Positive, Seed


class Dummy(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (50,), np.float32)
    action_space = gym.spaces.Box(0.0, 1.0, (4,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(50, np.float32), {}

    def step(self, action):
        return np.random.randn(50).astype(np.float32), float(np.random.randn()), False, False, {}


def main() -> None:
    parser = BenchArgumentParser()
    parser.add_argument("--hidden", type=int, nargs="+", action=Positive, default=[256, 256])
    parser.add_argument("--batch", type=int, action=Positive, default=256)
    parser.add_argument("--seconds", type=float, action=Positive, default=3.0)
    parser.add_argument("--threads", type=int, action=Positive, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = SAC("MlpPolicy", Dummy(), batch_size=args.batch, learning_starts=0, buffer_size=20000,
                policy_kwargs={"net_arch": list(args.hidden)}, device="cpu", verbose=0)
    model.set_logger(Logger(None, []))  # train() logs; no output folder (configure() would make one in /tmp)
    rng = np.random.default_rng(0)
    for _ in range(5000):
        model.replay_buffer.add(rng.standard_normal((1, 50)).astype(np.float32), rng.standard_normal((1, 50)).astype(np.float32),
                                rng.uniform(0, 1, (1, 4)).astype(np.float32), rng.standard_normal(1).astype(np.float32),
                                np.zeros(1), [{}])
    model.train(gradient_steps=20, batch_size=args.batch)  # warm-up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        model.train(gradient_steps=20, batch_size=args.batch)
        steps += 20
    print(json.dumps({"sb3_version": __version__, "updates_per_s": steps / (time.perf_counter() - start)}))


if __name__ == "__main__":
    main()
