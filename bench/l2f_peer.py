"""Peer benchmark: throughput of the L2F ("Learning to Fly") quadrotor simulator.

Drives the PyPI package ``l2f`` (C++/pybind11, float32, RK4 at 10 ms, Crazyflie model) the
way an RL training loop would. One "step" is:

    observe(state) -> step(state, action) -> reward(state, action, next_state)
    -> terminated(next_state) -> state = next_state -> reset terminated envs

Measured:
  * single-env steps/s with ``l2f.vector1`` (the only 1-env API that has ``reward``), run in
    a child process with ``OMP_NUM_THREADS=1`` (one core, no OpenMP team overhead);
  * vectorized drone-steps/s (num_envs * steps / s) with ``l2f.vector<N>``, whose C++ loops
    over envs are OpenMP-parallel (all cores unless ``--threads``); the best size is reported, from
    the best of ``--launches`` fresh processes: on a 2-vCPU VM the same process setup ran at either
    ~8M or ~4.5M steps/s from one launch to the next (the second OpenMP thread adding nothing in the
    slow launches), so the peer is compared at its best.

Actions are uniform random in [-1, 1] (pre-sampled, so NumPy RNG cost is not timed).
Each result is the median of ``--repeats`` timed windows of ``--seconds`` after a warm-up.
OpenMP spin-waiting makes the vector numbers collapse if other processes compete for the
cores, so run this on an otherwise idle machine.

Usage (with a Python that has ``l2f`` and ``numpy`` installed):
    python bench/l2f_peer.py --seconds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from importlib import metadata
from typing import Any, Callable

import numpy as np
from peers import BenchArgumentParser, NonNegative, Positive

# ``l2f`` is imported lazily (in VecEnv) because libgomp reads OMP_NUM_THREADS at load time.


class VecEnv:
    """State and buffers for one ``l2f.vector<N>`` module."""

    def __init__(self, n: int, seed: int = 0, action_bank: int = 16) -> None:
        import l2f

        self.l2f, self.v, self.n = l2f, l2f.vector_selector[n], n
        v, dev = self.v, l2f.Device()
        self.dev = dev
        self.env, self.params = v.VectorEnvironment(), v.VectorParameters()
        self.state, self.next_state, self.rng = v.VectorState(), v.VectorState(), v.VectorRng()
        v.initialize_rng(dev, self.rng, seed)
        v.initialize_environment(dev, self.env)
        v.sample_initial_parameters(dev, self.env, self.params, self.rng)
        v.sample_initial_state(dev, self.env, self.params, self.state, self.rng)
        self.obs = np.zeros((n, self.env.OBSERVATION_DIM), dtype=np.float32)
        self.reward = np.zeros(n, dtype=np.float32)
        self.terminated = np.zeros(n, dtype=bool)
        gen = np.random.default_rng(seed)
        self.actions = [
            gen.uniform(-1.0, 1.0, (n, self.env.ACTION_DIM)).astype(np.float32)
            for _ in range(action_bank)
        ]

    def run(self, steps: int, t: int = 0) -> None:
        """Run ``steps`` full RL steps (observe, step, reward, terminated, auto-reset)."""
        v, dev, env, params, rng = self.v, self.dev, self.env, self.params, self.rng
        s, ns, obs, rew, term = self.state, self.next_state, self.obs, self.reward, self.terminated
        bank = self.actions
        for i in range(t, t + steps):
            a = bank[i % len(bank)]
            v.observe(dev, env, params, s, obs, rng)
            v.step(dev, env, params, s, a, ns, rng)  # returns list of per-env dt
            v.reward(dev, env, params, s, a, ns, rew, rng)
            v.terminated(dev, env, params, ns, term, rng)
            s.assign(ns)
            v.sample_initial_state_if_truncated(dev, env, params, s, term, rng)

    def integration_dt(self) -> float:
        """Integration timestep read from the parameters of env 0."""
        p = self.l2f.parameters_to_json(self.dev, self.env.environments[0], self.params.parameters[0])
        return float(json.loads(p)["integration"]["dt"])


def rates(run: Callable[[int, int], None], chunk: int, args: argparse.Namespace) -> list[float]:
    """Warm up, then time ``args.repeats`` windows of ``run(chunk, t)`` calls; steps/s each."""

    def window(duration: float) -> float:
        steps, t0 = 0, time.perf_counter()
        while True:
            run(chunk, steps)
            steps += chunk
            elapsed = time.perf_counter() - t0
            if elapsed >= duration:
                return steps / elapsed

    window(args.warmup)
    return [window(args.seconds) for _ in range(args.repeats)]


def bench_single(args: argparse.Namespace) -> dict[str, Any]:
    env = VecEnv(1)
    r = rates(env.run, 1000, args)
    return {
        "single_steps_per_s": statistics.median(r),
        "single_repeats": r,
        "integration_dt": env.integration_dt(),
        "observation_dim": int(env.env.OBSERVATION_DIM),
        "action_dim": int(env.env.ACTION_DIM),
    }


def bench_vector(args: argparse.Namespace) -> dict[str, Any]:
    sweep: dict[str, list[float]] = {}
    for n in (int(x) for x in args.sizes.split(",")):
        env = VecEnv(n)
        sweep[str(n)] = [r * n for r in rates(env.run, 1, args)]
        del env
    best = max(sweep, key=lambda k: statistics.median(sweep[k]))
    return {
        "vector_steps_per_s": statistics.median(sweep[best]),
        "vector_num_envs": int(best),
        "vector_sweep": {k: statistics.median(v) for k, v in sweep.items()},
        "vector_repeats": sweep[best],
    }


def child(part: str, args: argparse.Namespace, threads: int | None) -> dict[str, Any]:
    """Run one part in a fresh interpreter so OMP_NUM_THREADS takes effect."""
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, __file__, "--part", part, "--seconds", str(args.seconds),
           "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--sizes", args.sizes]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = BenchArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, action=Positive, default=3.0, help="length of each timed window")
    ap.add_argument("--repeats", type=int, action=Positive, default=3)
    ap.add_argument("--warmup", type=float, action=NonNegative, default=0.5, help="warm-up seconds before timing")
    ap.add_argument("--sizes", default="1024,4096,8192", help="vector sizes to try (comma-separated)")
    ap.add_argument("--threads", type=int, action=Positive, default=None, help="OMP_NUM_THREADS for the vector part")
    ap.add_argument("--launches", type=int, action=Positive, default=3,
                    help="fresh processes for the vector part (best kept)")
    ap.add_argument("--json", default=None, help="write results to this path")
    ap.add_argument("--part", choices=["all", "single", "vector"], default="all", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # one string, as the parent passes it on to each child process
    if not all(size.strip().isdigit() and int(size) > 0 for size in args.sizes.split(",")):
        ap.error(f"--sizes must be comma-separated counts of 1 or more, got {args.sizes}")

    if args.part != "all":  # child process: print the part's JSON and exit
        print(json.dumps(bench_single(args) if args.part == "single" else bench_vector(args)))
        return

    result: dict[str, Any] = {"l2f_version": metadata.version("l2f")}
    result |= child("single", args, threads=1)
    launches = [child("vector", args, threads=args.threads) for _ in range(args.launches)]
    result |= max(launches, key=lambda launch: launch["vector_steps_per_s"])
    result["vector_launches"] = [launch["vector_sweep"] for launch in launches]
    result |= {
        "integrator": "rk4",
        "step_includes": "observe+step+reward+terminated+auto-reset",
        "vector_omp_num_threads": args.threads or os.environ.get("OMP_NUM_THREADS") or os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "seconds": args.seconds,
        "repeats": args.repeats,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
