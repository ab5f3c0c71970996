"""Training speed: SAC gradient updates/s next to Stable-Baselines3 and a CleanRL-style reference, and
the wall-clock time of the default hover training.

    .venv/bin/python bench/train_speed.py [--seconds 2] [--rounds 3] [--skip-hover | --skip-updates] [--seeds 0 1 2]
        [--glibc-malloc-defaults]

Update rows use batch 256, observation 50 and action 4 (the hover task's sizes), two critics and one
actor step per critic step for every implementation, so they do the same arithmetic. Peers: SB3's
`SAC.train` in bench/.venv-sb3 (installed by this script only), and a CleanRL-style update written out
below (two separate critics, plain Adam), in this process. The robo-rl rows use `robo_rl.agents.sac`
with the same sizes, compiled (the training default, `agent.compile`) and eager, plus SERL's defaults
(10 critics, LayerNorm, 8 critic steps per actor step, compiled) per critic step. Every implementation is
measured once per round, `--rounds` rounds in turn, and the table gives medians: this shared 2-core
machine drifts by 20-50% within minutes, so each "vs SB3" ratio is the median of ratios taken within one
round. Every implementation runs with glibc malloc keeping freed memory for reuse, as robo-rl's training
process does (`robo_rl.allocator`; SB3's process through the equivalent environment variables);
`--glibc-malloc-defaults` leaves glibc's defaults everywhere. Hover rows: time to the first evaluation at >= 95% success, and the best evaluated policy (the one
the run exports) re-evaluated on 100 held-out episodes (another seed than the run's evaluations, which
chose it). Writes bench/results/train_speed.json. Run on an idle machine.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from peers import BenchArgumentParser, Positive, Seed, machine_line, peer_python, write_results

if TYPE_CHECKING:
    from robo_rl.buffers import Batch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))  # robo_rl, imported where used (the SB3-only rows do not need it)
SB3_VENV = ROOT / ".venv-sb3"
SB3_REQUIREMENTS = ["torch==2.13.0", "stable-baselines3==2.9.2", "gymnasium"]
OBS, ACT, BATCH = 50, 4, 256
HELD_OUT_SEED = 777  # episodes that no training run's evaluation (seed 12345) sees


def rate(step: Callable[[], None], seconds: float) -> float:
    """Calls per second of `step` over `seconds`, after a warm-up."""
    for _ in range(10):
        step()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - start)


def batch(n: int) -> Batch:
    """Random transitions of the hover task's sizes."""
    from robo_rl.buffers import Batch

    return Batch(obs=torch.randn(n, OBS), action=torch.rand(n, ACT), reward=torch.randn(n),
                 next_obs=torch.randn(n, OBS), terminated=torch.zeros(n))


def robo_rl_updates(hidden: tuple[int, int], serl_defaults: bool = False, compile: bool = True
                    ) -> Callable[[float], float]:
    """A meter of robo-rl SAC critic steps/s (with its actor and temperature steps) over given seconds.
    Compiled (the training default), the graph is built here and its compile time printed."""
    from robo_rl.agents.sac import SAC, SACConfig

    if serl_defaults:
        config = SACConfig(actor_hidden=hidden, critic_hidden=hidden, batch_size=BATCH, compile=compile)
    else:
        config = SACConfig(actor_hidden=hidden, critic_hidden=hidden, activation="relu", critic_layer_norm=False,
                           num_critics=2, critic_updates_per_actor_update=1, batch_size=BATCH, compile=compile)
    agent = SAC(OBS, torch.zeros(ACT), torch.ones(ACT), config)
    data = batch(BATCH * config.critic_updates_per_actor_update)
    if compile:
        start = time.perf_counter()
        agent.update(data)
        print(f"  compiled the {'SERL-defaults ' if serl_defaults else ''}update in {time.perf_counter() - start:.1f} s",
              flush=True)
    return lambda seconds: rate(lambda: agent.update(data), seconds) * config.critic_updates_per_actor_update


