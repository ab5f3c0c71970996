"""Arm simulator throughput: robo-rl's batched pick-cube env next to gym-hil's Panda pick-cube, in one run.

Measured as an RL loop uses them (controller, observation, reward and autoreset included), with random
actions pre-sampled so RNG cost is not timed, median of repeats:
  * robo-rl `ArmVectorEnv("pick_cube")`: 50 Hz control, 10 physics substeps of 2 ms, N arms in one
    persistent `mujoco.batch.Batch` on 2 C threads; also driven by the scripted expert, which spends
    most of each episode grasping (contacts) instead of in free motion;
  * gym-hil (PyPI, LeRobot's HIL-SERL sim: SERL's Panda pick-cube model and controller), one env, in its
    own venv (bench/.venv-gymhil, mujoco 3.3.7) and headless with MUJOCO_GL=osmesa (needs Debian's
    libosmesa6, which `make system-deps` installs).
Prints a table and the targets (>= 10,000 env steps/s; >= 20x gym-hil's physics steps/s); writes JSON.

    python bench/arm_speed.py [--seconds 2] [--repeats 3] [--no-peer]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from peers import machine_line, peer_bench_arguments, peer_python, write_results
from sim_speed import measure

ROOT = Path(__file__).resolve().parent
GYM_HIL_VENV = ROOT / ".venv-gymhil"
GYM_HIL_REQUIREMENTS = ["gym-hil==0.1.13", "mujoco==3.3.7"]  # its controller calls mj_fullM with data.qM as 3.3 lays it out


def bench_robo_rl(num_envs: int, nthread: int, policy: str, seconds: float, repeats: int) -> dict[str, Any]:
    """robo-rl's batched pick-cube env with random or scripted-expert actions."""
    from sim.arm.env import ArmVectorEnv

    env = ArmVectorEnv("pick_cube", num_envs=num_envs, nthread=nthread)
    obs, _ = env.reset(seed=0)
    pool = np.random.default_rng(0).uniform(-1, 1, size=(16, num_envs, 4))
    state = {"obs": obs, "t": 0}

    def step() -> None:
        action = env.expert_actions(state["obs"]) if policy == "expert" else pool[state["t"] % 16]
        state["obs"] = env.step(action)[0]
        state["t"] += 1

    rate = measure(step, num_envs, seconds, repeats)
    return {"path": f"robo-rl pick_cube ({policy} actions)", "num_envs": num_envs, "threads": nthread,
            "env_steps_per_s": rate, "physics_steps_per_s": rate * env.config.substeps}


def bench_gym_hil(seconds: float, repeats: int, image_obs: bool = False) -> dict[str, Any]:
    """gym-hil's pick-cube env (with its camera images if `image_obs`) through bench/gym_hil_peer.py in its own venv."""
    python = peer_python(GYM_HIL_VENV, GYM_HIL_REQUIREMENTS, probe="gym_hil")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gym_hil.json"
        subprocess.run([str(python), str(ROOT / "gym_hil_peer.py"), "--seconds", str(seconds), "--repeats",
                        str(repeats), "--json", str(out), *(["--image-obs"] if image_obs else [])], check=True,
                       env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")})
        result = json.loads(out.read_text())
    return {"path": f"gym-hil {result['gym_hil_version']} ({result['env_id']}, random actions)", "num_envs": 1,
            "threads": 1, "env_steps_per_s": result["env_steps_per_s"],
            "physics_steps_per_s": result["physics_steps_per_s"],
            "images_per_step": result["images_per_step"], "image_shapes": result["image_shapes"],
            "note": f"{result['control_hz']:g} Hz, {result['substeps']} substeps, mujoco {result['mujoco']}"}


def main() -> None:
    """Run every measurement, print the table and the targets, write JSON."""
    args = peer_bench_arguments(__doc__, "arm_speed.json", "gym-hil").parse_args()
    print(machine_line(), flush=True)
    plan = [(n, t, p) for p in ("random", "expert") for n, t in ((64, 2), (256, 2), (1024, 2))] + [(256, 1, "random")]
    rows = []
    for index, (n, t, policy) in enumerate(plan, 1):
        print(f"[{index}/{len(plan) + (not args.no_peer)}] robo-rl pick_cube, N={n}, {t} thread(s), {policy} ...", flush=True)
        rows.append(bench_robo_rl(n, t, policy, args.seconds, args.repeats))
    peer = None
    if not args.no_peer:
        print(f"[{len(plan) + 1}/{len(plan) + 1}] gym-hil ...", flush=True)
        peer = bench_gym_hil(args.seconds, args.repeats)
        rows.append(peer)
    print(f"\n{'path':58s} {'envs':>5s} {'thr':>3s} {'env steps/s':>12s} {'physics steps/s':>16s} {'vs gym-hil':>10s}")
    for r in rows:
        ratio = f"{r['physics_steps_per_s'] / peer['physics_steps_per_s']:.0f}x" if peer else "-"
        print(f"{r['path']:58s} {r['num_envs']:5d} {r['threads']:3d} {r['env_steps_per_s']:12,.0f} "
              f"{r['physics_steps_per_s']:16,.0f} {ratio:>10s}")
    ours = [r for r in rows if r["path"].startswith("robo-rl") and r["threads"] == 2]
    best = max(ours, key=lambda r: r["env_steps_per_s"])
    worst = min(ours, key=lambda r: r["env_steps_per_s"])
    targets = {"best_env_steps_per_s_2_threads": best["env_steps_per_s"],
               "slowest_env_steps_per_s_2_threads": worst["env_steps_per_s"], "env_steps_target": 10_000}
    print(f"\nrobo-rl, 2 threads: {worst['env_steps_per_s']:,.0f} to {best['env_steps_per_s']:,.0f} env steps/s "
          "(target >= 10,000)")
    if peer:
        targets.update(physics_vs_gym_hil=worst["physics_steps_per_s"] / peer["physics_steps_per_s"], ratio_target=20)
        print(f"physics steps/s vs gym-hil: {targets['physics_vs_gym_hil']:.0f}x at the slowest (target >= 20x)")
    report = {"machine": {"mujoco": __import__("mujoco").__version__},
              "seconds": args.seconds, "repeats": args.repeats, "rows": rows, "targets": targets}
    write_results(args.json, report)


if __name__ == "__main__":
    main()
