"""Image SAC update speed: robo-rl's update on camera observations next to a DrQ-style reference written out
below with autograd and torch.optim (no torchvision or kornia: the shift is F.pad plus a crop per image, as
DrQ's own code does it), in one run.

    .venv/bin/python bench/image_sac_speed.py [--seconds 3] [--rounds 3] [--sizes 64 128]

Both sides do the same arithmetic per critic step: two cameras, per camera the encoder of
configs/agent/sac.yaml (3x3 convolutions of 16, 32, 32, 32 channels, strides 2, 2, 2, 1, a projection to 50
features with LayerNorm and tanh), the 7-number state, two 256x256 critics with LayerNorm, batch 128, the
encoder run with gradients on the observation and without on the next one, random shifts of 4 px on both;
one actor step per two critic steps (configs/experiment/pick_cube_pixels.yaml). Updates/s count actor
updates (each with its two critic steps). Medians over rounds; run on an idle machine. Writes
bench/results/image_sac_speed.json.
"""

from __future__ import annotations

import argparse
import copy
import statistics
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from peers import BenchArgumentParser, Positive, Seed, machine_line, results_file, write_results
from sim_speed import measure

ROOT = Path(__file__).resolve().parent
BATCH, STATE, ACTION, PAD = 128, 7, 4, 4
CAMERAS = ("front", "wrist")
MIN_SIZE = 31  # the smallest image side the encoder's 3x3 convolutions (strides 2, 2, 2, 1) leave a pixel of


def observations(size: int) -> dict[str, torch.Tensor]:
    """A batch of observations: the state and two uint8 camera images."""
    generator = torch.Generator().manual_seed(0)
    return {"state": torch.randn(BATCH, STATE, generator=generator),
            **{name: torch.randint(0, 256, (BATCH, size, size, 3), dtype=torch.uint8, generator=generator)
               for name in CAMERAS}}


def robo_rl_update(size: int) -> Callable[[], None]:
    """robo_rl.agents.sac.SAC.update with the pixel recipe's settings."""
    from robo_rl.agents.sac import SAC, SACConfig
    from robo_rl.buffers import Batch

    config = SACConfig(num_critics=2, critic_subsample=2, critic_updates_per_actor_update=2, batch_size=BATCH,
                       compile=False)
    agent = SAC(STATE, -np.ones(ACTION), np.ones(ACTION), config, images={n: (size, size, 3) for n in CAMERAS})
    obs = observations(size)
    both = {k: torch.cat([v, v]) for k, v in obs.items()}
    batch = Batch(obs=both, action=torch.rand(2 * BATCH, ACTION) * 2 - 1, reward=torch.randn(2 * BATCH),
                  next_obs=both, terminated=torch.zeros(2 * BATCH))
    return lambda: agent.update(batch)


def shift(images: torch.Tensor) -> torch.Tensor:
    """DrQ's random shift as its reference code does it: replicate padding, then a random crop per image."""
    x = F.pad(images.permute(0, 3, 1, 2).float(), (PAD, PAD, PAD, PAD), mode="replicate")
    size = images.shape[1]
    out = torch.empty(images.shape[0], 3, size, size)
    offsets = torch.randint(0, 2 * PAD + 1, (images.shape[0], 2))
    for i, (dy, dx) in enumerate(offsets.tolist()):
        out[i] = x[i, :, dy:dy + size, dx:dx + size]
    return out


class Encoder(nn.Module):
    """The same encoder as robo_rl's, written out."""

    def __init__(self, size: int):
        super().__init__()
        self.convs = nn.ModuleDict({name: nn.Sequential(
            nn.Conv2d(3, 16, 3, 2), nn.ReLU(), nn.Conv2d(16, 32, 3, 2), nn.ReLU(), nn.Conv2d(32, 32, 3, 2), nn.ReLU(),
            nn.Conv2d(32, 32, 3, 1), nn.ReLU(), nn.Flatten()) for name in CAMERAS})
        flat = self.convs["front"](torch.zeros(1, 3, size, size)).shape[1]
        self.heads = nn.ModuleDict({name: nn.Sequential(nn.Linear(flat, 50), nn.LayerNorm(50), nn.Tanh())
                                    for name in CAMERAS})
        self.out_dim = 50 * len(CAMERAS) + STATE

    def forward(self, images: dict[str, torch.Tensor], state: torch.Tensor) -> torch.Tensor:
        parts = [self.heads[n](self.convs[n](images[n] / 255.0 - 0.5)) for n in CAMERAS]
        return torch.cat([*parts, state], -1)


