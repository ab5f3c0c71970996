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

import torch

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
        self.obs = torch.empty(capacity, obs_dim, device=device)
        self.action = torch.empty(capacity, action_dim, device=device)
        self.capacity, self.size, self._next = capacity, 0, 0

    def add(self, obs: torch.Tensor, action: torch.Tensor) -> None:
        """Append rows (B, obs_dim) and (B, action_dim), overwriting the oldest once full."""
        rows = (torch.arange(len(obs), device=self.obs.device) + self._next) % self.capacity
        self.obs[rows], self.action[rows] = obs, action
        self._next = (self._next + len(obs)) % self.capacity
        self.size = min(self.size + len(obs), self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """`batch_size` rows drawn uniformly with replacement."""
        index = torch.randint(self.size, (batch_size,), device=self.obs.device, generator=generator)
        # index_select copies whole rows: the same rows as obs[index] in about half the time on a CPU
        return self.obs.index_select(0, index), self.action.index_select(0, index)


# targets nearer the action bounds than this fraction of the half range are taken at it before the atanh:
# atanh(0.995) = 3.0, the pre-squash mean beyond which tanh's slope is below 1%
PRE_SQUASH_LIMIT = 0.995


class StudentRegression:
    """Fits a tanh-Gaussian actor's deterministic action to target actions: mean squared error in units of
    the action range (so that every action dimension weighs the same), plus `pre_squash_weight` times the
    squared error of the pre-squash mean against atanh of the target, Adam, its learning rate annealed from
    `lr` to `lr * final_lr_fraction` along a half cosine over `total_updates` steps."""

    def __init__(self, actor: TanhGaussianActor, lr: float, total_updates: int, final_lr_fraction: float,
                 pre_squash_weight: float = 0.0):
        self.actor = actor
        self.pre_squash_weight = float(pre_squash_weight)
        self.optimizer = torch.optim.Adam(actor.parameters(), lr=lr)
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
            self.optimizer, T_max=max(int(total_updates), 1), eta_min=lr * final_lr_fraction)

    def loss(self, obs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared difference of the actor's and the target's actions as fractions of the action range,
        plus the weighted pre-squash term."""
        actor = self.actor
        mean = actor(obs)[0]
        loss = (((actor.mean_action(mean) - target) / (2.0 * actor.action_scale)) ** 2).sum(-1).mean()
        if self.pre_squash_weight > 0.0:
            squashed = ((target - actor.action_bias) / actor.action_scale).clamp(-PRE_SQUASH_LIMIT, PRE_SQUASH_LIMIT)
            loss = loss + self.pre_squash_weight * ((mean - torch.atanh(squashed)) ** 2).sum(-1).mean()
        return loss

    def update(self, obs: torch.Tensor, target: torch.Tensor) -> float:
        """One gradient step on a minibatch; returns its loss before the step."""
        loss = self.loss(obs, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.schedule.step()
        return float(loss.detach())
