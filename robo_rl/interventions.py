"""Interventions: something other than the policy takes over the action during training rollouts.

An intervener sees each batched step before it is applied and returns the action to apply plus a mask
of the envs it took over; the trainer tags those transitions `Source.INTERVENTION` (HIL-SERL: they count
as online and as offline data). `ScriptedIntervener` stands in for a human with a rule a person would
follow: when an episode makes no progress (its reward has not risen above its best for `patience`
steps) the env's scripted expert flies it for `duration` steps, while the run's intervention `budget`
(a fraction of all env steps so far) and `until_env_steps` allow.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np


class Intervener(Protocol):
    """Decides, step by step, which envs it takes over and with which actions."""

    def __call__(self, obs: np.ndarray, policy_action: np.ndarray, env_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(actions (N, act) to apply, mask (N,) of envs it took over) for this step."""

    def observe(self, reward: np.ndarray, done: np.ndarray) -> None:
        """The step's rewards and which episodes ended."""


class ScriptedIntervener:
    """A scripted expert that takes over episodes that stopped making progress.

    Args:
        expert: observations (N, obs) -> expert actions (N, act).
        num_envs: N.
        patience: steps without a new best reward before taking over.
        duration: steps per takeover (it ends earlier with the episode).
        budget: most intervention steps as a fraction of all env steps collected so far.
        until_env_steps: no new takeovers after this many env steps (None: never stop).
        min_improvement: how much the reward must exceed the episode's best to count as progress.
    """

    def __init__(self, expert: Callable[[np.ndarray], np.ndarray], num_envs: int, patience: int = 20,
                 duration: int = 30, budget: float = 0.2, until_env_steps: int | None = None,
                 min_improvement: float = 1e-3):
        for name, value in (("patience", patience), ("duration", duration)):  # each named with its value
            if not value >= 1:
                raise ValueError(f"intervention.{name} must be a whole number of steps >= 1, got {value}")
        if not 0.0 <= budget <= 1.0:  # NaN included
            raise ValueError(f"intervention.budget must be a fraction in [0, 1], got {budget}")
        self.expert, self.num_envs = expert, num_envs
        self.patience, self.duration, self.budget = patience, duration, budget
        self.until_env_steps, self.min_improvement = until_env_steps, min_improvement
        self.best = np.full(num_envs, -np.inf)
        self.stalled = np.zeros(num_envs, dtype=np.int64)  # steps since the last new best
        self.remaining = np.zeros(num_envs, dtype=np.int64)  # takeover steps left
        self.total_steps = 0  # intervention steps so far

    def __call__(self, obs: np.ndarray, policy_action: np.ndarray, env_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """Start takeovers where episodes stalled (within budget), apply the expert where one is running."""
        allowed = (self.until_env_steps is None or env_steps < self.until_env_steps)
        stalled = (self.stalled >= self.patience) & (self.remaining == 0)
        if allowed and stalled.any():
            room = int(self.budget * max(env_steps, 1)) - self.total_steps
            start = np.flatnonzero(stalled)[: max(room // self.duration, 0)]
            self.remaining[start] = self.duration
            self.stalled[start] = 0  # after the takeover the policy gets `patience` steps again
        mask = self.remaining > 0
        if not mask.any():
            return policy_action, mask
        action = np.array(policy_action, copy=True)
        action[mask] = self.expert(obs if isinstance(obs, dict) else np.asarray(obs))[mask]
        self.remaining[mask] -= 1
        self.total_steps += int(mask.sum())
        return action, mask

    def observe(self, reward: np.ndarray, done: np.ndarray) -> None:
        """Track each episode's best reward; a new episode starts fresh."""
        reward = np.asarray(reward, dtype=np.float64)
        improved = reward > self.best + self.min_improvement
        self.best = np.where(improved, reward, self.best)
        self.stalled = np.where(improved, 0, self.stalled + (self.remaining == 0))  # not counted during a takeover
        done = np.asarray(done, dtype=bool)
        self.best[done], self.stalled[done], self.remaining[done] = -np.inf, 0, 0

    def state_dict(self) -> dict[str, Any]:
        """Counters to checkpoint (episodes in flight restart on resume)."""
        return {"total_steps": self.total_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict`."""
        self.total_steps = int(state["total_steps"])


INTERVENTION_KINDS = ("none", "scripted")  # what the intervention group's `kind` may be


def make_intervener(cfg: Any, env: Any) -> ScriptedIntervener | None:
    """The intervener of an `intervention` config group (a DictConfig or plain mapping) for `env` (None for
    kind "none")."""
    kind = cfg.get("kind", "none")
    if kind == "none":
        return None
    if kind not in INTERVENTION_KINDS:
        raise ValueError(f"unknown intervention kind {kind!r}; known: {', '.join(INTERVENTION_KINDS)}")
    if not hasattr(env, "expert_actions"):
        raise ValueError(f"intervention=scripted needs an env with a scripted expert; {type(env).__name__} has none")
    until = cfg.get("until_env_steps")
    return ScriptedIntervener(env.expert_actions, env.num_envs, patience=int(cfg["patience"]),
                              duration=int(cfg["duration"]), budget=float(cfg["budget"]),
                              until_env_steps=None if until is None else int(until))
