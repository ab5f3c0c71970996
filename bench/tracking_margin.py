"""How far a policy's failures on a tracking task are from success: the robustness suite's cells (moderate
starts, latency 0-2, with and without wind) for some named vehicles, flown again at several success radii.

A policy that fails the figure-eight at its own radius (0.15 m) but passes at 0.175 m tracks the lap a couple
of centimetres too loosely; one that fails at every radius crashes or drifts away.

    python bench/tracking_margin.py <run> [--task figure_eight] [--vehicles crazyflie_brushless ...]
        [--radii 0.15 0.175 0.2]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers import BenchArgumentParser, Positive, Seed  # noqa: E402

from robo_rl.checkpoint import CheckpointError  # noqa: E402
from robo_rl.cli import hydra_value  # noqa: E402
from robo_rl.robustness import check_run, evaluate_cells, load_flying, suite_from_config  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.quadrotor.model import VEHICLES  # noqa: E402
from sim.quadrotor.tasks import TASKS  # noqa: E402


class Radius(Positive):
    """`action=Radius`: a success radius, as the task config takes one (sim.quadrotor config: at most 100 m)."""

    maximum = 100.0


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a training or distillation run folder")
    parser.add_argument("--task", default="figure_eight", choices=list(TASKS), help="the quadrotor task flown")
    parser.add_argument("--vehicles", nargs="+", default=None, choices=list(VEHICLES),
                        help="named vehicles (default: the suite's)")
    parser.add_argument("--radii", nargs="+", type=float, action=Radius, default=[0.15, 0.175, 0.2],
                        help="success radii [m]")
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        check_run(args.run)
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            cfg = compose(config_name="robustness", overrides=[f"run={hydra_value(args.run)}", f"task={args.task}",
                                                                   "held_out.episodes=0"])
        suite = suite_from_config(cfg)
        device = torch.device("cpu")
        state, run_cfg, agent = load_flying(args.run, "best", device, args.task)
    except (ConfigError, CheckpointError) as error:
        parser.exit(2, f"error: {error}\n")
    cells = [cell for cell in suite.cells(args.vehicles)
             if cell.start_set == "moderate" and cell.latency_steps <= 2]
    print(f"{args.run}, {args.task}: success from moderate starts per cell (latency steps, w: wind)")
    for radius in args.radii:
        flown = OmegaConf.merge(run_cfg, {"env": {"overrides": {"success_radius": radius}}})
        results = evaluate_cells(state, flown, lambda o: agent.act(o, deterministic=True), cells, suite, device)
        print(f"radius {radius:.3f} m: " + "  ".join(
            f"{cell.vehicle} {cell.latency_steps}{'w' if cell.wind else ''} {100 * result['success_rate']:.0f}%"
            for cell, result in results.items()), flush=True)


if __name__ == "__main__":
    main()
