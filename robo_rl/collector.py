"""Collecting experience: a batched env stepped by a policy (or uniform random actions), an optional
intervener taking over some envs, and the resulting transitions tagged by who acted.

One home for the collection step, used in the training process (`runner=local`) and in each Ray actor
(`runner=ray`, robo_rl.distributed): both store exactly what this returns.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from robo_rl import observations
from robo_rl.buffers import Source
from robo_rl.evaluation import acting_threads, as_tensor, env_uses_torch
from robo_rl.observations import Observation

Policy = Callable[[torch.Tensor], torch.Tensor]


class CollectedStep(NamedTuple):
    """What one batched env step produced."""

    tagged: list[tuple[Source, dict[str, torch.Tensor]]]  # transitions (rows, ...) per field, by who acted
    finished_returns: list[float]                         # returns of the episodes that ended at this step
    finished_intervention_rates: list[float]              # their share of steps flown by the intervener
    intervention_steps: int                               # env steps of this step the intervener acted in
    env_steps: int                                        # env steps collected (the number of envs)


class Collector:
    """Steps `env` (a batched gymnasium vector env) and keeps the episodes' running statistics.

    Args:
        env: the vector env.
        device: where transitions are returned (torch tensors).
        privileged: also return the privileged critic's observations (critic_obs, next_critic_obs), which
            the env puts in its infos.
        intervener: takes over some envs' actions (robo_rl.interventions); None: the policy always acts.
    """

    def __init__(self, env: Any, device: torch.device, privileged: bool = False, intervener: Any = None):
        self.env, self.device, self.privileged, self.intervener = env, device, privileged, intervener
        self.num_envs = n = env.num_envs
        self.on_torch = env_uses_torch(env)
        self.low = as_tensor(env.single_action_space.low, device)
        self.high = as_tensor(env.single_action_space.high, device)
        self.episode_return = torch.zeros(n, device=device)
        self.episode_interventions, self.episode_length = np.zeros(n), np.zeros(n)
        self.obs: Observation | None = None
        self.critic_obs: torch.Tensor | None = None

    def reset(self, seed: int) -> None:
        """Start new episodes in every env (seeded) and forget the running ones' statistics."""
        obs, info = self.env.reset(seed=seed)
        self.obs = observations.to_tensor(obs, self.device)
        self.critic_obs = as_tensor(info["privileged_obs"], self.device) if self.privileged else None
        self.episode_return.zero_()
        self.episode_interventions[:], self.episode_length[:] = 0, 0

    def step(self, policy: Policy | None, env_steps: int) -> CollectedStep:
        """Act in every env once: `policy` (observations -> actions) or, if None, uniform random actions;
        `env_steps` (collected so far) is what the intervener's budget is counted against."""
        if self.obs is None:
            raise RuntimeError("Collector.step before reset")
        n, obs = self.num_envs, self.obs
        if policy is None:
            action = self.low + (self.high - self.low) * torch.rand(n, self.low.numel(), device=self.device)
        else:
            with acting_threads(self.env):
                action = policy(obs)
        intervened = None
        if self.intervener is not None:  # who acts is decided on the host, per env
            applied, intervened = self.intervener(observations.to_numpy(obs), action.cpu().numpy(), env_steps)
            action = as_tensor(applied, self.device)
        next_obs, reward, terminated, truncated, info = self.env.step(action if self.on_torch else action.cpu().numpy())
        next_obs, reward = observations.to_tensor(next_obs, self.device), as_tensor(reward, self.device)
        terminated = as_tensor(terminated, self.device)
        done = terminated.bool() | as_tensor(truncated, self.device).bool()
        extra = {}
        if self.privileged:  # the asymmetric critic's view of the same transition
            next_critic_obs = as_tensor(info["privileged_obs"], self.device)
            extra = {"critic_obs": self.critic_obs,
                     "next_critic_obs": self._final_rows(info, "final_privileged_obs", next_critic_obs)}
            self.critic_obs = next_critic_obs
        transitions = dict(obs=obs, action=action, reward=reward, next_obs=self._final_rows(info, "final_obs", next_obs),
                           terminated=terminated, **extra)
        if intervened is None or not intervened.any():
            tagged = [(Source.ONLINE, transitions)]
        else:
            rows = torch.as_tensor(intervened, device=self.device)
            tagged = [(source, {k: observations.apply(lambda v: v[keep], v) for k, v in transitions.items()})
                      for source, keep in ((Source.ONLINE, ~rows), (Source.INTERVENTION, rows)) if keep.any()]
        self.episode_return += reward
        done_np = done.cpu().numpy()
        interventions = 0
        if self.intervener is not None:
            self.intervener.observe(reward.cpu().numpy(), done_np)
            self.episode_interventions += intervened
            interventions = int(intervened.sum())
        self.episode_length += 1
        returns: list[float] = []
        rates: list[float] = []
        if done_np.any():
            returns = self.episode_return[done].tolist()
            rates = (self.episode_interventions / self.episode_length)[done_np].tolist()
            self.episode_interventions[done_np], self.episode_length[done_np] = 0, 0
            self.episode_return = torch.where(done, torch.zeros_like(self.episode_return), self.episode_return)
        self.obs = next_obs
        return CollectedStep(tagged, returns, rates, interventions, n)

    def _final_rows(self, info: dict[str, Any], key: str, current: Observation) -> Observation:
        """`current` with the rows of envs whose episode just ended replaced by info[key] (their last state)."""
        if "_final_obs" not in info:
            return current
        ended = torch.as_tensor(info["_final_obs"], device=self.device)
        final = (observations.to_tensor(info[key], self.device) if key == "final_obs"
                 else as_tensor(info[key], self.device))
        return observations.where(ended, final, current)