def cleanrl_updates(hidden: tuple[int, int]) -> Callable[[float], float]:
    """A meter of a CleanRL-style SAC update's steps/s (separate Q networks, Adam, autotuned alpha)."""
    def q_net() -> nn.Module:
        return nn.Sequential(nn.Linear(OBS + ACT, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], hidden[1]), nn.ReLU(),
                             nn.Linear(hidden[1], 1))

    class Actor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(OBS, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], hidden[1]), nn.ReLU())
            self.mean, self.log_std = nn.Linear(hidden[1], ACT), nn.Linear(hidden[1], ACT)

        def sample(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.trunk(x)
            mean, log_std = self.mean(h), torch.tanh(self.log_std(h))
            log_std = -5 + 3.5 * (log_std + 1)
            normal = torch.distributions.Normal(mean, log_std.exp())
            u = normal.rsample()
            a = torch.tanh(u)
            return a * 0.5 + 0.5, (normal.log_prob(u) - torch.log(0.5 * (1 - a.pow(2)) + 1e-6)).sum(1)

    actor, q1, q2 = Actor(), q_net(), q_net()
    q1_target, q2_target = q_net(), q_net()
    q1_target.load_state_dict(q1.state_dict())
    q2_target.load_state_dict(q2.state_dict())
    q_optimizer = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=3e-4)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-4)
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha_optimizer = torch.optim.Adam([log_alpha], lr=3e-4)
    data = batch(BATCH)

    def update() -> None:
        alpha = log_alpha.exp().item()
        with torch.no_grad():
            next_action, next_log_pi = actor.sample(data.next_obs)
            x = torch.cat([data.next_obs, next_action], 1)
            target_q = torch.min(q1_target(x), q2_target(x)).view(-1) - alpha * next_log_pi
            target = data.reward + 0.99 * (1 - data.terminated) * target_q
        x = torch.cat([data.obs, data.action], 1)
        q_loss = F.mse_loss(q1(x).view(-1), target) + F.mse_loss(q2(x).view(-1), target)
        q_optimizer.zero_grad()
        q_loss.backward()
        q_optimizer.step()
        action, log_pi = actor.sample(data.obs)
        x = torch.cat([data.obs, action], 1)
        actor_loss = (alpha * log_pi - torch.min(q1(x), q2(x)).view(-1)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        alpha_loss = (-log_alpha.exp() * (log_pi.detach() - ACT)).mean()
        alpha_optimizer.zero_grad()
        alpha_loss.backward()
        alpha_optimizer.step()
        with torch.no_grad():
            for net, target_net in ((q1, q1_target), (q2, q2_target)):
                for p, tp in zip(net.parameters(), target_net.parameters()):
                    tp.data.mul_(0.995).add_(0.005 * p.data)

    return lambda seconds: rate(update, seconds)


def sb3_updates(hidden: tuple[int, int], seconds: float, malloc_env: dict[str, str]) -> dict[str, Any]:
    """Stable-Baselines3's SAC.train, in its own venv (with `malloc_env` added to its environment)."""
    python = peer_python(SB3_VENV, SB3_REQUIREMENTS, probe="stable_baselines3")
    out = subprocess.run([str(python), str(ROOT / "sb3_peer.py"), "--hidden", *map(str, hidden), "--batch", str(BATCH),
                          "--seconds", str(seconds), "--threads", str(torch.get_num_threads())],
                         check=True, stdout=subprocess.PIPE, text=True, env={**os.environ, **malloc_env}).stdout
    return json.loads(out.strip().splitlines()[-1])


def hover_training(seed: int) -> dict[str, Any]:
    """The default training run (`python -m robo_rl.train seed=<seed>`), timed end to end, evaluations included."""
    from robo_rl.evaluate import evaluate_run

    out_dir = ROOT / "results" / f"hover_run_seed{seed}"
    shutil.rmtree(out_dir, ignore_errors=True)  # the previous measurement's run: train refuses to overwrite it
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "robo_rl.train", f"hydra.run.dir={out_dir}", f"seed={seed}",
                    "logging.progress_bar=false"], check=True, cwd=ROOT.parent)
    summary = json.loads((out_dir / "summary.json").read_text())
    reached = next((h for h in summary["history"] if h["success_rate"] >= 0.95), None)
    best = max(summary["history"], key=lambda h: (h["success_rate"], h["mean_return"]))
    process_seconds = time.perf_counter() - start
    held_out = evaluate_run(out_dir, "best", episodes=100, seed=HELD_OUT_SEED)
    # the run's resumable checkpoints hold its replay buffer (0.3-0.5 GB each); best_policy.pt, the summary and
    # the TensorBoard logs stay
    shutil.rmtree(out_dir / "checkpoints", ignore_errors=True)
    return {"seed": seed, "process_seconds": process_seconds, "train_seconds": summary["wall_seconds"],
            "final": summary["final"], "best": best, "first_eval_at_95_percent": reached,
            "best_held_out": {k: held_out[k] for k in ("success_rate", "mean_return", "episodes", "seed")}}