def reference_update(size: int) -> Callable[[], None]:
    """A DrQ-style SAC update with autograd and torch.optim: two critic steps, then one actor step."""
    encoder = Encoder(size)

    def q_net() -> nn.Module:
        return nn.Sequential(nn.Linear(encoder.out_dim + ACTION, 256), nn.LayerNorm(256), nn.Tanh(),
                             nn.Linear(256, 256), nn.LayerNorm(256), nn.Tanh(), nn.Linear(256, 1))

    critics = nn.ModuleList([q_net(), q_net()])
    targets = copy.deepcopy(critics).requires_grad_(False)
    trunk = nn.Sequential(nn.Linear(encoder.out_dim, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
    mean, log_std = nn.Linear(256, ACTION), nn.Linear(256, ACTION)
    actor = nn.ModuleList([trunk, mean, log_std])
    log_alpha = torch.zeros((), requires_grad=True)
    critic_opt = torch.optim.Adam([*critics.parameters(), *encoder.parameters()], lr=3e-4)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)
    obs = observations(size)
    action, reward, done = torch.rand(BATCH, ACTION) * 2 - 1, torch.randn(BATCH), torch.zeros(BATCH)

    def sample(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = trunk(features)
        mu, log_sigma = mean(h), torch.tanh(log_std(h)) * 3.5 - 1.5
        normal = torch.distributions.Normal(mu, log_sigma.exp())
        u = normal.rsample()
        a = torch.tanh(u)
        return a, (normal.log_prob(u) - torch.log(1 - a.pow(2) + 1e-6)).sum(-1)

    def critic_step() -> torch.Tensor:
        images = {n: shift(obs[n]) for n in CAMERAS}
        next_images = {n: shift(obs[n]) for n in CAMERAS}
        with torch.no_grad():
            next_features = encoder(next_images, obs["state"])
            next_action, next_log_prob = sample(next_features)
            x = torch.cat([next_features, next_action], -1)
            next_q = torch.min(targets[0](x), targets[1](x)).squeeze(-1) - log_alpha.exp() * next_log_prob
            target = reward + 0.99 * (1 - done) * next_q
        features = encoder(images, obs["state"])
        x = torch.cat([features, action], -1)
        loss = sum(F.mse_loss(q(x).squeeze(-1), target) for q in critics)
        critic_opt.zero_grad()
        loss.backward()
        critic_opt.step()
        with torch.no_grad():
            for p, tp in zip(critics.parameters(), targets.parameters()):
                tp.lerp_(p, 0.005)
        return features.detach()

    def update() -> None:
        critic_step()
        features = critic_step()
        a, log_prob = sample(features)
        x = torch.cat([features, a], -1)
        q = torch.stack([c(x) for c in critics]).mean(0).squeeze(-1)
        actor_loss = (log_alpha.exp().detach() * log_prob - q).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
        alpha_loss = -(log_alpha.exp() * (log_prob.detach() - ACTION)).mean()
        alpha_opt.zero_grad()
        alpha_loss.backward()
        alpha_opt.step()

    return update


def main() -> None:
    """Measure, print the table, write JSON."""
    parser = BenchArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, action=Positive, default=3.0)
    parser.add_argument("--rounds", type=int, action=Positive, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help=f"image sides, {MIN_SIZE} or more")
    parser.add_argument("--threads", type=int, action=Positive, default=2)
    parser.add_argument("--json", type=results_file, default=ROOT / "results" / "image_sac_speed.json")
    args = parser.parse_args()
    if min(args.sizes) < MIN_SIZE:
        parser.error(f"--sizes must each be {MIN_SIZE} or more (the encoder's convolutions leave nothing of a "
                     f"smaller image), got {' '.join(map(str, args.sizes))}")
    torch.set_num_threads(args.threads)
    print(machine_line(), flush=True)
    rows = []
    for size in args.sizes:
        updates = {"robo-rl SAC.update (DrQ shift by indexing)": robo_rl_update(size),
                   "reference: autograd + torch.optim, F.pad and a crop per image": reference_update(size)}
        rates: dict[str, list[float]] = {name: [] for name in updates}
        for round_ in range(args.rounds):
            for name, update in updates.items():
                rates[name].append(measure(update, 1, args.seconds, 1))
        for name, values in rates.items():
            rows.append({"size": size, "implementation": name, "updates_per_s": statistics.median(values),
                         "rounds": values})
    print(f"\n{'images':>8s}  {'implementation':62s} {'updates/s':>10s} {'vs reference':>12s}")
    for row in rows:
        reference = next(r for r in rows if r["size"] == row["size"] and r["implementation"].startswith("reference"))
        print(f"{row['size']:>4d}x{row['size']:<3d}  {row['implementation']:62s} {row['updates_per_s']:10.2f} "
              f"{row['updates_per_s'] / reference['updates_per_s']:11.2f}x")
    write_results(args.json, {"batch": BATCH, "cameras": list(CAMERAS), "threads": args.threads, "rows": rows})


if __name__ == "__main__":
    main()
