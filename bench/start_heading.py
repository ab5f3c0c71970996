"""How a quadrotor policy flies from level, still starts turned about z, observing in the world frame and in
the frame of its take-over heading (what the Crazyflie app and the ROS 2 node do).

Training starts are rotations of at most 90 degrees about a uniform axis (learning-to-fly's distribution), so a
level vehicle never starts turned further. This flies `--episodes` starts per heading in the run's own training
env at a fixed latency: level, at rest, +-0.2 m from the target, turned by +-psi about z (the sign drawn per
episode), the policy given the simulator's observation (world frame) or that observation in the frame turned by
the start's heading (sim.quadrotor.observation.in_heading_frame). The episode's termination box stays on the world
axes in both.

    python bench/start_heading.py <run> [--episodes 100] [--latencies 0 2] [--seed 777]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, NonNegative, Positive, Seed  # noqa: E402
from teacher_pool import run_reporting_errors  # noqa: E402

from robo_rl.envs import check_quadrotor_env, make_vector_env  # noqa: E402
from robo_rl.evaluate import load_policy  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from sim.quadrotor.observation import in_heading_frame  # noqa: E402

HEADINGS_DEG = (0, 45, 90, 120, 150, 180)


def heading_success(run: str, episodes: int, latency: int, seed: int, frame: str) -> dict[int, float]:
    """Success rate per heading [deg] of the run's best policy, `episodes` level starts each at `latency` steps,
    observing in the `frame` "world" or "take-over" (its start's heading)."""
    device = torch.device("cpu")
    _, cfg, agent = load_policy(run, "best", device)
    check_quadrotor_env(cfg.env.get("id"), f"run={run}", "start_heading")
    env = make_vector_env(cfg.env, episodes, device,
                          overrides={"randomization": {"latency_steps": [latency, latency]}})
    rng = np.random.default_rng(seed)
    center = np.asarray(env.batch.config.center, dtype=np.float64)
    rates: dict[int, float] = {}
    try:
        for degrees in HEADINGS_DEG:
            psi = math.radians(degrees) * rng.choice([-1.0, 1.0], size=episodes)
            start: dict[str, Any] = {
                "position": center + rng.uniform(-0.2, 0.2, (episodes, 3)),
                "quaternion": np.stack([np.cos(psi / 2), np.zeros(episodes), np.zeros(episodes), np.sin(psi / 2)], 1),
                "velocity": np.zeros((episodes, 3)), "angular_velocity": np.zeros((episodes, 3))}
            turn = torch.as_tensor(psi if frame == "take-over" else np.zeros(episodes), dtype=torch.float32)
            lengths = env.batch.config.action_history, env.batch.config.state_history

            def act(obs: torch.Tensor) -> torch.Tensor:
                return agent.act(in_heading_frame(obs, turn.to(obs.device), *lengths), deterministic=True)

            result = evaluate_policy(act, env, seed, device, {"initial_state": start})
            rates[degrees] = result["success_rate"]
    finally:
        env.close()
    return rates


def main() -> None:
    """Print the table of success by heading, frame and latency."""
    parser = BenchArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--episodes", type=int, action=Positive, default=100)
    parser.add_argument("--latencies", type=int, nargs="+", action=NonNegative, default=[0, 2])
    parser.add_argument("--seed", type=int, action=Seed, default=777)
    args = parser.parse_args()
    # the first row's measurement checks the run and the latency before the table's header is printed
    rows = {("world", args.latencies[0]): heading_success(args.run, args.episodes, args.latencies[0], args.seed,
                                                          "world")}
    print("| observed in | latency | " + " | ".join(f"{d} deg" for d in HEADINGS_DEG) + " |")
    print("|---|---|" + "---|" * len(HEADINGS_DEG))
    for frame in ("world", "take-over"):
        for latency in args.latencies:
            rates = rows.get((frame, latency)) or heading_success(args.run, args.episodes, latency, args.seed, frame)
            print(f"| {frame} frame | {latency} steps | " + " | ".join(f"{100 * rates[d]:.0f}%" for d in HEADINGS_DEG)
                  + " |", flush=True)


if __name__ == "__main__":
    run_reporting_errors(main)
