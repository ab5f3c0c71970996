"""A robot as an actor of a `runner=ray` run (HIL-SERL's real-world loop), independent of ROS.

Each control tick the arm acts through the policy node's own path (robo_rl_ros.core.arm: observation,
safety filter, IK, limits) with the learner's newest actor sampling exploratory actions
(core.exploration), unless a person intervenes: then their action is applied and the transition is tagged
an intervention. The reward is sparse, from a success detector (HIL-SERL's real-robot reward): 1 on each
tick the detector says success, 0 otherwise; an episode lasts `episode_steps` ticks (not terminal: a time
limit) or, with `end_on_success` (HIL-SERL's episodes), ends at the first success, which is terminal. The
choice must be the learner's (its task's `end_on_success`), so that the robot's transitions, the demos and
the simulated evaluation mean the same thing. Completed transitions go to the learner through a
LearnerLink, in batches of `steps_per_batch` and at each episode's end.

Every `evaluate_every`-th episode is an evaluation episode (HIL-SERL's measure of a policy on the robot): the
actor's mean action, no exploration. A person may still take over (the robot's safety comes first), but an
evaluation episode counts as a success only if the detector said success and nobody intervened. Its
transitions go to the learner like any others.

When the learner does not answer (`link.connected` false) the robot stops commanding at that tick, and the
episode under way is dropped (no transition spans the pause); once the learner answers again, a new
episode starts after a reset. The same happens while the arm controller holds (a stale or bad joint state).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Any, Callable

import numpy as np

from robo_rl_ros.core.arm import ArmPolicyController, ArmTickResult
from robo_rl_ros.core.exploration import ActorArraysError, GaussianActor

ONLINE, INTERVENTION = 0, 2  # robo_rl.buffers.Source: who acted in a transition


@dataclasses.dataclass(frozen=True)
class ActorSettings:
    """What a deployment chooses (node parameters)."""

    episode_steps: int                 # an episode is cut after this many ticks
    steps_per_batch: int = 32          # transitions per batch sent to the learner
    seed: int = 0                      # of the exploration noise
    end_on_success: bool = False       # the first success ends the episode (terminal)
    evaluate_every: int = 0            # every this many-th episode is an evaluation episode (0: none)


class RobotActor:
    """One robot collecting for a learner (see the module docstring).

    Args:
        controller: the arm controller (observation, filter, IK) of the node's bundle.
        link: a robo_rl_ros.core.learner_link.LearnerLink (or anything with `connected`, `weights()`, `send`).
        settings: ActorSettings.
    """

    def __init__(self, controller: ArmPolicyController, link: Any, settings: ActorSettings):
        self.controller, self.link, self.settings = controller, link, settings
        self.rng = np.random.default_rng(settings.seed)
        self.policy: GaussianActor | None = None
        self.version = -1
        self._unusable = ""  # why the newest actor cannot act ("" if it can)
        self.needs_reset = True   # the robot must be put back to a start before the next episode
        self.steps = 0            # ticks of the episode under way
        self.episode_return = 0.0
        self.episode_interventions = 0
        self._previous: tuple[np.ndarray, np.ndarray, bool] | None = None  # (obs, action, intervened)
        self._succeeded = False   # the detector said success during the episode under way
        self._rows: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, bool, bool]] = []
        self._finished: list[tuple[float, float]] = []  # (return, intervention rate) of ended episodes
        self.sent_batches = self.dropped_episodes = 0
        self.episodes = self.successes = self.transitions = self.intervention_steps = 0  # of completed episodes
        self.last_episode: tuple[bool, int, int] | None = None  # (success, ticks, ticks intervened) of the last
        self.evaluating = False   # the episode under way is an evaluation episode
        self.evaluations: list[tuple[int, bool]] = []  # (transitions before it, success) of each evaluation episode
        self.reason = "no episode started"

    def begin_episode(self) -> None:
        """The robot is at a start (the node reset it): the next tick begins an episode."""
        self.needs_reset, self.steps, self.episode_return, self.episode_interventions = False, 0, 0.0, 0
        self._previous, self._succeeded = None, False
        self.evaluating = self.next_is_evaluation

    @property
    def next_is_evaluation(self) -> bool:
        """Whether the next episode to begin is an evaluation episode (a dropped one is done again)."""
        every = self.settings.evaluate_every
        return every > 0 and (self.episodes + 1) % every == 0

    def tick(self, now: float, intervention: np.ndarray | None, success: bool) -> ArmTickResult:
        """One control tick: `intervention` is the person's action (None: the learner's actor acts),
        `success` the detector's verdict on the current state. A result that is not `moving` commands
        nothing (the node publishes nothing)."""
        why_not = self._follow_learner()
        if why_not:
            return self._hold(why_not)
        if self.needs_reset:
            return self._hold("waiting for a reset")
        act: Callable[[np.ndarray], np.ndarray]
        if intervention is not None:
            act = lambda obs: np.asarray(intervention, dtype=np.float64)  # noqa: E731
        elif self.evaluating:
            act = self.policy.mean_action
        else:
            act = lambda obs: self.policy.sample(obs, self.rng.standard_normal(self.policy.action_size))  # noqa: E731
        result = self.controller.tick(now, act=act)
        if not result.moving:
            self._drop_episode(result.reason)
            return result
        if self._previous is not None:
            self._record(result.observation, success)
        if self.needs_reset:  # that transition ended the episode: this tick's command is not part of it
            return dataclasses.replace(result, moving=False, reason="episode over; waiting for a reset")
        self._previous = (result.observation, result.action, intervention is not None)
        self.steps += 1
        self.episode_interventions += intervention is not None
        return result

    # ------------------------------------------------------------------ episodes and batches
    def _follow_learner(self) -> str:
        """Load the learner's newest actor if it changed; why the robot cannot act now ("" if it can)."""
        newest = self.link.weights() if self.link.connected else None
        if newest is None:
            return f"the learner does not answer ({getattr(self.link, 'why_lost', '')}); not commanding"
        if newest[0] != self.version:
            self.version, self.policy, self._unusable = newest[0], None, ""
            try:
                policy = GaussianActor(newest[1])
            except ActorArraysError as error:
                self._unusable = f"the learner's actor cannot run here: {error}"
            else:
                bundle = self.controller.bundle
                if (policy.observation_size, policy.action_size) != (bundle.observation_size, bundle.action_size):
                    self._unusable = (f"the learner's actor maps {policy.observation_size} observations to "
                                      f"{policy.action_size} actions, this robot's bundle ({bundle.env_id}) "
                                      f"{bundle.observation_size} to {bundle.action_size}: it learns another task")
                else:
                    self.policy = policy
        # a bad actor (NaN weights, another task) is not replaced by an older one: the robot holds until a good one
        return self._unusable

    def _hold(self, reason: str) -> ArmTickResult:
        self._drop_episode(reason)
        self.reason = reason
        return ArmTickResult(False, reason, None, None, None)

    def _drop_episode(self, reason: str) -> None:
        """End the episode under way without its last transitions' successors: it restarts after a reset."""
        if self.steps:
            self.dropped_episodes += 1
        self._previous, self.needs_reset, self.reason, self.steps = None, True, reason, 0

    def _record(self, next_obs: np.ndarray, success: bool) -> None:
        obs, action, intervened = self._previous
        reward = 1.0 if success else 0.0
        terminal = success and self.settings.end_on_success
        self._rows.append((obs, action, reward, next_obs, terminal, intervened))
        self.episode_return += reward
        self._succeeded = self._succeeded or success
        if terminal or self.steps >= self.settings.episode_steps:
            self._finished.append((self.episode_return, self.episode_interventions / max(self.steps, 1)))
            self.last_episode = (self._succeeded, self.steps, self.episode_interventions)
            if self.evaluating:
                self.evaluations.append((self.transitions, self._succeeded and not self.episode_interventions))
            self.episodes += 1
            self.successes += self._succeeded
            self.transitions += self.steps
            self.intervention_steps += self.episode_interventions
            self._previous, self.needs_reset, self.steps = None, True, 0
        if len(self._rows) >= self.settings.steps_per_batch or self.needs_reset:  # a whole episode goes at once
            self.link.send(self._batch())

    def _batch(self) -> dict[str, Any]:
        """The collected transitions in the learner's batch format (robo_rl.distributed.actors.batch_of)."""
        rows, self._rows = self._rows, []
        finished, self._finished = self._finished, []
        tagged = []
        for source in (ONLINE, INTERVENTION):
            chosen = [row for row in rows if row[5] == (source == INTERVENTION)]
            if chosen:
                obs, action, reward, next_obs, terminated, _ = zip(*chosen)
                tagged.append((source, {"obs": np.array(obs, np.float32), "action": np.array(action, np.float32),
                                        "reward": np.array(reward, np.float32), "next_obs": np.array(next_obs, np.float32),
                                        "terminated": np.array(terminated, np.float32)}))
        self.sent_batches += 1
        return {"tagged": tagged, "returns": [r for r, _ in finished], "intervention_rates": [i for _, i in finished],
                "intervention_steps": sum(row[5] for row in rows), "env_steps": len(rows),
                "weights_version": self.version, "seconds": 0.0, "pid": os.getpid(), "node": socket.gethostname()}
