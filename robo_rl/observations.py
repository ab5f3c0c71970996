"""Observations as the agents, buffers and collectors handle them: one float vector per env (state-based
envs), or a dict of a float "state" vector and uint8 camera images (height, width, 3) by camera name (the arm
envs with cameras). Every operation on a batch of observations (rows, selection, conversion) is here, so
that the rest of the package treats both kinds alike.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, Union

import gymnasium as gym
import numpy as np
import torch

Observation = Union[torch.Tensor, dict[str, torch.Tensor]]
STATE = "state"  # the vector part of a dict observation


def image_shapes(space: gym.Space) -> dict[str, tuple[int, int, int]]:
    """The camera images of an env's single observation space by name, (height, width, 3); {} for a vector
    space."""
    if not isinstance(space, gym.spaces.Dict):
        return {}
    return {name: tuple(int(n) for n in sub.shape) for name, sub in space.spaces.items() if name != STATE}


def state_size(space: gym.Space) -> int:
    """The size of the float vector of an env's single observation space (its "state" for a dict space)."""
    return int((space[STATE] if isinstance(space, gym.spaces.Dict) else space).shape[0])


def to_tensor(obs: Any, device: torch.device) -> Observation:
    """A batch of observations as tensors on `device`: float32 vectors, uint8 images kept uint8."""
    if isinstance(obs, Mapping):
        return {k: torch.as_tensor(np.asarray(v) if not isinstance(v, torch.Tensor) else v, device=device,
                                   dtype=torch.float32 if k == STATE else torch.uint8) for k, v in obs.items()}
    return torch.as_tensor(obs, dtype=torch.float32, device=device)


def to_numpy(obs: Observation) -> Any:
    """A batch of observations as numpy arrays (what an env or a scripted expert takes)."""
    if isinstance(obs, dict):
        return {k: v.detach().cpu().numpy() for k, v in obs.items()}
    return obs.detach().cpu().numpy()


def state_of(obs: Any) -> Any:
    """The vector part of an observation batch."""
    return obs[STATE] if isinstance(obs, Mapping) else obs


def apply(function: Callable[[torch.Tensor], torch.Tensor], obs: Observation) -> Observation:
    """`function` applied to every tensor of an observation batch."""
    return {k: function(v) for k, v in obs.items()} if isinstance(obs, dict) else function(obs)


def where(mask: torch.Tensor, a: Observation, b: Observation) -> Observation:
    """Rows of `a` where `mask` (B,) is true, else of `b`."""
    def pick(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(mask.reshape(-1, *([1] * (x.dim() - 1))), x, y)

    if isinstance(a, dict):
        return {k: pick(a[k], b[k]) for k in a}
    return pick(a, b)


def cat(batches: Sequence[Observation]) -> Observation:
    """Observation batches one after another."""
    if isinstance(batches[0], dict):
        return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}
    return torch.cat(list(batches))


def flat(prefix: str, obs: Observation) -> dict[str, torch.Tensor]:
    """An observation batch as flat named tensors: `prefix` for a vector, `prefix.<key>` for a dict's parts."""
    if isinstance(obs, dict):
        return {f"{prefix}.{k}": v for k, v in obs.items()}
    return {prefix: obs}


def unflat(prefix: str, fields: Mapping[str, torch.Tensor]) -> Observation | None:
    """The observation batch that `flat(prefix, ...)` stored in `fields`; None if there is none."""
    if prefix in fields:
        return fields[prefix]
    parts = {k[len(prefix) + 1:]: v for k, v in fields.items() if k.startswith(prefix + ".")}
    return parts or None
