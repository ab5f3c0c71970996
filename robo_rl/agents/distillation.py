"""Teacher-student distillation (DAgger): a deployable policy that imitates a privileged teacher.

The teacher is a SAC policy trained in simulation on observations no vehicle measures (its drawn mass,
inertia, motor constants, latency, wind: `env.privileged_actor=true`). The student sees only what the robot
measures, with its history, and is trained by regression onto the teacher's deterministic actions in the
states the student itself visits (Ross et al. 2011, DAgger; as in RMA and RAPTOR's student phase): early
rollouts are flown partly by the teacher (`teacher_share`), later ones by the student alone, so that the
student learns to recover from its own mistakes, which plain behaviour cloning never shows it.

This module holds the two pieces of the update: the aggregated dataset and the student's regression step.
`robo_rl.distill` runs the loop.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable

import torch
from torch.func import functional_call, grad

from robo_rl.agents.adam import AdamSlots, adam_step, allocated_adam
from robo_rl.agents.networks import TanhGaussianActor


@dataclasses.dataclass
class DistillationConfig:
    """Hyperparameters of the student's regression and the DAgger schedule."""

    lr: float = 1e-3
    batch_size: int = 4096
    updates_per_iteration: int = 200   # regression steps after each rollout
    dataset_capacity: int = 1_000_000  # aggregated (observation, teacher action) rows; the oldest are dropped
    teacher_iterations: int = 5        # the teacher's share of the actions falls linearly from 1 to 0 over these
    # the learning rate falls along a half cosine from lr to this fraction of it over the run's updates, so that
    # the final student is a converged one: at a constant rate consecutive students differ in what they fly
    final_lr_fraction: float = 0.01
    # weight of a second error term, before the tanh squash: the plain error on the squashed action barely
    # tells 0.95 from 0.999, so a student learns the saturated commands of a recovery from a steep start last
    pre_squash_weight: float = 0.0
    # each regression step (forward, backward and Adam) as one torch.compile'd graph: fewer, fused kernels
    # (about 1.5x faster steps at make train's student on a 2-core CPU; the first step compiles, for about 10 s)
    compile: bool = False

    def validate(self) -> None:
        """ValueError naming the first field outside its range."""
        for name in ("batch_size", "updates_per_iteration", "dataset_capacity"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"distillation.{name} must be at least 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"distillation.lr must be positive, got {self.lr}")
        if not 0.0 < self.final_lr_fraction <= 1.0:
            raise ValueError(f"distillation.final_lr_fraction must be in (0, 1], got {self.final_lr_fraction}")
        if int(self.teacher_iterations) < 0:
            raise ValueError(f"distillation.teacher_iterations must be 0 or more, got {self.teacher_iterations}")
        if not 0.0 <= float(self.pre_squash_weight) < float("inf"):
            raise ValueError(f"distillation.pre_squash_weight must be 0 or a positive number, got {self.pre_squash_weight}")

    def teacher_share(self, iteration: int) -> float:
        """The probability that the teacher's action is flown in a rollout of `iteration` (0-based)."""
        if iteration >= self.teacher_iterations:
            return 0.0
        return 1.0 - iteration / self.teacher_iterations


class AggregatedDataset:
    """A ring of (student observation, teacher action) rows on one device; every rollout adds to it."""

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, device: torch.device):
        # one row holds both, so that a minibatch is one gather: two index_selects cost 1.6x one of both widths
        self.rows = torch.empty(capacity, obs_dim + action_dim, device=device)
        self.obs, self.action = self.rows[:, :obs_dim], self.rows[:, obs_dim:]
        self.obs_dim, self.capacity, self.size, self._next = obs_dim, capacity, 0, 0

    def add(self, obs: torch.Tensor, action: torch.Tensor) -> None:
        """Append rows (B, obs_dim) and (B, action_dim), overwriting the oldest once full."""
        added = 0
        while added < len(obs):  # contiguous slices up to the ring's end, then from its start
            count = min(len(obs) - added, self.capacity - self._next)
            ring = self.rows[self._next:self._next + count]
            ring[:, :self.obs_dim].copy_(obs[added:added + count])
            ring[:, self.obs_dim:].copy_(action[added:added + count])
            added, self._next = added + count, (self._next + count) % self.capacity
        self.size = min(self.size + len(obs), self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """`batch_size` rows drawn uniformly with replacement: (observations, actions)."""
        index = torch.randint(self.size, (batch_size,), device=self.rows.device, generator=generator)
        # index_select copies whole rows: the same rows as rows[index] in about half the time on a CPU
        batch = self.rows.index_select(0, index)
        return batch[:, :self.obs_dim], batch[:, self.obs_dim:]


# targets nearer the action bounds than this fraction of the half range are taken at it before the atanh:
# atanh(0.995) = 3.0, the pre-squash mean beyond which tanh's slope is below 1%
PRE_SQUASH_LIMIT = 0.995


class StudentRegression:
    """Fits a tanh-Gaussian actor's deterministic action to target actions: mean squared error in units of
    the action range (so that every action dimension weighs the same), plus `pre_squash_weight` times the
    squared error of the pre-squash mean against atanh of the target, Adam, its learning rate annealed from
    `lr` to `lr * final_lr_fraction` along a half cosine over `total_updates` steps. With `compile` each
    step (forward, backward and Adam) runs as one torch.compile'd graph, as SAC's update does."""

    def __init__(self, actor: TanhGaussianActor, lr: float, total_updates: int, final_lr_fraction: float,
                 pre_squash_weight: float = 0.0, compile: bool = False):
        self.actor = actor
        self.pre_squash_weight = float(pre_squash_weight)
        self.lr, self.final_lr = float(lr), float(lr) * float(final_lr_fraction)
        self.total_updates, self.updates = max(int(total_updates), 1), 0
        # only what the deterministic action reads: the log_std head gets no gradient, and eager Adam skips it
        self.fitted = {name: p for name, p in actor.named_parameters() if not name.startswith("log_std.")}
        self.optimizer = allocated_adam(self.fitted.values(), lr)
        self._slots = AdamSlots.of(self.optimizer)
        # load_state_dict replaces the state tensors that the compiled step updates: follow them (as SAC does)
        self.optimizer.register_load_state_dict_post_hook(
            lambda optimizer: setattr(self, "_slots", AdamSlots.of(optimizer)))
        self._compiled: Callable[..., torch.Tensor] | None = None
        device = next(actor.parameters()).device
        self._lr = torch.tensor(float(lr), device=device)  # the compiled step's rate: an input, not a constant
        if compile:
            # on a CPU, the C++ wrapper calls the graph's kernels without Python in between
            self._compiled = torch.compile(self._step, fullgraph=True, dynamic=False,
                                           options={"cpp_wrapper": device.type == "cpu"})

    @property
    def compiled(self) -> bool:
        """Whether steps run as a compiled graph (False without compile, or after it failed and fell back)."""
        return self._compiled is not None

    def learning_rate(self) -> float:
        """The rate of the next update: on the half cosine from lr (update 0) to the final rate (after the
        last)."""
        progress = min(self.updates, self.total_updates) / self.total_updates
        return self.final_lr + 0.5 * (self.lr - self.final_lr) * (1.0 + math.cos(math.pi * progress))

    def loss(self, obs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared difference of the actor's and the target's actions as fractions of the action range,
        plus the weighted pre-squash term."""
        return self._loss_of(self.actor(obs)[0], target)

    def _loss_of(self, mean: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss of the pre-squash means `mean` against the targets."""
        actor = self.actor
        loss = (((actor.mean_action(mean) - target) / (2.0 * actor.action_scale)) ** 2).sum(-1).mean()
        if self.pre_squash_weight > 0.0:
            squashed = ((target - actor.action_bias) / actor.action_scale).clamp(-PRE_SQUASH_LIMIT, PRE_SQUASH_LIMIT)
            loss = loss + self.pre_squash_weight * ((mean - torch.atanh(squashed)) ** 2).sum(-1).mean()
        return loss

    @torch.no_grad()
    def _step(self, obs: torch.Tensor, target: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
        """One regression step as a pure tensor program (what torch.compile fuses); its loss before the step."""
        def loss_fn(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            loss = self._loss_of(functional_call(self.actor, params, (obs,))[0], target)
            return loss, loss

        grads, loss = grad(loss_fn, has_aux=True)(self.fitted)
        adam_step(self._slots._replace(lr=lr), grads.values())
        return loss

    def update(self, obs: torch.Tensor, target: torch.Tensor) -> float:
        """One gradient step on a minibatch; returns its loss before the step."""
        group = self.optimizer.param_groups[0]
        lr, loss = group["lr"], None
        if self._compiled is not None:
            try:
                loss = self._compiled(obs, target, self._lr.fill_(lr))
            # no C++ compiler for inductor, or more variants of the step than torch._dynamo's recompile limit
            except (torch._dynamo.exc.BackendCompilerFailed, torch._dynamo.exc.FailOnRecompileLimitHit) as error:
                warnings.warn(f"torch.compile of the student's regression failed, running it eagerly: {error}",
                              stacklevel=2)
                self._compiled = None
        if loss is None:
            loss = self.loss(obs, target)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        self.updates += 1
        group["lr"] = self.learning_rate()  # the next step's, as a scheduler would set it
        return float(loss.detach())
