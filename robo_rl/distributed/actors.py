"""What runs on the Ray workers of a `runner=ray` run: experience actors and the evaluator.

Both are plain classes made Ray actors by the learner (`ray.remote(...).options(...)`, which sets their CPUs
and restarts), so that they can also be built and tested in one process. They hold nothing worth saving:
a restarted actor starts new episodes with a new seed and the newest weights.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from robo_rl.agents.sac import SACConfig, policy_network
from robo_rl.buffers import Source
from robo_rl.collector import CollectedStep, Collector
from robo_rl.envs import env_config_at, make_vector_env
from robo_rl.evaluation import evaluate_policy
from robo_rl.interventions import make_intervener


class Weights(NamedTuple):
    """A policy's weights as the learner publishes them: `ref` is an ObjectRef in a list, so that Ray hands it
    over unresolved and an actor fetches the weights only when `version` is new to it."""

    version: int
    ref: list[Any]


class CollectRequest(NamedTuple):
    """What the learner asks of an experience actor for one batch."""

    weights: Weights
    random_actions: bool         # uniform random actions (before learning starts) instead of the policy
    difficulty: float | None     # the curriculum level's randomization difficulty (None: the env's own)
    generation: int              # how often this actor has been restarted: its episodes' seeds depend on it


class EnvSettings(NamedTuple):
    """How every actor builds its env and policy: the run's env group, agent and intervention configs, the
    env spec, the seed, and the actor's share of the run."""

    env: dict[str, Any]
    agent: dict[str, Any]
    intervention: dict[str, Any]
    spec: dict[str, Any]
    privileged: bool
    seed: int
    num_actors: int


def _policy(settings: EnvSettings) -> torch.nn.Module:
    spec = settings.spec
    return policy_network(spec["observation_size"], spec["action_low"], spec["action_high"],
                          SACConfig(**settings.agent)).requires_grad_(False)


class _PolicyHolder:
    """A policy network whose weights follow the learner's published versions."""

    def __init__(self, settings: EnvSettings):
        self.policy = _policy(settings)
        self.version = -1

    def follow(self, weights: Weights) -> None:
        if weights.version != self.version:
            import ray

            self.policy.load_state_dict(ray.get(weights.ref[0]))
            self.version = weights.version


class ExperienceActor(_PolicyHolder):
    """A batched env stepped by a copy of the policy (and the run's intervener), sending batches of tagged
    transitions to the learner.

    Args:
        settings: see EnvSettings.
        index: this actor's number among the run's actors (its seeds depend on it).
        num_envs: its batched envs.
        steps: batched env steps per batch.
        threads: its torch and simulator threads (the CPUs Ray reserved for it).
    """

    def __init__(self, settings: EnvSettings, index: int, num_envs: int, steps: int, threads: int):
        torch.set_num_threads(threads)
        super().__init__(settings)
        self.settings, self.index, self.num_envs, self.steps, self.threads = settings, index, num_envs, steps, threads
        self.collector: Collector | None = None
        self.difficulty: float | None = None
        self.env_steps = 0  # collected by this actor since it started: what its intervener's budget counts

    def pid(self) -> int:
        """The worker process's id (the fault tests kill it)."""
        return os.getpid()

    def collect(self, request: CollectRequest) -> dict[str, Any]:
        """Step every env `steps` times with the request's policy and return the steps as one batch (`batch_of`)."""
        start = time.perf_counter()
        if self.collector is None or request.difficulty != self.difficulty:
            self._start(request)
        self.follow(request.weights)
        policy = None if request.random_actions else (lambda obs: self.policy.sample(obs)[0])
        with torch.no_grad():
            steps = []
            for _ in range(self.steps):
                steps.append(self.collector.step(policy, self.env_steps))
                self.env_steps += steps[-1].env_steps
        return batch_of(steps, self.version, time.perf_counter() - start)

    def _start(self, request: CollectRequest) -> None:
        """Build the env at the request's difficulty and start its episodes, seeded by (seed, index, generation)."""
        settings = self.settings
        if self.collector is not None:
            self.collector.env.close()
        env = make_vector_env(env_config_at(settings.env, request.difficulty), self.num_envs, torch.device("cpu"),
                              threads=self.threads, privileged=settings.privileged)
        intervention = dict(settings.intervention)
        if intervention.get("until_env_steps") is not None:  # the run's limit, shared among the actors
            intervention["until_env_steps"] = int(intervention["until_env_steps"]) // settings.num_actors
        self.collector = Collector(env, torch.device("cpu"), settings.privileged, make_intervener(intervention, env))
        seed = int(np.random.SeedSequence([settings.seed, self.index, request.generation]).generate_state(1)[0])
        torch.manual_seed(seed)
        self.collector.reset(seed)
        self.difficulty = request.difficulty


def batch_of(steps: list[CollectedStep], weights_version: int, seconds: float = 0.0) -> dict[str, Any]:
    """Collected steps as one batch for the learner: {"tagged": [(source number, {field: array (rows, ...)})],
    "returns", "intervention_rates" (of the episodes that ended), "intervention_steps", "env_steps",
    "weights_version" (of the policy that acted), "seconds" (collecting), "pid", "node" (who sent it)}."""
    parts: dict[Source, list[dict[str, torch.Tensor]]] = {}
    for step in steps:
        for source, transitions in step.tagged:
            parts.setdefault(source, []).append(transitions)
    tagged = [(int(source), {key: torch.cat([p[key] for p in chunks]).cpu().numpy() for key in chunks[0]})
              for source, chunks in parts.items()]
    return {"tagged": tagged, "returns": [r for step in steps for r in step.finished_returns],
            "intervention_rates": [r for step in steps for r in step.finished_intervention_rates],
            "intervention_steps": sum(step.intervention_steps for step in steps),
            "env_steps": sum(step.env_steps for step in steps), "weights_version": weights_version,
            "seconds": seconds, "pid": os.getpid(), "node": socket.gethostname()}


class PolicyEvaluator(_PolicyHolder):
    """The run's deterministic evaluation (robo_rl.evaluation.evaluate_policy) on its fixed seeded episodes."""

    def __init__(self, settings: EnvSettings, episodes: int, seed: int, threads: int):
        torch.set_num_threads(threads)
        super().__init__(settings)
        self.settings, self.episodes, self.seed, self.threads = settings, episodes, seed, threads
        self.env: Any = None
        self.difficulty: float | None = None

    def evaluate(self, weights: Weights, difficulty: float | None) -> dict[str, float]:
        """success_rate, mean_return and mean_length of the weights' deterministic policy."""
        if self.env is None or difficulty != self.difficulty:
            if self.env is not None:
                self.env.close()
            self.env = make_vector_env(env_config_at(self.settings.env, difficulty), self.episodes, torch.device("cpu"),
                                       threads=self.threads)
            self.difficulty = difficulty
        self.follow(weights)
        result = evaluate_policy(self.policy.deterministic, self.env, self.seed, torch.device("cpu"))
        return {key: result[key] for key in ("success_rate", "mean_return", "mean_length")}

