"""The learner's current actor on the robot computer, for collecting experience while it trains (an external
actor of a `runner=ray` run, robo_rl_ros.core.learner_link): a tanh-Gaussian policy that samples exploratory
actions, from plain arrays, in numpy only (no torch on the robot).

The arrays are what the learner publishes to its inbox (robo_rl.distributed.inbox.actor_arrays): the hidden
layers (with LayerNorm if trained with it), the mean and log-std heads, the log-std bounds and the action
scaling, the same computation as robo_rl.agents.networks.TanhGaussianActor.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

ARRAYS_FORMAT = 1
ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "relu6": lambda x: np.clip(x, 0.0, 6.0),
    "hardtanh": lambda x: np.clip(x, -1.0, 1.0),
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


class ActorArraysError(ValueError):
    """Arrays that do not describe a tanh-Gaussian actor this module can run."""


class GaussianActor:
    """A tanh-Gaussian actor from the learner's published arrays (validated: shapes chain, values finite)."""

    def __init__(self, arrays: Mapping[str, Any]):
        try:
            if arrays["format"] != ARRAYS_FORMAT:
                raise ActorArraysError(f"actor arrays of format {arrays['format']!r}; this robot reads {ARRAYS_FORMAT}")
            if arrays["activation"] not in ACTIVATIONS:
                raise ActorArraysError(f"activation {arrays['activation']!r}; this robot runs {', '.join(ACTIVATIONS)}")
            self.activation = ACTIVATIONS[arrays["activation"]]
            self.hidden = [tuple(None if layer.get(k) is None else np.asarray(layer[k], np.float64)
                                 for k in ("weight", "bias", "norm_weight", "norm_bias")) for layer in arrays["layers"]]
            self.mean_head = tuple(np.asarray(arrays["mean"][k], np.float64) for k in ("weight", "bias"))
            self.log_std_head = tuple(np.asarray(arrays["log_std"][k], np.float64) for k in ("weight", "bias"))
            self.log_std_min, self.log_std_max = (float(v) for v in arrays["log_std_bounds"])
            self.eps = float(arrays["layer_norm_eps"])
            self.scale = np.asarray(arrays["action_scale"], np.float64)
            self.bias = np.asarray(arrays["action_bias"], np.float64)
        except (KeyError, TypeError, IndexError, AttributeError) as error:
            raise ActorArraysError(f"actor arrays lack or misshape {error!s}") from None
        if not self.hidden:
            raise ActorArraysError("the actor has no hidden layer")
        for weight, bias, *norm in [*self.hidden, (*self.mean_head, None, None), (*self.log_std_head, None, None)]:
            if weight.ndim != 2 or bias.shape != weight.shape[:1] or any(n is not None and n.shape != bias.shape
                                                                        for n in norm):
                raise ActorArraysError(f"a layer of shape {weight.shape} with bias {bias.shape} does not chain")
            if not all(np.all(np.isfinite(a)) for a in (weight, bias, *(n for n in norm if n is not None))):
                raise ActorArraysError("actor arrays hold NaN or Inf")
        width = self.hidden[-1][0].shape[0]
        if any(later[0].shape[1] != earlier[0].shape[0] for earlier, later in zip(self.hidden, self.hidden[1:])) \
                or self.mean_head[0].shape[1] != width or self.log_std_head[0].shape != self.mean_head[0].shape \
                or self.scale.shape != self.mean_head[1].shape or self.bias.shape != self.scale.shape:
            raise ActorArraysError("the actor's layers, heads and action scaling do not chain")
        self.observation_size = int(self.hidden[0][0].shape[1])
        self.action_size = int(self.scale.shape[0])

    def distribution(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and log standard deviation of the pre-squash Gaussian for observations (..., obs)."""
        h = np.asarray(obs, np.float64)
        for weight, bias, norm_weight, norm_bias in self.hidden:
            h = h @ weight.T + bias
            if norm_weight is not None:
                centered = h - h.mean(axis=-1, keepdims=True)
                h = centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + self.eps) * norm_weight + norm_bias
            h = self.activation(h)
        log_std = np.tanh(h @ self.log_std_head[0].T + self.log_std_head[1])
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1.0)
        return h @ self.mean_head[0].T + self.mean_head[1], log_std

    def sample(self, obs: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """An exploratory action: tanh(mean + std * noise) scaled to the action range (`noise` standard normal)."""
        mean, log_std = self.distribution(obs)
        return np.tanh(mean + np.exp(log_std) * noise) * self.scale + self.bias

    def mean_action(self, obs: np.ndarray) -> np.ndarray:
        """The deterministic action tanh(mean) scaled to the action range."""
        return np.tanh(self.distribution(obs)[0]) * self.scale + self.bias