def main() -> None:
    """Measure, print the table, write JSON."""
    parser = BenchArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, action=Positive, default=2.0, help="per implementation and round")
    parser.add_argument("--rounds", type=int, action=Positive, default=3)
    parser.add_argument("--skip-hover", action="store_true", help="only the update rows")
    parser.add_argument("--skip-updates", action="store_true", help="only the hover rows")
    parser.add_argument("--seeds", type=int, action=Seed, nargs="+", default=[0], help="training seeds of the hover rows")
    parser.add_argument("--glibc-malloc-defaults", action="store_true",
                        help="do not have glibc keep freed memory (in any implementation's process)")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    from robo_rl.allocator import keep_freed_memory, keep_freed_memory_environment

    malloc_env = {} if args.glibc_malloc_defaults else keep_freed_memory_environment()
    if not args.glibc_malloc_defaults:
        keep_freed_memory()
    torch.set_num_threads(2)
    rows = []
    for hidden in () if args.skip_updates else ((64, 64), (256, 256)):
        meters = {"robo-rl SAC (2 critics, compiled)": robo_rl_updates(hidden),
                  "robo-rl SAC (2 critics, eager)": robo_rl_updates(hidden, compile=False),
                  "robo-rl SAC, SERL defaults (per critic step)": robo_rl_updates(hidden, serl_defaults=True),
                  "CleanRL-style SAC": cleanrl_updates(hidden)}
        rounds: list[dict[str, float]] = []
        for index in range(args.rounds):
            print(f"{'x'.join(map(str, hidden))}: round {index + 1}/{args.rounds}", flush=True)
            sb3 = sb3_updates(hidden, args.seconds, malloc_env)
            measured = {name: meter(args.seconds) for name, meter in meters.items()}
            rounds.append({f"Stable-Baselines3 {sb3['sb3_version']} SAC": sb3["updates_per_s"], **measured})
        sb3_name = next(name for name in rounds[0] if name.startswith("Stable"))
        for name in rounds[0]:
            rates = [r[name] for r in rounds]
            rows.append({"implementation": name, "hidden": hidden, "updates_per_s": statistics.median(rates),
                         "updates_per_s_rounds": rates,
                         "vs_sb3": statistics.median(r[name] / r[sb3_name] for r in rounds),
                         "vs_sb3_rounds": [r[name] / r[sb3_name] for r in rounds]})
    if rows:
        print(f"\nmedians of {args.rounds} rounds; vs SB3: the median of ratios within a round (range in brackets)")
        print(f"{'implementation':48s} {'hidden':>10s} {'updates/s':>10s} {'vs SB3':>7s}")
    for row in rows:
        spread = f"[{min(row['vs_sb3_rounds']):.2f}-{max(row['vs_sb3_rounds']):.2f}]"
        print(f"{row['implementation']:48s} {'x'.join(map(str, row['hidden'])):>10s} {row['updates_per_s']:10.0f} "
              f"{row['vs_sb3']:6.2f}x {spread}")
    result: dict[str, Any] = {"machine": {"torch_threads": torch.get_num_threads(), "torch": torch.__version__},
                              "batch": BATCH, "rounds": args.rounds, "glibc_malloc_defaults": args.glibc_malloc_defaults,
                              "rows": rows}
    if not args.skip_hover:
        result["hover"] = [hover_training(seed) for seed in args.seeds]
        print(f"\n{'seed':>4s} {'end to end s':>13s} {'95% first at':>13s} {'best success':>13s} {'at env steps':>13s} "
              f"{'held out':>9s}")
        for hover in result["hover"]:
            reached = hover["first_eval_at_95_percent"]
            print(f"{hover['seed']:4d} {hover['process_seconds']:13.1f} "
                  + (f"{reached['wall_seconds']:7.1f}s/{reached['env_steps'] // 1000:3d}k" if reached else f"{'not reached':>13s}")
                  + f" {100 * hover['best']['success_rate']:12.0f}% {hover['best']['env_steps']:13d} "
                  f"{100 * hover['best_held_out']['success_rate']:8.0f}%")
    write_results(ROOT / "results" / "train_speed.json", result)


if __name__ == "__main__":
    main()
