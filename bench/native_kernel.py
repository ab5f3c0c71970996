"""The native quadrotor step's kernel alone (no Python around it), built for different instruction sets.

Each build is the kernel of the hover task, compiled with `-march=<target>` instead of `-march=native`
(`native` keeps the default: 16 lanes with AVX-512, else 8 with AVX2; `x86-64-v3` is AVX2 without
AVX-512: 8 lanes). All builds live in one process and are timed in alternating rounds, each calling
the kernel on the same envs, outputs and noise again and again (uniform random commands, so episodes
keep ending and restarting); the speedup is the median of the per-round ratios against the first build.

    python bench/native_kernel.py [--envs 2048] [--threads 1] [--march native x86-64-v3] [--rounds 25]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from sim.quadrotor import native_step
from sim.quadrotor.env import QuadrotorVectorEnv


def kernel_call(num_envs: int, march: str) -> tuple[object, object]:
    """A warmed-up hover env on a kernel built for `march`, and a call of that kernel alone (returned with
    the env, its outputs and the action it was last given: the arrays the call's pointers refer to)."""
    default = native_step.FLAGS
    native_step.FLAGS = tuple(flag.replace("native", march) for flag in default)
    try:
        env = QuadrotorVectorEnv("hover", num_envs, "torch", device="cpu", compile="native")
    finally:
        native_step.FLAGS = default
    env.reset(seed=0)
    actions = [torch.as_tensor(np.random.default_rng(i).uniform(0, 1, (num_envs, 4)), dtype=torch.float32)
               for i in range(8)]
    for i in range(300):
        env.step(actions[i % 8])
    step, batch = env.batch._native, env.batch
    outputs = step(actions[0], *batch._noise.step_windows(batch.rng))  # the arrays the kernel's pointers keep
    function, pointers, strides = step._function, step._pointers, step._strides
    return (env, outputs, actions[0]), lambda threads: function(pointers, strides, num_envs, threads)


def main() -> None:
    """Time each build; print env steps/s and the paired speedups."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--march", nargs="+", default=["native", "x86-64-v3"])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    torch.set_num_threads(2)
    builds = {march: kernel_call(args.envs, march) for march in args.march}
    calls = max(20, 100_000 // args.envs)
    times: dict[str, list[float]] = {march: [] for march in builds}
    for _ in range(args.rounds):
        for march, (_, call) in builds.items():
            start = time.perf_counter()
            for _ in range(calls):
                call(args.threads)
            times[march].append((time.perf_counter() - start) / calls)
    first = args.march[0]
    for march, values in times.items():
        ratios = [a / b for a, b in zip(times[first], values)]
        print(f"-march={march:12s} {args.envs} envs, {args.threads} thread(s): "
              f"{args.envs / statistics.median(values) / 1e6:5.1f}M env steps/s, "
              f"{statistics.median(ratios):.3f}x -march={first} (per-round {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
