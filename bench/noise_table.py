"""What the size of the observation-noise table costs the native torch step: env steps/s of the hover
vector env with the table `sim.noise.default_span` gives it, next to the old fixed span of 65536 offsets.

Both envs live in one process and are timed in alternating rounds; the speedup is the median of the
per-round ratios (this machine's speed drifts by 15-30% within minutes, so separate runs do not compare).

    python bench/noise_table.py [--envs 4096 8192] [--rounds 31]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from peers import BenchArgumentParser, Positive, Seed
from sim import noise
from sim.quadrotor.env import QuadrotorVectorEnv


def make_env(num_envs: int, span: int | None) -> QuadrotorVectorEnv:
    """The hover vector env on the native step, its noise table given `span` offsets (None: the default)."""
    default = noise.default_span
    if span is not None:
        noise.default_span = lambda n: span
    try:
        env = QuadrotorVectorEnv("hover", num_envs, "torch", device="cpu", compile="native")
    finally:
        noise.default_span = default
    env.reset(seed=0)
    return env


def main() -> None:
    """Time both tables at each size; print medians and the paired speedup."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", action=Positive, default=[4096, 8192])
    parser.add_argument("--rounds", type=int, action=Positive, default=31)
    args = parser.parse_args()
    torch.set_num_threads(2)
    for n in args.envs:
        envs = {"span 65536": make_env(n, 65536), f"span {noise.default_span(n)} (default)": make_env(n, None)}
        actions = [torch.as_tensor(np.random.default_rng(i).uniform(0, 1, (n, 4)), dtype=torch.float32) for i in range(8)]
        steps = max(20, 200_000 // n)
        times: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(args.rounds):
            for name, env in envs.items():
                for i in range(5):
                    env.step(actions[i])
                start = time.perf_counter()
                for i in range(steps):
                    env.step(actions[i % 8])
                times[name].append((time.perf_counter() - start) / steps)
        (old, old_times), (new, new_times) = times.items()
        for name, values in times.items():
            print(f"{n:6d} envs, {name:22s}: {n / statistics.median(values) / 1e6:5.1f}M env steps/s (median of {args.rounds})")
        ratios = [a / b for a, b in zip(old_times, new_times)]
        print(f"{n:6d} envs: {new} vs {old}: {statistics.median(ratios):.3f}x "
              f"(per-round ratios {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
