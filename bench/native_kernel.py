"""The native quadrotor step's kernel alone (no Python around it), built for different instruction sets.

Each build is the kernel of the hover task, compiled with `-march=<target>` instead of `-march=native`
(`native` keeps the default: 16 lanes with AVX-512, else 8 with AVX2; `x86-64-v3` is AVX2 without
AVX-512: 8 lanes). All builds live in one process and are timed in alternating rounds, each calling
the kernel on the same envs, outputs and noise again and again (uniform random commands, so episodes
keep ending and restarting); the speedup is the median of the per-round ratios against the first build.

    python bench/native_kernel.py [--envs 2048] [--threads 1] [--march native x86-64-v3] [--rounds 25]

With `--sources A.cpp B.cpp ...` it times kernel sources instead (each built for -march=native), e.g. an
earlier commit's against the working tree:

    git show ad81dce:sim/quadrotor/native_step.cpp > /tmp/before.cpp
    python bench/native_kernel.py --sources /tmp/before.cpp sim/quadrotor/native_step.cpp
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from peers import BenchArgumentParser, Positive, Seed
from sim.quadrotor import native_step
from sim.quadrotor.env import QuadrotorVectorEnv


def kernel_call(num_envs: int, march: str, source: Path | None = None) -> tuple[object, object]:
    """A warmed-up hover env on a kernel built for `march` (from `source`, default the package's), and a
    call of that kernel alone (returned with the env, its outputs and the action it was last given: the
    arrays the call's pointers refer to)."""
    default, default_source = native_step.FLAGS, native_step.SOURCE
    native_step.FLAGS = tuple(flag.replace("native", march) for flag in default)
    native_step.SOURCE = source or default_source
    try:
        env = QuadrotorVectorEnv("hover", num_envs, "torch", device="cpu", compile="native")
    finally:
        native_step.FLAGS, native_step.SOURCE = default, default_source
    env.reset(seed=0)
    actions = [torch.as_tensor(np.random.default_rng(i).uniform(0, 1, (num_envs, 4)), dtype=torch.float32)
               for i in range(8)]
    for i in range(300):
        env.step(actions[i % 8])
    step, batch = env.batch.native, env.batch
    outputs = step(actions[0], batch.noise.step_offset(batch.rng))  # the arrays the kernel's pointers keep
    function, pointers, strides = step._function, step._pointers, step._strides
    return (env, outputs, actions[0]), lambda threads: function(pointers, strides, num_envs, threads)


def main() -> None:
    """Time each build; print env steps/s and the paired speedups against the first."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, action=Positive, default=2048)
    parser.add_argument("--threads", type=int, action=Positive, default=1)
    parser.add_argument("--march", nargs="+", default=["native", "x86-64-v3"])
    parser.add_argument("--sources", nargs="+", type=Path, help="kernel sources to time (built for -march=native)")
    parser.add_argument("--rounds", type=int, action=Positive, default=25)
    args = parser.parse_args()
    torch.set_num_threads(2)
    if args.sources:
        missing = [str(source) for source in args.sources if not source.is_file()]
        if missing:
            parser.error(f"no such kernel source: {', '.join(missing)}")
        builds = {str(source): kernel_call(args.envs, "native", source) for source in args.sources}
    else:
        builds = {f"-march={march}": kernel_call(args.envs, march) for march in args.march}
    calls = max(20, 100_000 // args.envs)
    times: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, (_, call) in builds.items():
            start = time.perf_counter()
            for _ in range(calls):
                call(args.threads)
            times[name].append((time.perf_counter() - start) / calls)
    first = next(iter(builds))
    width = max(len(name) for name in builds)
    for name, values in times.items():
        ratios = [a / b for a, b in zip(times[first], values)]
        print(f"{name:{width}s} {args.envs} envs, {args.threads} thread(s): "
              f"{args.envs / statistics.median(values) / 1e6:5.1f}M env steps/s, "
              f"{statistics.median(ratios):.3f}x {first} (per-round {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
