"""What the model-based expert (sim/quadrotor/expert.py) flies: the ceiling of `make train`'s student.

Flies the expert where the robustness suite flies a policy: the suite's 100 held-out vehicles of `make train`'s
vehicle family (+experiment=hover_family with rotor constants scaled from 0, seed 777777) from moderate and from
learning-to-fly starts, by latency, and each named vehicle with its firmware's thrust limits and wind at 0, 20
and 30 ms from both start sets (the suite's seed 12345). Prints the tables and writes
bench/results/model_expert_<task>.json.

    python bench/model_expert.py [--episodes 100] [--task hover]
"""

from __future__ import annotations

import argparse
import json
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
from robo_rl.envs import make_vector_env, task_env  # noqa: E402
from robo_rl.evaluation import evaluate_policy  # noqa: E402
from sim.quadrotor.expert import ModelExpert  # noqa: E402
from sim.quadrotor.model import VEHICLES  # noqa: E402
from sim.quadrotor.tasks import TASKS  # noqa: E402

DEVICE = torch.device("cpu")
STUDENT_VEHICLES = {"randomization": {"motor_tau_scale": [0.0, 1.0]}}  # make train's env_overrides


def fly(env_cfg, episodes: int, seed: int, overrides: dict) -> tuple[np.ndarray, np.ndarray]:
    """The expert's successes and each episode's latency, one episode per env."""
    env = make_vector_env(env_cfg, episodes, DEVICE, overrides=overrides)
    expert = ModelExpert(env.unwrapped.batch)
    result = evaluate_policy(lambda _obs: expert(), env, seed, DEVICE)
    env.close()
    return np.asarray(result["successes"], dtype=bool), np.asarray(result["params"]["latency_steps"]).reshape(-1)


def main() -> None:
    """Fly the expert on the held-out vehicles and the named ones, print and write the results."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, action=Positive, default=100, help="vehicles / starts per cell")
    parser.add_argument("--task", default="hover", help="quadrotor task whose reference the expert flies")
    args = parser.parse_args()
    if args.task not in TASKS:
        sys.exit(f"--task {args.task}: one of {', '.join(TASKS)}")
    torch.set_num_threads(1)
    suite = OmegaConf.load(ROOT / "configs" / "robustness.yaml")
    env_cfg = task_env(expert_run_config("hover_family").env, args.task)
    results: dict = {"task": args.task, "episodes": args.episodes, "held_out": {}, "named": {}}
    print(f"held-out vehicles (seed {suite.held_out.seed}), {args.task}: success by latency 0 / 1 / 2 / 3 steps")
    for start_set, starts in suite.start_sets.items():
        overrides = {**STUDENT_VEHICLES, "initial_state": OmegaConf.to_container(starts)}
        success, latency = fly(env_cfg, args.episodes, int(suite.held_out.seed), overrides)
        by_latency = [float(success[latency == k].mean()) if (latency == k).any() else None for k in range(4)]
        results["held_out"][start_set] = {"success_rate": float(success.mean()), "by_latency": by_latency}
        print(f"  {start_set:9s} {100 * success.mean():3.0f}%  (" +
              " / ".join("-" if r is None else f"{100 * r:.0f}" for r in by_latency) + ")")
    print(f"named vehicles, firmware limits, wind up to {suite.wind} N (seed {suite.seed}): success at 0 / 20 / 30 ms")
    for name, vehicle in VEHICLES.items():
        for start_set, starts in suite.start_sets.items():
            rates = []
            for latency in (0, 2, 3):
                overrides = {"vehicle": name, "firmware_thrust_max": vehicle.firmware_thrust_max or 0.0,
                             "firmware_thrust_min": vehicle.firmware_thrust_min or 0.0,
                             "initial_state": OmegaConf.to_container(starts),
                             "randomization": {"enabled": True, "vehicle_parameters": False,
                                               "latency_steps": [latency, latency], "disturbance_force": float(suite.wind)}}
                rates.append(float(fly(env_cfg, args.episodes, int(suite.seed), overrides)[0].mean()))
            results["named"][f"{name}/{start_set}"] = rates
            print(f"  {name:26s} {start_set:9s} " + " / ".join(f"{100 * r:.0f}" for r in rates) + "%")
    out = ROOT / "bench" / "results" / f"model_expert_{args.task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    run_reporting_errors(main)
