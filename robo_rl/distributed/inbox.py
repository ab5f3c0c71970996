"""The learner's inbox for actors it did not start: a robot's actor node, or any process that joins the Ray
cluster, sends batches of tagged transitions and takes the newest weights (robo_rl_ros.core.learner_link).

The learner creates it as a named Ray actor (`runner.inbox`, in robo_rl_ros.core.learner_link's NAMESPACE) that it owns: it
ends with the learner, which is how a sender learns that the learner is gone. It holds at most `capacity`
batches: a full inbox refuses a batch (the sender keeps it and sends it again later), so a learner that falls
behind bounds memory instead of growing a queue.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import numpy as np
import torch
from torch import nn

from robo_rl.agents.networks import TanhGaussianActor
from robo_rl.distributed.actors import Weights
from robo_rl_ros.core.exploration import ARRAYS_FORMAT



def actor_arrays(actor: TanhGaussianActor, activation: str) -> dict[str, Any]:
    """The actor as plain numpy arrays, what the inbox hands external actors (robo_rl_ros.core.exploration
    runs it without torch): hidden layers (with LayerNorm parameters if any), mean and log-std heads,
    log-std bounds, action scaling."""
    def array(tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().cpu().numpy().astype(np.float32).copy()

    modules = list(actor.trunk)
    linears = [m for m in modules if isinstance(m, nn.Linear)]
    norms = [m for m in modules if isinstance(m, nn.LayerNorm)]
    layers = [{"weight": array(linear.weight), "bias": array(linear.bias),
               "norm_weight": array(norms[i].weight) if norms else None,
               "norm_bias": array(norms[i].bias) if norms else None} for i, linear in enumerate(linears)]
    return {"format": ARRAYS_FORMAT, "activation": activation, "layers": layers,
            "mean": {"weight": array(actor.mean.weight), "bias": array(actor.mean.bias)},
            "log_std": {"weight": array(actor.log_std.weight), "bias": array(actor.log_std.bias)},
            "log_std_bounds": [actor.LOG_STD_MIN, actor.LOG_STD_MAX],
            "layer_norm_eps": norms[0].eps if norms else 1e-5,
            "action_scale": array(actor.action_scale), "action_bias": array(actor.action_bias)}


class Inbox:
    """Batches from external actors, and the weights the learner published for them (an async Ray actor:
    `take` waits for a batch while `put` calls go on)."""

    def __init__(self, capacity: int, liveness: tuple[str, int] | None = None):
        self.capacity = capacity
        self.liveness = liveness  # the learner process's LivenessBeacon, for the links to watch
        self.batches: collections.deque[dict[str, Any]] = collections.deque()
        self.arrived = asyncio.Event()
        self.weights: Weights | None = None
        self.refused = 0

    async def put(self, batch: dict[str, Any]) -> bool:
        """Queue a batch; False (and nothing queued) while the inbox is full."""
        if len(self.batches) >= self.capacity:
            self.refused += 1
            return False
        self.batches.append(batch)
        self.arrived.set()
        return True

    async def take(self, wait_s: float) -> list[dict[str, Any]]:
        """Every queued batch, after waiting up to `wait_s` for one if there is none."""
        if not self.batches:
            try:
                await asyncio.wait_for(self.arrived.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
        batches, self.batches = list(self.batches), collections.deque()
        self.arrived.clear()
        return batches

    async def publish(self, weights: Weights) -> None:
        """Make `weights` (a reference to `actor_arrays`) the newest (the learner calls this when it publishes
        weights to its own actors)."""
        self.weights = weights

    async def latest(self, version: int) -> tuple[int, list[Any]] | None:
        """The newest weights, (version, [ref to actor_arrays]), if newer than `version`, else None: a plain
        tuple, as a robot computer cannot unpickle this package's types (it has no training package)."""
        if self.weights is None or self.weights.version <= version:
            return None
        return tuple(self.weights)

    async def stats(self) -> dict[str, Any]:
        """Queued batches, batches refused because the inbox was full, and the learner's liveness address."""
        return {"queued": len(self.batches), "refused": self.refused,
                "liveness": list(self.liveness) if self.liveness else None}
