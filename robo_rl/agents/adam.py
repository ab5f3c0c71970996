"""Adam as a pure tensor step on a torch.optim.Adam's own state, for updates that torch.compile fuses into one
graph (SAC's, the student's regression): the gradients come from torch.func.grad, `adam_step` applies them,
and the optimizer's state_dict, and so checkpoints, stay those of the plain optimizer.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

import torch
from torch import nn
from torch.optim.adam import adam


class AdamSlots(NamedTuple):
    """A torch.optim.Adam's parameters, state tensors and hyperparameters as plain data. The compiled steps
    read these, never the optimizer: torch.compile pins an optimizer object by identity, which would
    recompile the update for every new agent in a process (and fail after eight)."""

    params: list[torch.Tensor]
    exp_avgs: list[torch.Tensor]
    exp_avg_sqs: list[torch.Tensor]
    steps: list[torch.Tensor]
    lr: float | torch.Tensor  # a 0-d tensor: a rate that changes between steps of a compiled graph
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    capturable: bool

    @classmethod
    def of(cls, optimizer: torch.optim.Adam) -> "AdamSlots":
        """The current tensors of `optimizer` (its single parameter group)."""
        group = optimizer.param_groups[0]
        states = [optimizer.state[p] for p in group["params"]]
        return cls(list(group["params"]), [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                   [s["step"] for s in states], float(group["lr"]), tuple(group["betas"]), float(group["eps"]),
                   float(group["weight_decay"]),
                   # a CUDA run's optimizer state loaded on a CPU keeps its capturable flag, which CPUs refuse
                   bool(group["capturable"]) and group["params"][0].device.type == "cuda")


def adam_step(slots: AdamSlots, grads: Iterable[torch.Tensor]) -> None:
    """torch.optim.Adam's step with the given gradients (one per parameter, in order) on the optimizer's own
    state, so that its state_dict, and checkpoints, are those of the plain optimizer."""
    adam(slots.params, list(grads), slots.exp_avgs, slots.exp_avg_sqs, [], slots.steps, foreach=False,
         capturable=slots.capturable, amsgrad=False, beta1=slots.betas[0], beta2=slots.betas[1], lr=slots.lr,
         weight_decay=slots.weight_decay, eps=slots.eps, maximize=False)


def allocated_adam(params: Iterable[nn.Parameter], lr: float) -> torch.optim.Adam:
    """An Adam optimizer with its state allocated now (`adam_step` updates it in place)."""
    params = list(params)
    capturable = params[0].device.type == "cuda"  # step counts stay on the GPU: no host sync per step
    optimizer = torch.optim.Adam(params, lr=lr, capturable=capturable)
    for p in params:
        optimizer.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=p.device if capturable else "cpu"),
                              "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                              "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
    return optimizer
