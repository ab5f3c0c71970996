"""Camera rendering throughput of the arm envs, next to gym-hil's image env, in one run.

Frames are 128x128 RGB images; every simulation has two cameras (wrist and front), so one env step is two
frames. Measured, median of repeats:
  * robo-rl's render workers alone (`sim.arm.render_pool.RenderPool`, the SO-ARM100 scene), 1 and 2 worker
    processes, N simulations per request, states fixed: the rendering ceiling;
  * robo-rl `ArmVectorEnv("pick_cube", cameras enabled)` stepped by the scripted expert: physics, rendering
    and autoreset together, as a training loop sees it;
  * one `mujoco.Renderer` in this process, frame by frame, on the same scene: how most MuJoCo envs render,
    with MuJoCo's default scene (shadows, 4x multisampling) and with the settings robo-rl renders with;
  * gym-hil (PyPI, LeRobot's HIL-SERL sim) `gym_hil/PandaPickCubeBase-v0` with `image_obs=True`, which returns
    a front and a wrist image of 128x128 per step, one env, in its own venv (bench/.venv-gymhil), headless with MUJOCO_GL=osmesa.
Prints a table and the target (>= 1,000 frames/s at 128x128 on this machine's 2 cores); writes JSON.
Run it on an idle machine: a busy core slows every worker.

    python bench/render_speed.py [--seconds 2] [--repeats 3] [--no-peer]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # the in-process peer; the render workers choose their own

import numpy as np  # noqa: E402

from arm_speed import bench_gym_hil  # noqa: E402
from peers import machine_line, peer_bench_arguments, write_results  # noqa: E402
from sim_speed import measure  # noqa: E402

ROOT = Path(__file__).resolve().parent
SIZE = 128


def scene() -> Any:
    """The SO-ARM100 pick-cube model the env renders."""
    from sim.arm.controller import ImpedanceGains, load_impedance_arm
    from sim.arm.robot import SO_ARM100_LIKE

    return load_impedance_arm(SO_ARM100_LIKE, ImpedanceGains(translation_stiffness=2000.0, rotation_stiffness=20.0,
                                                             null_damping=0.05, effective_mass=0.3))


def bench_pool(num_envs: int, workers: int, seconds: float, repeats: int) -> dict[str, Any]:
    """Render requests of `num_envs` simulations, nothing else."""
    from sim.arm.cameras import AppearanceLayout, CameraConfig, CameraRandomization, draw_appearance
    from sim.arm.render_pool import RenderPool

    model = scene()
    config = CameraConfig(enabled=True, width=SIZE, height=SIZE, randomization=CameraRandomization(enabled=True))
    pool = RenderPool(model, num_envs, config, workers)
    try:
        pool["qpos"][:] = model.qpos0
        pool["appearance"][:] = draw_appearance(np.random.default_rng(0), num_envs,
                                                AppearanceLayout(len(config.names), model.ngeom), config.randomization)
        rate = measure(pool.render, num_envs * len(config.names), seconds, repeats)
        backend = pool.backend
    finally:
        pool.close()
    return {"path": f"robo-rl render workers ({backend}, randomized appearance)", "num_envs": num_envs,
            "processes": workers, "frames_per_s": rate, "env_steps_per_s": None}


def bench_env(num_envs: int, workers: int, seconds: float, repeats: int) -> dict[str, Any]:
    """The pick-cube env with both cameras, stepped by the scripted expert."""
    from sim.arm.env import ArmVectorEnv

    env = ArmVectorEnv("pick_cube", num_envs, robot="so_arm100",
                       cameras={"enabled": True, "width": SIZE, "height": SIZE, "workers": workers,
                                "randomization": {"enabled": True}})
    try:
        state = {"obs": env.reset(seed=0)[0]}

        def step() -> None:
            state["obs"] = env.step(env.expert_actions(state["obs"]))[0]

        rate = measure(step, num_envs, seconds, repeats)
    finally:
        env.close()
    return {"path": "robo-rl SO-ARM100 pick_cube env, 2 cameras (expert actions)", "num_envs": num_envs,
            "processes": workers, "frames_per_s": 2 * rate, "env_steps_per_s": rate}


def bench_single_renderer(default_scene: bool, seconds: float, repeats: int) -> dict[str, Any]:
    """One mujoco.Renderer in this process, one frame per call, both cameras in turn."""
    import mujoco

    model = scene()
    if not default_scene:
        model.vis.quality.offsamples = 0
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, SIZE, SIZE)
    if not default_scene:
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_SKYBOX):
            renderer.scene.flags[flag] = 0
    out = np.empty((SIZE, SIZE, 3), np.uint8)

    def frames() -> None:
        for camera in ("wrist", "front"):
            renderer.update_scene(data, camera)
            renderer.render(out=out)

    try:
        rate = measure(frames, 2, seconds, repeats)
    finally:
        renderer.close()
    settings = "MuJoCo's default scene: shadows, 4x MSAA" if default_scene else "robo-rl's settings: no shadows, no MSAA"
    return {"path": f"one mujoco.Renderer in-process ({settings})", "num_envs": 1, "processes": 1,
            "frames_per_s": rate, "env_steps_per_s": None}


def main() -> None:
    """Run every measurement, print the table and the target, write JSON."""
    args = peer_bench_arguments(__doc__, "render_speed.json", "gym-hil").parse_args()
    print(machine_line(), flush=True)
    plan: list[tuple[str, Any]] = [
        ("render workers, N=64, 1 process", lambda: bench_pool(64, 1, args.seconds, args.repeats)),
        ("render workers, N=64, 2 processes", lambda: bench_pool(64, 2, args.seconds, args.repeats)),
        ("env, N=16, 2 processes", lambda: bench_env(16, 2, args.seconds, args.repeats)),
        ("env, N=64, 2 processes", lambda: bench_env(64, 2, args.seconds, args.repeats)),
        ("one renderer, default scene", lambda: bench_single_renderer(True, args.seconds, args.repeats)),
        ("one renderer, robo-rl's settings", lambda: bench_single_renderer(False, args.seconds, args.repeats)),
    ]
    if not args.no_peer:
        plan.append(("gym-hil image env", lambda: _peer(args.seconds, args.repeats)))
    rows = []
    for index, (what, run) in enumerate(plan, 1):
        print(f"[{index}/{len(plan)}] {what} ...", flush=True)
        rows.append(run())
    peer = rows[-1] if not args.no_peer else None
    print(f"\n{'path':70s} {'envs':>5s} {'proc':>4s} {'frames/s':>9s} {'env steps/s':>12s} {'vs gym-hil':>10s}")
    for r in rows:
        ratio = f"{r['frames_per_s'] / peer['frames_per_s']:.0f}x" if peer else "-"
        steps = f"{r['env_steps_per_s']:12,.0f}" if r["env_steps_per_s"] else f"{'-':>12s}"
        print(f"{r['path']:70s} {r['num_envs']:5d} {r['processes']:4d} {r['frames_per_s']:9,.0f} {steps} {ratio:>10s}")
    best_env = max(r["frames_per_s"] for r in rows if r["path"].startswith("robo-rl SO-ARM100"))
    print(f"\nframes/s at {SIZE}x{SIZE} in the env with both cameras: {best_env:,.0f} (target >= 1,000)")
    write_results(args.json, {"machine": {"mujoco": __import__("mujoco").__version__}, "size": SIZE,
                              "seconds": args.seconds, "repeats": args.repeats, "rows": rows,
                              "targets": {"env_frames_per_s": best_env, "frames_target": 1000}})


def _peer(seconds: float, repeats: int) -> dict[str, Any]:
    result = bench_gym_hil(seconds, repeats, image_obs=True)
    return {"path": result["path"].replace("random actions", f"{result['images_per_step']} images/step"),
            "num_envs": 1, "processes": 1, "frames_per_s": result["env_steps_per_s"] * result["images_per_step"],
            "env_steps_per_s": result["env_steps_per_s"], "image_shapes": result["image_shapes"]}


if __name__ == "__main__":
    main()
