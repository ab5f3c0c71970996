"""Networks for SAC: an MLP, a critic ensemble evaluated as batched matrix products, a tanh-Gaussian actor.

Activations are limited to ones the C exporter implements (`ACTIVATIONS`); relu, relu6, hardtanh and
leaky_relu cost a compare per unit on a microcontroller, tanh and silu an exponential.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "relu6": nn.ReLU6,
    "hardtanh": nn.Hardtanh,
    "leaky_relu": nn.LeakyReLU,  # negative slope 0.01
    "elu": nn.ELU,
    "silu": nn.SiLU,
}


def activation(name: str) -> nn.Module:
    """The activation module called `name` (one of `ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; available: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


def mlp(sizes: Sequence[int], act: str, layer_norm: bool = False, activate_output: bool = False) -> nn.Sequential:
    """Linear layers between `sizes`, each hidden one (and the output one if asked) followed by
    [LayerNorm] and the activation."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2 or activate_output:
            if layer_norm:
                layers.append(nn.LayerNorm(fan_out))
            layers.append(activation(act))
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """E independent linear layers applied to inputs (E, B, in) with one batched matmul."""

    def __init__(self, ensemble: int, fan_in: int, fan_out: int):
        super().__init__()
        bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default initialization, per member
        self.weight = nn.Parameter(torch.empty(ensemble, fan_in, fan_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(ensemble, 1, fan_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(E, B, in) -> (E, B, out)."""
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last axis with per-member affine parameters, for (E, B, features)."""

    def __init__(self, ensemble: int, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ensemble, 1, features))
        self.bias = nn.Parameter(torch.zeros(ensemble, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize each member's features, then scale and shift."""
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class CriticEnsemble(nn.Module):
    """E Q-functions Q_e(s, a), all evaluated in one pass: forward returns (E, B)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], act: str, ensemble: int,
                 layer_norm: bool = True):
        super().__init__()
        self.ensemble = ensemble
        sizes = [obs_dim + action_dim, *hidden, 1]
        layers: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(EnsembleLinear(ensemble, fan_in, fan_out))
            if i < len(sizes) - 2:
                if layer_norm:
                    layers.append(EnsembleLayerNorm(ensemble, fan_out))
                layers.append(activation(act))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q-values (E, B) of a batch of (obs (B, obs_dim), action (B, action_dim))."""
        x = torch.cat([obs, action], -1).expand(self.ensemble, -1, -1)
        return self.net(x).squeeze(-1)


class TanhGaussianActor(nn.Module):
    """pi(a | s): a Gaussian in pre-squash space, squashed by tanh and scaled to [low, high]."""

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], act: str,
                 action_low: torch.Tensor, action_high: torch.Tensor, layer_norm: bool = False):
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden], act, layer_norm, activate_output=True)
        self.mean = nn.Linear(hidden[-1], action_dim)
        self.log_std = nn.Linear(hidden[-1], action_dim)
        self.register_buffer("action_scale", (action_high - action_low) / 2.0)
        self.register_buffer("action_bias", (action_high + action_low) / 2.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log standard deviation (B, action_dim) of the pre-squash Gaussian."""
        h = self.trunk(obs)
        log_std = torch.tanh(self.log_std(h))
        log_std = self.LOG_STD_MIN + 0.5 * (self.LOG_STD_MAX - self.LOG_STD_MIN) * (log_std + 1.0)
        return self.mean(h), log_std

    def sample(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action (B, action_dim) in [low, high] and its log-probability (B,).

        noise: the standard normal draw (B, action_dim) to use; None draws one."""
        mean, log_std = self(obs)
        return self.squash(mean, log_std, torch.randn_like(mean) if noise is None else noise)

    def squash(self, mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The action mean + std * noise squashed into [low, high], and its log-probability (B,)."""
        std = log_std.exp()
        u = mean + std * noise
        squashed = torch.tanh(u)
        log_prob = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
        # change of variables through tanh (numerically stable form) and the affine scaling
        log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        log_prob = log_prob - torch.log(self.action_scale).sum()
        return squashed * self.action_scale + self.action_bias, log_prob

    @torch.no_grad()
    def center_on(self, action: torch.Tensor) -> None:
        """Make `action` the initial mean action: the output bias is set to its pre-squash value."""
        squashed = ((torch.as_tensor(action, dtype=torch.float32) - self.action_bias.cpu()) / self.action_scale.cpu())
        self.mean.bias.copy_(torch.atanh(squashed.clamp(-0.999, 0.999)))

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action tanh(mu) scaled to [low, high]: what the export runs."""
        return self.mean_action(self(obs)[0])

    def mean_action(self, mean: torch.Tensor) -> torch.Tensor:
        """The action of the pre-squash mean: tanh(mean) scaled to [low, high]."""
        return torch.tanh(mean) * self.action_scale + self.action_bias
