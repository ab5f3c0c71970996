"""Simulator throughput: robo-rl's Crazyflie paths next to the learning-to-fly simulator, in one run.

Measured, each as an RL loop would use it (observation, reward, termination and autoreset included;
random actions uniform over the action range, pre-sampled so RNG cost is not timed; median of repeats):
  * single env: `gymnasium.make("robo_rl/CrazyflieHover-v0")`, one MuJoCo MjData;
  * MuJoCo batch: `mujoco.batch.Batch` on 1 and 2 C threads, env steps/s and physics steps/s;
  * torch batch: the tensor rigid-body path on this CPU, eager, compiled with torch.compile ("inductor")
    and as the generated C++ step ("native", what compile=True picks on a CPU), whose outputs each loop
    drops at once except in the "+held" row, which keeps every step's until the next returns (as training
    keeps its observation);
  * both batched paths at the hover recipe's size (32 envs) with the asymmetric critic's privileged
    observations, as `robo_rl.train` steps them;
  * the learning-to-fly simulator (PyPI `l2f`, C++ with OpenMP, RK4 at 10 ms), single and vectorized,
    installed by this script into its own venv (bench/.venv-l2f), never into the project's.

l2f runs before and after robo-rl's rows (this machine's speed drifts within minutes), its vectorized part
in 3 fresh processes each time (see bench/l2f_peer.py: on a 2-vCPU VM, launches alternate between two
speeds ~1.8x apart, and one run of 3 can meet only the slow one); the ratios use the best of all 6, so
robo-rl is compared with the peer at its best. Then the native step (N=8192) and fresh l2f launches
alternate for `--pairs` rounds, each pair within ~30 s: the median of the pairs' ratios is the figure least
moved by the drift (the rows above can each land in a fast or a slow phase). One env step is 10 ms of
simulated flight in every simulator (robo-rl: 5 Euler substeps of 2 ms; l2f: one RK4 step of 10 ms), so
env steps/s compare like for like. Prints a table; writes JSON.

    python bench/sim_speed.py [--seconds 2] [--repeats 3] [--pairs 3] [--json bench/results/sim_speed.json]
                              [--no-l2f]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from peers import BenchArgumentParser, NonNegative, Positive, machine_line, peer_python, results_file, write_results

ROOT = Path(__file__).resolve().parent
L2F_VENV = ROOT / ".venv-l2f"
L2F_REQUIREMENTS = ["l2f==2.0.18", "numpy"]
TASK = "hover"


def measure(step: Callable[[], None], items_per_call: int, seconds: float, repeats: int) -> float:
    """Median items/s of `step` over `repeats` windows of `seconds`, after a warm-up window."""
    rates = []
    for window in range(repeats + 1):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < (seconds if window else min(seconds, 0.5)):
            step()
            calls += 1
        if window:
            rates.append(calls * items_per_call / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_single(seconds: float, repeats: int) -> dict[str, Any]:
    """The single MuJoCo gymnasium env."""
    import gymnasium as gym

    import sim  # noqa: F401

    env = gym.make(f"robo_rl/Crazyflie{TASK.capitalize()}-v0").unwrapped
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(0, 1, size=(4096, 4))
    counter = iter(range(10**12))

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(actions[next(counter) % 4096])
        if terminated or truncated:
            env.reset()

    rate = measure(step, 1, seconds, repeats)
    return {"path": "robo-rl single MuJoCo env", "num_envs": 1, "threads": 1, "env_steps_per_s": rate,
            "physics_steps_per_s": rate * env.batch.substeps}


def bench_vector(backend: str, num_envs: int, seconds: float, repeats: int, nthread: int = 2,
                 compile: bool | str = False, privileged: bool = False, hold: bool = False) -> dict[str, Any]:
    """A batched robo-rl path (MuJoCo batch or torch) with same-step autoreset (and privileged observations).
    With `hold`, each step's outputs stay referenced until the next step returns, as in a training loop
    that keeps its observation (otherwise they are dropped at once, as l2f's loop reuses its buffers)."""
    from sim.quadrotor.env import QuadrotorVectorEnv

    pool = np.random.default_rng(0).uniform(0, 1, size=(8, num_envs, 4))
    actions = [torch.as_tensor(a, dtype=torch.float32) if backend == "torch" else a for a in pool]
    setup_start = time.perf_counter()  # the native step builds in the constructor, torch.compile at the first step
    env = QuadrotorVectorEnv(TASK, num_envs, backend, nthread=nthread, device="cpu", compile=compile,
                             privileged=privileged)
    env.reset(seed=0)
    env.step(actions[0])
    setup_seconds = time.perf_counter() - setup_start
    counter = iter(range(10**12))
    held: list[Any] = [None]

    def step() -> None:
        result = env.step(actions[next(counter) % 8])
        if hold:
            held[0] = result

    rate = measure(step, num_envs, seconds, repeats)
    name = {"mujoco_batch": "robo-rl MuJoCo batch", "torch": "robo-rl torch batch"}[backend]
    if backend == "torch":
        name += {False: " (eager)", "inductor": " (torch.compile)", "native": " (native C++)"}[compile]
    if privileged:
        name += " +privileged"
    if hold:
        name += " +held"
    return {"path": name, "num_envs": num_envs, "threads": nthread if backend == "mujoco_batch" else torch.get_num_threads(),
            "env_steps_per_s": rate, "physics_steps_per_s": rate * env.batch.substeps,
            **({"setup_seconds": setup_seconds} if compile else {})}


def bench_torch_physics(num_envs: int, seconds: float, repeats: int) -> dict[str, Any]:
    """The torch rigid-body step alone (5 substeps, no rotor model, task logic or autoreset), compiled:
    the ceiling of the whole torch env step."""
    from sim.quadrotor.model import QuadrotorParams, load_model
    from sim.quadrotor.physics import TorchPhysics

    params = QuadrotorParams.from_model(load_model())
    physics = TorchPhysics(params, num_envs)
    physics.buffer[2] = 30.0
    thrust = torch.full((5, 4, num_envs), params.mass * params.gravity / 4)  # (K, 4, N)
    advance = torch.compile(physics.advance, dynamic=False)
    advance(thrust)
    rate = measure(lambda: advance(thrust), num_envs, seconds, repeats)
    return {"path": "robo-rl torch physics only (compiled)", "num_envs": num_envs, "threads": torch.get_num_threads(),
            "env_steps_per_s": rate, "physics_steps_per_s": rate * 5}


def bench_l2f(seconds: float, repeats: int) -> list[dict[str, Any]]:
    """The learning-to-fly simulator, through bench/l2f_peer.py in its own venv."""
    python = peer_python(L2F_VENV, L2F_REQUIREMENTS, probe="l2f")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "l2f.json"
        subprocess.run([str(python), str(ROOT / "l2f_peer.py"), "--seconds", str(seconds), "--repeats",
                        str(repeats), "--threads", "2", "--json", str(out)], check=True)
        result = json.loads(out.read_text())
    return [
        {"path": f"l2f {result['l2f_version']} single env", "num_envs": 1, "threads": 1,
         "env_steps_per_s": result["single_steps_per_s"], "physics_steps_per_s": result["single_steps_per_s"]},
        {"path": f"l2f {result['l2f_version']} vectorized", "num_envs": result["vector_num_envs"],
         "threads": int(result.get("vector_omp_num_threads", 2)), "env_steps_per_s": result["vector_steps_per_s"],
         "physics_steps_per_s": result["vector_steps_per_s"], "launches": result["vector_launches"]},
    ]


def bench_paired(rounds: int, seconds: float, repeats: int, num_envs: int = 8192) -> dict[str, Any]:
    """robo-rl's native step at `num_envs` (`bench_vector`) and a fresh launch of l2f's vectorized step (its
    best size), alternating `rounds` times: each pair is measured within ~30 s, so the ratio of a pair is
    little moved by this machine's drift, which shifts every absolute figure by 15-30% within minutes."""
    python = peer_python(L2F_VENV, L2F_REQUIREMENTS, probe="l2f")
    pairs = []
    for _ in range(rounds):
        launch = subprocess.run(
            [str(python), str(ROOT / "l2f_peer.py"), "--part", "vector", "--seconds", str(seconds),
             "--repeats", str(repeats), "--warmup", "0.5", "--sizes", "1024,4096,8192"],
            env={**os.environ, "OMP_NUM_THREADS": "2"}, check=True, capture_output=True, text=True)
        l2f = json.loads(launch.stdout)["vector_steps_per_s"]
        native = bench_vector("torch", num_envs, seconds, repeats, compile="native")["env_steps_per_s"]
        pairs.append({"native_env_steps_per_s": native, "l2f_env_steps_per_s": l2f, "ratio": native / l2f})
    return {"num_envs": num_envs, "pairs": pairs, "median_ratio": statistics.median(p["ratio"] for p in pairs)}


def main() -> None:
    """Run every measurement, print the table and the targets, write JSON."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, action=Positive, default=2.0, help="length of each timed window")
    parser.add_argument("--repeats", type=int, action=Positive, default=3)
    parser.add_argument("--json", type=results_file, default=ROOT / "results" / "sim_speed.json")
    parser.add_argument("--no-l2f", action="store_true", help="skip the l2f peer")
    parser.add_argument("--pairs", type=int, action=NonNegative, default=3, help="alternating native/l2f rounds (0: none)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    torch.set_num_threads(2)

    plan: list[tuple[str, Callable[[], Any]]] = [
        ("single MuJoCo env", lambda: bench_single(args.seconds, args.repeats)),
        *[(f"MuJoCo batch, {t} thread(s), N={n}",
           lambda t=t, n=n: bench_vector("mujoco_batch", n, args.seconds, args.repeats, nthread=t))
          for t in (1, 2) for n in (1024, 4096)],
        ("torch eager, N=65536", lambda: bench_vector("torch", 65536, args.seconds, args.repeats)),
        *[(f"torch compiled (torch.compile), N={n}",
           lambda n=n: bench_vector("torch", n, args.seconds, args.repeats, compile="inductor")) for n in (16384, 65536)],
        *[(f"torch native C++ step, N={n}",
           lambda n=n: bench_vector("torch", n, args.seconds, args.repeats, compile="native"))
          for n in (4096, 8192, 16384, 65536)],
        ("torch native C++ step, N=8192, each step's outputs held until the next",
         lambda: bench_vector("torch", 8192, args.seconds, args.repeats, compile="native", hold=True)),
        ("torch physics only, compiled, N=65536", lambda: bench_torch_physics(65536, args.seconds, args.repeats)),
        ("MuJoCo batch, 2 threads, N=32, privileged observations",
         lambda: bench_vector("mujoco_batch", 32, args.seconds, args.repeats, privileged=True)),
        ("torch native C++ step, N=32, privileged observations",
         lambda: bench_vector("torch", 32, args.seconds, args.repeats, compile="native", privileged=True)),
    ]
    if not args.no_l2f:  # before and after robo-rl's rows: the machine's speed drifts within minutes
        for when in ("before", "after"):
            plan.insert(0 if when == "before" else len(plan), (f"l2f peer (learning-to-fly simulator), {when}",
                        lambda when=when: [{**row, "path": f"{row['path']} ({when})"}
                                           for row in bench_l2f(args.seconds, args.repeats)]))
    rows: list[dict[str, Any]] = []
    for index, (label, run) in enumerate(plan, 1):
        print(f"[{index}/{len(plan)}] {label} ...", flush=True)
        result = run()
        rows.extend(result if isinstance(result, list) else [result])

    def best(prefix: str) -> dict[str, Any] | None:
        matching = [r for r in rows if r["path"].startswith(prefix)]
        return max(matching, key=lambda r: r["env_steps_per_s"]) if matching else None

    l2f_vectors = [r["env_steps_per_s"] for r in rows if r["path"].startswith("l2f") and "vectorized" in r["path"]]
    l2f_vector = max(l2f_vectors) if l2f_vectors else None  # its best, of the runs before and after
    print(f"\n{'path':44s} {'envs':>6s} {'thr':>3s} {'env steps/s':>13s} {'physics steps/s':>16s} {'vs l2f vec':>10s}")
    for r in rows:
        ratio = f"{r['env_steps_per_s'] / l2f_vector:.2f}x" if l2f_vector else "-"
        print(f"{r['path']:44s} {r['num_envs']:6d} {r['threads']:3d} {r['env_steps_per_s']:13,.0f} "
              f"{r['physics_steps_per_s']:16,.0f} {ratio:>10s}")
    if l2f_vector:
        print("vs l2f vec: against l2f's best vectorized launch, before or after")

    tensor = best("robo-rl torch batch")  # whole env steps, not the physics-only row
    mujoco_2t = max((r for r in rows if r["path"] == "robo-rl MuJoCo batch" and r["threads"] == 2),
                    key=lambda r: r["physics_steps_per_s"])
    targets = {"mujoco_batch_physics_steps_per_s_2_threads": mujoco_2t["physics_steps_per_s"],
               "mujoco_batch_target": 700_000}
    print(f"\nMuJoCo batch, 2 threads: {mujoco_2t['physics_steps_per_s']:,.0f} physics steps/s (target >= 700,000)")
    if l2f_vector:
        ratio = tensor["env_steps_per_s"] / l2f_vector
        bounds = [tensor["env_steps_per_s"] / v for v in l2f_vectors]
        targets.update(tensor_vs_l2f_vectorized=ratio, tensor_vs_l2f_vectorized_before_after=bounds,
                       tensor_target_ratio=5.0)
        print(f"torch batch vs l2f vectorized: {ratio:.2f}x (vs its run before {bounds[0]:.2f}x, after "
              f"{bounds[-1]:.2f}x; target >= 5x, aim 10x)")
    if l2f_vector and args.pairs:
        print(f"\n[paired] robo-rl native step (N=8192) and l2f vectorized, alternating, {args.pairs} rounds ...",
              flush=True)
        paired = bench_paired(args.pairs, args.seconds, args.repeats)
        for index, pair in enumerate(paired["pairs"], 1):
            print(f"  round {index}: native {pair['native_env_steps_per_s']:13,.0f}  l2f {pair['l2f_env_steps_per_s']:13,.0f}"
                  f"  {pair['ratio']:.2f}x")
        # each side at its best over the whole run: every l2f launch, every native window at any size
        l2f_best = max(l2f_vectors + [p["l2f_env_steps_per_s"] for p in paired["pairs"]])
        native_best = max([r["env_steps_per_s"] for r in rows if r["path"] == "robo-rl torch batch (native C++)"]
                          + [p["native_env_steps_per_s"] for p in paired["pairs"]])
        best_ratio = native_best / l2f_best
        print(f"torch batch vs l2f vectorized, paired: median {paired['median_ratio']:.2f}x over {args.pairs} rounds "
              "(an l2f launch can land in its slow mode, ~half its best, see bench/l2f_peer.py)")
        print(f"torch batch vs l2f vectorized, each at its best over the whole run: {native_best:,.0f} / {l2f_best:,.0f}"
              f" = {best_ratio:.2f}x (target >= 5x, aim 10x)")
        targets.update(tensor_vs_l2f_paired=paired, tensor_vs_l2f_best_of_run=best_ratio)
    report = {"machine": {"torch": torch.__version__, "mujoco": __import__("mujoco").__version__},
              "seconds": args.seconds, "repeats": args.repeats, "rows": rows, "targets": targets}
    write_results(args.json, report)


if __name__ == "__main__":
    main()
