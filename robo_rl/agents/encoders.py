"""Image encoders for SAC on camera observations, as DrQ and SERL build them: per camera a small
convolutional network into a short feature vector (LayerNorm and tanh), the cameras' features concatenated
with the state vector; the critic's loss trains it, the actor reads its output detached. `random_shift` is
DrQ's augmentation: each image moved by a random whole number of pixels, its border repeated.

An encoder can start from a file (`EncoderConfig.pretrained`: a state dict of `ImageEncoder.convs`, e.g. saved
from another run or pretrained elsewhere) and keep its convolutions frozen, as SERL keeps its pretrained
ResNet; nothing is downloaded at run time.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping, Sequence

import torch
from torch import nn

from robo_rl.observations import STATE
from sim.validation import Interval, at_least_zero


@dataclasses.dataclass
class EncoderConfig:
    """The image encoder of an agent on camera observations."""

    channels: Sequence[int] = (16, 32, 32, 32)  # per convolution (3x3 kernels)
    strides: Sequence[int] = (2, 2, 2, 1)  # per convolution
    features: int = 50  # per camera, after the projection (DrQ's feature_dim)
    shift: int = 4  # [px] DrQ's random shift of every image in each update; 0: no augmentation
    pretrained: str | None = None  # a file with the convolutions' weights, which then stay frozen

    def validate(self) -> None:
        """Raise ValueError naming an inconsistent field."""
        if len(self.channels) != len(self.strides) or not self.channels:
            raise ValueError(f"agent.encoder.channels and strides must be equally long and non-empty, got "
                             f"{list(self.channels)} and {list(self.strides)}")
        if self.pretrained is not None and not Path(self.pretrained).is_file():
            raise ValueError(f"agent.encoder.pretrained={self.pretrained} is not a file")


ENCODER_RANGES: dict[str, Interval] = {
    "encoder.channels": Interval(1, 1024), "encoder.strides": Interval(1, 8), "encoder.features": Interval(1, 4096),
    "encoder.shift": at_least_zero(64),
}


def pixels(images: torch.Tensor) -> torch.Tensor:
    """uint8 images (B, H, W, 3) as floats (B, 3, H, W) in [-0.5, 0.5]."""
    return images.permute(0, 3, 1, 2).float().div(255.0).sub(0.5)


def random_shift(images: torch.Tensor, shifts: torch.Tensor, pad: int) -> torch.Tensor:
    """Images (B, H, W, C) each moved by shifts (B, 2) in [0, 2 pad] pixels (row, column) minus `pad`, the
    border repeated (DrQ's augmentation, exact on uint8)."""
    if pad == 0:
        return images
    b, h, w, _ = images.shape
    rows = (torch.arange(h, device=images.device)[None] + shifts[:, :1]).clamp(pad, h + pad - 1) - pad
    cols = (torch.arange(w, device=images.device)[None] + shifts[:, 1:]).clamp(pad, w + pad - 1) - pad
    batch = torch.arange(b, device=images.device)[:, None, None]
    return images[batch, rows[:, :, None], cols[:, None, :]]


def conv_stack(channels: Sequence[int], strides: Sequence[int]) -> nn.Sequential:
    """3x3 convolutions with ReLU, flattened at the end."""
    layers: list[nn.Module] = []
    fan_in = 3
    for fan_out, stride in zip(channels, strides):
        layers += [nn.Conv2d(fan_in, fan_out, 3, stride), nn.ReLU()]
        fan_in = fan_out
    return nn.Sequential(*layers, nn.Flatten())


def flat_size(stack: nn.Sequential, shape: Sequence[int], name: str) -> int:
    """How many features `stack` makes of an image of `shape` (height, width, 3); ValueError naming the camera
    if the image is too small for its convolutions."""
    height, width = int(shape[0]), int(shape[1])
    try:
        with torch.no_grad():
            return int(stack(torch.zeros(1, 3, height, width)).shape[1])
    except RuntimeError as error:
        if "can't be greater than actual input size" not in str(error) and "too small" not in str(error):
            raise  # not the image's size (out of memory for a huge one, say): torch's own error
        raise ValueError(f"camera {name!r}: {height}x{width} images are too small for the encoder's convolutions "
                         "(agent.encoder.channels and strides); use larger images or fewer strided layers") from None


class ImageEncoder(nn.Module):
    """Observations {"state": (B, state_dim), camera: (B, H, W, 3) uint8, ...} -> features (B, out_dim)."""

    def __init__(self, images: Mapping[str, Sequence[int]], state_dim: int, config: EncoderConfig):
        super().__init__()
        self.names = sorted(images)
        self.convs = nn.ModuleDict({name: conv_stack(config.channels, config.strides) for name in self.names})
        self.projections = nn.ModuleDict()
        for name in self.names:
            flat = flat_size(self.convs[name], images[name], name)
            self.projections[name] = nn.Sequential(nn.Linear(flat, config.features), nn.LayerNorm(config.features),
                                                   nn.Tanh())
        self.out_dim = config.features * len(self.names) + state_dim
        if config.pretrained is not None:
            try:
                self.convs.load_state_dict(torch.load(config.pretrained, map_location="cpu", weights_only=True))
            except Exception as error:  # noqa: BLE001 (a file of something else fails in many ways)
                first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
                raise ValueError(f"agent.encoder.pretrained={config.pretrained} is not a state dict of the encoder's "
                                 f"convolutions (ImageEncoder.convs, cameras {self.names}, channels "
                                 f"{list(config.channels)}): {first}") from None
            self.convs.requires_grad_(False)

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The features of a batch of observations."""
        parts = [self.projections[name](self.convs[name](pixels(obs[name]))) for name in self.names]
        return torch.cat([*parts, obs[STATE]], dim=-1)

    def augment(self, obs: Mapping[str, torch.Tensor], shifts: torch.Tensor, pad: int) -> dict[str, torch.Tensor]:
        """`obs` with every camera's images shifted (shifts (cameras, B, 2), one draw per image)."""
        return {**obs, **{name: random_shift(obs[name], shifts[i], pad) for i, name in enumerate(self.names)}}
