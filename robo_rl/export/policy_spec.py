"""What a deployment target needs of a trained actor: its layers as arrays, plus the wrapping maths.

`PolicySpec.from_actor` reads the deterministic path of a `TanhGaussianActor` (hidden Linear layers,
optional LayerNorm, activation, the mean head, tanh squash and affine scaling to the action range).
`DeterministicPolicy` is the same computation as a torch module, with observation normalization in
front and the clamp to the action range behind: what ONNX exports and what every target must reproduce.
`ImagePolicy` is its counterpart for camera observations: the image encoder in front of the actor.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence, Union

import numpy as np
import torch
from torch import nn

from robo_rl.agents.encoders import ImageEncoder
from robo_rl.agents.networks import ACTIVATIONS, TanhGaussianActor
from robo_rl.observations import STATE

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, used by the actor's optional LayerNorm


@dataclasses.dataclass
class DenseLayer:
    """y = W x + b, then (hidden layers only) LayerNorm if `norm_weight` is set, then the activation."""

    weight: np.ndarray  # (out, in) float32
    bias: np.ndarray  # (out,) float32
    norm_weight: np.ndarray | None = None  # (out,) LayerNorm scale, None without LayerNorm
    norm_bias: np.ndarray | None = None


@dataclasses.dataclass
class PolicySpec:
    """A feed-forward policy: obs -> normalize -> hidden layers -> output layer -> tanh -> scale -> clamp."""

    layers: list[DenseLayer]  # hidden layers then the output (mean) layer
    activation: str  # after every hidden layer; one of robo_rl.agents.networks.ACTIVATIONS
    obs_mean: np.ndarray  # (obs,) normalized obs = (obs - mean) / std
    obs_std: np.ndarray
    action_low: np.ndarray  # (act,)
    action_high: np.ndarray
    safe_action: np.ndarray  # (act,) what the targets output when the observation is not finite

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} has no exporter; available: {', '.join(ACTIVATIONS)}")
        for previous, layer in zip(self.layers, self.layers[1:]):
            if layer.weight.shape[1] != previous.weight.shape[0]:
                raise ValueError("consecutive layers do not chain: "
                                 f"{previous.weight.shape} then {layer.weight.shape}")
        if not np.all(self.obs_std > 0):
            raise ValueError("obs_std must be > 0 everywhere")
        if np.shape(self.safe_action) != np.shape(self.action_low):
            raise ValueError(f"safe_action has {np.size(self.safe_action)} values, the policy {np.size(self.action_low)} "
                             "actions: give one value per action")
        if not np.all(self.action_low <= self.safe_action) or not np.all(self.safe_action <= self.action_high):
            raise ValueError(f"safe_action {self.safe_action} lies outside the action range")

    @property
    def obs_size(self) -> int:
        """Observation length."""
        return int(self.layers[0].weight.shape[1])

    @property
    def action_size(self) -> int:
        """Action length."""
        return int(self.layers[-1].weight.shape[0])

    @property
    def hidden_sizes(self) -> list[int]:
        """Widths of the hidden layers."""
        return [int(layer.weight.shape[0]) for layer in self.layers[:-1]]

    @property
    def layer_norm(self) -> bool:
        """Whether the hidden layers are followed by LayerNorm."""
        return self.layers[0].norm_weight is not None

    @property
    def parameter_count(self) -> int:
        """Weights, biases and LayerNorm parameters."""
        return sum(a.size for layer in self.layers for a in dataclasses.astuple(layer) if a is not None)

    @classmethod
    def from_actor(cls, actor: TanhGaussianActor, activation: str, obs_mean: Sequence[float] | None = None,
                   obs_std: Sequence[float] | None = None, safe_action: Sequence[float] | None = None) -> "PolicySpec":
        """Read the deterministic path of `actor` (trained with `activation`).

        obs_mean/obs_std: normalization the actor expects in front (default: none, mean 0 and std 1).
        safe_action: output for a non-finite observation (default: the middle of the action range).
        """
        def array(t: torch.Tensor) -> np.ndarray:
            return t.detach().cpu().numpy().astype(np.float32).copy()

        modules = list(actor.trunk)
        linears = [m for m in modules if isinstance(m, nn.Linear)]
        norms = [m for m in modules if isinstance(m, nn.LayerNorm)]
        if norms and len(norms) != len(linears):
            raise ValueError("LayerNorm must follow every hidden layer or none")
        layers = [DenseLayer(array(lin.weight), array(lin.bias),
                             array(norms[i].weight) if norms else None, array(norms[i].bias) if norms else None)
                  for i, lin in enumerate(linears)]
        layers.append(DenseLayer(array(actor.mean.weight), array(actor.mean.bias)))
        low = array(actor.action_bias - actor.action_scale)
        high = array(actor.action_bias + actor.action_scale)
        n = layers[0].weight.shape[1]
        return cls(
            layers=layers, activation=activation,
            obs_mean=np.zeros(n, np.float32) if obs_mean is None else np.asarray(obs_mean, np.float32),
            obs_std=np.ones(n, np.float32) if obs_std is None else np.asarray(obs_std, np.float32),
            action_low=low, action_high=high,
            safe_action=(0.5 * (low + high)) if safe_action is None else np.asarray(safe_action, np.float32),
        )

    def to_json(self) -> dict[str, Any]:
        """The network description for policy.json (shapes, activation, normalization; not the weights)."""
        return {
            "type": "mlp",
            "layers": [{"in": int(layer.weight.shape[1]), "out": int(layer.weight.shape[0]),
                        "activation": self.activation if i < len(self.layers) - 1 else "tanh_then_scale",
                        "layer_norm": layer.norm_weight is not None}
                       for i, layer in enumerate(self.layers)],
            "hidden_activation": self.activation,
            "layer_norm_eps": LAYER_NORM_EPS,
            "parameters": self.parameter_count,
            "observation_normalization": {"mean": self.obs_mean.tolist(), "std": self.obs_std.tolist(),
                                          "formula": "(obs - mean) / std"},
            "output": "action = clamp(low + (tanh(y) + 1) / 2 * (high - low), low, high)",
        }


class DeterministicPolicy(nn.Module):
    """The exported computation as a torch module: normalize, the actor's mean action, clamp to the range.
    ONNX input "observation" (B, obs)."""

    def __init__(self, actor: TanhGaussianActor, spec: PolicySpec):
        super().__init__()
        self.actor = actor
        self.register_buffer("obs_mean", torch.as_tensor(spec.obs_mean))
        self.register_buffer("obs_std", torch.as_tensor(spec.obs_std))
        self.register_buffer("low", torch.as_tensor(spec.action_low))
        self.register_buffer("high", torch.as_tensor(spec.action_high))

    @property
    def input_names(self) -> list[str]:
        """The ONNX graph's inputs, in `forward`'s order."""
        return ["observation"]

    def inputs(self, observations: np.ndarray) -> tuple[torch.Tensor, ...]:
        """`forward`'s arguments for a numpy batch of observations."""
        return (torch.as_tensor(np.asarray(observations), dtype=torch.float32),)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Actions (B, act) for observations (B, obs)."""
        action = self.actor.deterministic((observation - self.obs_mean) / self.obs_std)
        return torch.minimum(torch.maximum(action, self.low), self.high)


class ImagePolicy(nn.Module):
    """The exported computation of a policy on camera images: the image encoder's features of the state and
    every camera's uint8 (B, H, W, 3) image, the actor's mean action, clamp to the range. ONNX inputs "state"
    (B, state) and one per camera, named after it (sorted, as the encoder orders them)."""

    def __init__(self, encoder: ImageEncoder, actor: TanhGaussianActor, spec: PolicySpec):
        super().__init__()
        self.encoder, self.actor = encoder, actor
        self.register_buffer("low", torch.as_tensor(spec.action_low))
        self.register_buffer("high", torch.as_tensor(spec.action_high))

    @property
    def input_names(self) -> list[str]:
        """The ONNX graph's inputs, in `forward`'s order."""
        return [STATE, *self.encoder.names]

    def inputs(self, observations: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
        """`forward`'s arguments for a numpy batch of dict observations."""
        return (torch.as_tensor(np.asarray(observations[STATE]), dtype=torch.float32),
                *(torch.as_tensor(np.asarray(observations[name]), dtype=torch.uint8) for name in self.encoder.names))

    def forward(self, state: torch.Tensor, *images: torch.Tensor) -> torch.Tensor:
        """Actions (B, act) for states (B, state) and the cameras' images (B, H, W, 3) in `input_names` order."""
        features = self.encoder({STATE: state, **dict(zip(self.encoder.names, images))})
        action = self.actor.deterministic(features)
        return torch.minimum(torch.maximum(action, self.low), self.high)

    def encoder_json(self) -> dict[str, Any]:
        """The encoder's description for policy.json's `network`."""
        convs = [m for m in self.encoder.convs[self.encoder.names[0]] if isinstance(m, nn.Conv2d)]
        return {"cameras": list(self.encoder.names), "input": "uint8 (B, H, W, 3) RGB, as x / 255 - 0.5",
                "convolutions": [{"out": m.out_channels, "kernel": list(m.kernel_size), "stride": list(m.stride),
                                  "activation": "relu"} for m in convs],
                "features_per_camera": int(self.encoder.projections[self.encoder.names[0]][0].out_features),
                "projection": "linear, layer_norm, tanh",
                "then": "the cameras' features (in camera order) and the state, concatenated, into the actor",
                "parameters": int(sum(p.numel() for p in self.encoder.parameters()))}


Policy = Union[DeterministicPolicy, ImagePolicy]


def policy_actions(policy: Policy, observations: Any) -> np.ndarray:
    """The policy's actions (B, act) for a numpy batch of observations (vectors, or dicts with images)."""
    with torch.no_grad():
        return policy(*policy.inputs(observations)).numpy()
