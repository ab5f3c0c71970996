"""Peer benchmark: throughput of the L2F ("Learning to Fly") quadrotor simulator.

Drives the PyPI package ``l2f`` (C++/pybind11, RK4 at 10 ms, Crazyflie model) the way an
RL training loop would. One "step" is:

    observe(state) -> step(state, action) -> reward(state, action, next_state)
    -> terminated(next_state) -> state = next_state -> reset terminated envs

Measured:
  * single-env steps/s, using the ``l2f.vector1`` module (the only 1-env API with reward),
  * vectorized drone-steps/s (num_envs * steps / s) for ``l2f.vector<N>`` modules
    (OpenMP-parallel ``for`` over envs in C++); the best size is reported.

Actions are uniform random in [-1, 1] (pre-sampled, so NumPy RNG cost is not timed).
Each result is the median of ``--repeats`` timed windows of ``--seconds`` after a warm-up.

Usage (with a Python that has ``l2f`` and ``numpy`` installed):
    python bench/l2f_peer.py --seconds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from importlib import metadata
from types import ModuleType
from typing import Any, Callable

import l2f
import numpy as np

DEVICE = l2f.Device()


class VecEnv:
    """Thin holder for the state of one ``l2f.vector<N>`` module."""

    def __init__(self, n: int, seed: int = 0, action_bank: int = 16) -> None:
        v: ModuleType = l2f.vector_selector[n]
        self.v, self.n = v, n
        self.env, self.params = v.VectorEnvironment(), v.VectorParameters()
        self.state, self.next_state, self.rng = v.VectorState(), v.VectorState(), v.VectorRng()
        v.initialize_rng(DEVICE, self.rng, seed)
        v.initialize_environment(DEVICE, self.env)
        v.sample_initial_parameters(DEVICE, self.env, self.params, self.rng)
        v.sample_initial_state(DEVICE, self.env, self.params, self.state, self.rng)
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
        v, env, params, rng = self.v, self.env, self.params, self.rng
        s, ns, obs, rew, term = self.state, self.next_state, self.obs, self.reward, self.terminated
        bank = self.actions
        for i in range(t, t + steps):
            a = bank[i % len(bank)]
            v.observe(DEVICE, env, params, s, obs, rng)
            v.step(DEVICE, env, params, s, a, ns, rng)
            v.reward(DEVICE, env, params, s, a, ns, rew, rng)
            v.terminated(DEVICE, env, params, ns, term, rng)
            s.assign(ns)
            v.sample_initial_state_if_truncated(DEVICE, env, params, s, term, rng)

    def integration_dt(self) -> float:
        """Integration timestep read from the parameters of env 0."""
        p = json.loads(l2f.parameters_to_json(DEVICE, self.env.environments[0], self.params.parameters[0]))
        return float(p["integration"]["dt"])


def rate(run: Callable[[int, int], None], chunk: int, seconds: float, repeats: int, warmup_s: float) -> float:
    """Median of ``repeats`` windows of calls ``run(chunk, t)``; returns steps/s."""

    def window(duration: float) -> float:
        steps, t0 = 0, time.perf_counter()
        while True:
            run(chunk, steps)
            steps += chunk
            elapsed = time.perf_counter() - t0
            if elapsed >= duration:
                return steps / elapsed

    window(warmup_s)
    return statistics.median(window(seconds) for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each timed window")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds before timing")
    ap.add_argument("--sizes", default="1024,4096,8192", help="vector sizes to try (comma-separated)")
    ap.add_argument("--json", default=None, help="write results to this path")
    args = ap.parse_args()

    single = VecEnv(1)
    single_rate = rate(single.run, 1000, args.seconds, args.repeats, args.warmup)

    sweep: dict[int, float] = {}
    for n in (int(x) for x in args.sizes.split(",")):
        venv = VecEnv(n)
        sweep[n] = rate(venv.run, 1, args.seconds, args.repeats, args.warmup) * n
        del venv
    best_n = max(sweep, key=sweep.__getitem__)

    result: dict[str, Any] = {
        "l2f_version": metadata.version("l2f"),
        "single_steps_per_s": single_rate,
        "vector_steps_per_s": sweep[best_n],
        "vector_num_envs": best_n,
        "vector_sweep": {str(n): r for n, r in sweep.items()},
        "integration_dt": single.integration_dt(),
        "integrator": "rk4",
        "observation_dim": int(single.env.OBSERVATION_DIM),
        "step_includes": "observe+step+reward+terminated+auto-reset",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
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
