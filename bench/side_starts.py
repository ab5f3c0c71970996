"""Starts on the vehicle's side: what the model-based expert and a run's policy fly from a steep tilt in every
direction, at every heading about the body's own axis, sliding towards the tilt.

Learning-to-fly's starts draw such states now and then (tilt up to 90 degrees, 1 m/s); here every tilt direction x
heading (12 x 12 = 144 starts per row) flies at once, on each named vehicle as published, with its firmware's
thrust limits, no latency and no wind, from the start point. A loop whose error depends on the heading fails
at some headings and not at others: the columns show failures by heading (bench/RESULTS.md, session 50).

    python bench/side_starts.py [--run <run dir> ...] [--tilt 84] [--speed 0.5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, Positive  # noqa: E402
from teacher_pool import run_reporting_errors  # noqa: E402

from robo_rl.distill import expert_run_config  # noqa: E402
from robo_rl.envs import make_vector_env  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from robo_rl.robustness import check_run, load_flying, suite_from_config, vehicle_overrides  # noqa: E402
from sim.quadrotor.expert import ModelExpert  # noqa: E402
from sim.quadrotor.model import VEHICLES  # noqa: E402
from sim.quadrotor.rotations import tilted_towards  # noqa: E402

DEVICE = torch.device("cpu")
SUITE = suite_from_config(OmegaConf.merge(OmegaConf.load(ROOT / "configs" / "robustness.yaml"), {"run": "unused"}))
STEPS = 12  # tilt directions, and headings, 30 degrees apart


def side_starts(tilt_deg: float, speed: float, start: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Start states (the suite's initial_state arrays) at `start` (3,): tilted `tilt_deg` towards every direction,
    at every heading about the body's z axis, moving at `speed` [m/s] towards the tilt; and each start's heading."""
    direction, heading = (a.ravel() for a in np.meshgrid(np.arange(STEPS) * 2 * np.pi / STEPS,
                                                         np.arange(STEPS) * 2 * np.pi / STEPS, indexing="ij"))
    n = len(direction)
    quaternion = tilted_towards(np, direction, np.full(n, np.radians(tilt_deg)), heading).T
    velocity = speed * np.stack([np.cos(direction), np.sin(direction), np.zeros(n)], 1)
    return {"position": np.tile(start, (n, 1)), "quaternion": quaternion, "velocity": velocity,
            "angular_velocity": np.zeros((n, 3))}, heading


def fly(env_cfg, vehicle: str, act, tilt_deg: float, speed: float, expert: bool) -> np.ndarray:
    """Successes (STEPS, STEPS), tilt direction x heading, of `act` (or of the expert) on a named vehicle as the
    robustness suite builds it (published physics, firmware thrust limits), at no latency and no wind."""
    env = make_vector_env(env_cfg, STEPS * STEPS, DEVICE, overrides=vehicle_overrides(vehicle, SUITE))
    try:
        starts, _ = side_starts(tilt_deg, speed, np.asarray(env.config.center, dtype=float))
        if expert:
            model = ModelExpert(env.unwrapped.batch)
            act = lambda _obs: model()  # noqa: E731
        n = STEPS * STEPS
        options = {"initial_state": starts, "params": {"latency_steps": np.zeros(n, dtype=np.int64),
                                                        "disturbance_force": np.zeros((n, 3)),
                                                        "disturbance_torque": np.zeros((n, 3))}}
        result = evaluate_policy(act, env, 0, DEVICE, options)
    finally:
        env.close()
    return np.asarray(result["successes"], dtype=bool).reshape(STEPS, STEPS)


def main() -> None:
    """Fly the expert and each run from the side starts on every named vehicle and print the rows."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="append", default=[], help="a quadrotor run (repeat for several)")
    parser.add_argument("--tilt", type=float, action=Positive, default=84.0, help="tilt [deg], at most 90")
    parser.add_argument("--speed", type=float, default=0.5, help="speed towards the tilt [m/s], 0 to 1")
    args = parser.parse_args()
    if not args.tilt <= 90.0:
        sys.exit(f"--tilt {args.tilt:g}: a tilt in (0, 90] degrees")
    if not 0.0 <= args.speed <= 1.0:
        sys.exit(f"--speed {args.speed:g}: a speed in [0, 1] m/s, as learning-to-fly's starts draw")
    torch.set_num_threads(1)
    flyers = [("expert", expert_run_config("hover_family").env, None)]
    for run in args.run:
        check_run(run, "--run")
        _, run_cfg, agent = load_flying(run, "best", DEVICE, None)
        flyers.append((run, run_cfg.env, lambda obs, a=agent: a.act(obs, deterministic=True)))
    print(f"success from {STEPS * STEPS} starts tilted {args.tilt:g} degrees, sliding at {args.speed:g} m/s towards "
          f"the tilt, no latency; failures by heading 0, 30, ..., 330 degrees")
    for vehicle in VEHICLES:
        for name, env_cfg, act in flyers:
            success = fly(env_cfg, vehicle, act, args.tilt, args.speed, expert=act is None)
            print(f"  {vehicle:26s} {100 * success.mean():3.0f}%  " + " ".join(f"{k:2d}" for k in (~success).sum(0))
                  + f"  {name}")


if __name__ == "__main__":
    run_reporting_errors(main)
