"""A robot as an actor of a Ray run, ROS aside (robo_rl_ros.core.robot_actor): who acts, what is recorded and
sent, and that the robot stops commanding the tick the learner stops answering."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from robo_rl.agents.networks import TanhGaussianActor
from robo_rl.buffers import ReplayBuffer, Source
from robo_rl.distributed.inbox import actor_arrays
from robo_rl.distributed.learner import batch_problem
from robo_rl_ros.core import robot_actor
from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
from robo_rl_ros.core.bundle import load_bundle
from robo_rl_ros.core.exploration import GaussianActor
from robo_rl_ros.core.robot_actor import ActorSettings, RobotActor
from sim.arm.env import HOME

BUNDLE = Path(__file__).resolve().parent / "data" / "pick_bundle"


class LinkStandIn:
    """What RobotActor reads of a LearnerLink (tests/robo_rl/test_ray_runner.py runs the real one)."""

    def __init__(self, arrays: dict):
        self.connected, self.why_lost, self.arrays, self.batches = True, "", arrays, []

    def weights(self):
        return (1, self.arrays) if self.connected else None

    def send(self, batch: dict) -> None:
        self.batches.append(batch)


def _robot(steps_per_batch: int = 4, episode_steps: int = 50, end_on_success: bool = False, evaluate_every: int = 0):
    bundle = load_bundle(BUNDLE)
    controller = ArmPolicyController(bundle, ArmSettings(goal=(0.5, 0.0, 0.2)))
    names = [*controller.chain.joints, controller.chain.gripper_joint]
    torch.manual_seed(0)
    low, high = torch.tensor(bundle.action_low, dtype=torch.float32), torch.tensor(bundle.action_high, dtype=torch.float32)
    link = LinkStandIn(actor_arrays(TanhGaussianActor(bundle.observation_size, bundle.action_size, [16, 16], "relu",
                                                      low, high), "relu"))
    robot = RobotActor(controller, link, ActorSettings(episode_steps, steps_per_batch, seed=0,
                                                       end_on_success=end_on_success, evaluate_every=evaluate_every))

    def state(now: float) -> None:
        controller.update_joint_state(now, names, [*HOME, 0.04], None)
        controller.update_object(np.array([0.5, 0.0, 0.02]))
    return robot, link, state, bundle


def test_the_sources_the_rewards_and_the_batches_are_what_the_learner_stores():
    robot, link, state, bundle = _robot(end_on_success=True)  # HIL-SERL's episodes
    state(0.0)
    assert not robot.tick(0.0, None, False).moving  # not yet reset: nothing commanded
    robot.begin_episode()
    person = np.array([0.0, 0.0, 1.0, -1.0])
    for step in range(8):
        now = 0.02 * step
        state(now)
        result = robot.tick(now, person if step in (2, 3, 4) else None, success=step == 7)
        assert result.moving == (step < 7)  # the success ended the episode at the last tick
    assert robot.needs_reset and [b["env_steps"] for b in link.batches] == [4, 3]  # 4 per batch, then the episode's rest
    shapes = ReplayBuffer(10, bundle.observation_size, bundle.action_size).shapes
    rows = {}
    for batch in link.batches:
        assert batch_problem(batch, shapes) is None
        for source, fields in batch["tagged"]:
            rows.setdefault(Source(source), []).append(fields)
    robot_rows = {source: {k: np.concatenate([f[k] for f in parts]) for k in parts[0]} for source, parts in rows.items()}
    np.testing.assert_allclose(robot_rows[Source.INTERVENTION]["action"], [person] * 3)  # the person's, tagged so
    assert len(robot_rows[Source.INTERVENTION]["reward"]) == 3
    online = robot_rows[Source.ONLINE]
    assert not np.allclose(online["action"], person)  # the learner's actor sampled these
    assert online["reward"].tolist()[-1] == 1.0 and online["terminated"].tolist()[-1] == 1.0  # sparse success
    assert sum(online["reward"]) == 1.0


def test_the_robot_stops_commanding_the_tick_the_learner_is_lost_and_restarts_after_a_reset():
    robot, link, state, _ = _robot()
    robot.begin_episode()
    for step in range(3):
        state(0.02 * step)
        assert robot.tick(0.02 * step, None, False).moving
    link.connected = False
    state(0.06)
    lost = robot.tick(0.06, None, False)
    assert not lost.moving and lost.joint_command is None and "does not answer" in lost.reason
    assert robot.dropped_episodes == 1
    link.connected = True
    state(0.08)
    assert not robot.tick(0.08, None, False).moving and robot.needs_reset  # back, but the episode is gone
    robot.begin_episode()
    state(0.1)
    assert robot.tick(0.1, None, False).moving


def test_an_episode_is_cut_after_its_steps():
    robot, link, state, _ = _robot(steps_per_batch=100, episode_steps=5)
    robot.begin_episode()
    moving = []
    for step in range(8):
        state(0.02 * step)
        moving.append(robot.tick(0.02 * step, None, False).moving)
    assert moving == [True] * 5 + [False] * 3 and robot.needs_reset
    assert [b["env_steps"] for b in link.batches] == [5] and link.batches[0]["returns"] == [0.0]  # each action its transition


def test_the_source_numbers_are_the_learners():
    assert (robot_actor.ONLINE, robot_actor.INTERVENTION) == (Source.ONLINE, Source.INTERVENTION)


def test_an_actor_of_another_task_or_with_nan_is_not_run_and_no_older_one_takes_its_place():
    robot, link, state, bundle = _robot()
    robot.begin_episode()
    state(0.0)
    assert robot.tick(0.0, None, False).moving and robot.policy is not None
    torch.manual_seed(1)
    low, high = torch.tensor(bundle.action_low, dtype=torch.float32), torch.tensor(bundle.action_high, dtype=torch.float32)
    other = actor_arrays(TanhGaussianActor(bundle.observation_size + 3, bundle.action_size, [16, 16], "relu", low, high),
                         "relu")
    link.weights = lambda: (2, other)
    state(0.02)
    held = robot.tick(0.02, None, False)
    assert not held.moving and "another task" in held.reason and robot.policy is None
    broken = {**link.arrays, "mean": {"weight": link.arrays["mean"]["weight"] * np.nan,
                                      "bias": link.arrays["mean"]["bias"]}}
    link.weights = lambda: (3, broken)
    robot.begin_episode()
    state(0.04)
    held = robot.tick(0.04, None, False)
    assert not held.moving and "NaN" in held.reason and robot.policy is None
    link.weights = lambda: (4, link.arrays)  # a good one again
    robot.begin_episode()
    state(0.06)
    assert robot.tick(0.06, None, False).moving


def test_a_completed_episode_is_counted_with_its_success_and_interventions():
    robot, link, state, _ = _robot(steps_per_batch=100, episode_steps=50, end_on_success=True)
    robot.begin_episode()
    for step in range(5):
        state(0.02 * step)
        robot.tick(0.02 * step, np.array([0.0, 0.0, 1.0, 1.0]) if step < 2 else None, success=step == 4)
    assert (robot.episodes, robot.successes, robot.transitions, robot.intervention_steps) == (1, 1, 4, 2)
    assert robot.last_episode == (True, 4, 2)
    for step in range(5, 9):  # waiting for the reset: the episode ended, none was dropped
        state(0.02 * step)
        assert not robot.tick(0.02 * step, None, False).moving
    assert robot.dropped_episodes == 0


def test_without_end_on_success_each_success_tick_is_rewarded_and_the_episode_runs_its_length():
    """The task's own semantics (sim.arm's end_on_success false): the detector's verdict every tick, no terminal
    transition, the episode cut at its length, counted a success if the detector ever said so."""
    robot, link, state, _ = _robot(steps_per_batch=100, episode_steps=6)
    robot.begin_episode()
    verdicts = [False, False, True, True, False, True, True, True]
    moving = []
    for step, success in enumerate(verdicts):
        state(0.02 * step)
        moving.append(robot.tick(0.02 * step, None, success).moving)
    assert moving == [True] * 6 + [False] * 2
    (batch,) = link.batches
    (_, fields), = batch["tagged"]
    assert fields["reward"].tolist() == [0.0, 1.0, 1.0, 0.0, 1.0, 1.0]  # the verdict after each action
    assert not fields["terminated"].any() and batch["returns"] == [4.0]
    assert robot.last_episode == (True, 6, 0) and robot.successes == 1


def test_every_nth_episode_is_evaluated_with_the_mean_action_and_counts_only_without_the_person():
    """HIL-SERL's measure on the robot: the actor's mean action, a success only if nobody took over; an
    evaluation episode that is dropped is done again."""
    robot, link, state, _ = _robot(steps_per_batch=100, episode_steps=3, evaluate_every=2)
    mean_action = GaussianActor(link.arrays).mean_action

    def episode(interventions=(None, None, None, None), success_at=3):  # 3 transitions: 4 ticks
        announced = robot.next_is_evaluation  # what the node tells the person before the reset
        robot.begin_episode()
        assert robot.evaluating == announced
        for step, intervention in enumerate(interventions):
            state(0.02 * step)
            robot.tick(0.02 * step, intervention, success=step == success_at)
        return robot.evaluating

    assert not episode() and robot.evaluations == []     # 1st: exploration
    evaluating = episode()                               # 2nd: evaluation
    (_, sent), = link.batches[-1]["tagged"]
    assert evaluating and robot.evaluations == [(3, True)]
    # the mean action, sent to the learner like any other episode's
    np.testing.assert_allclose(sent["action"], mean_action(sent["obs"].astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert not episode()                                 # 3rd: exploration
    robot.begin_episode()                                # 4th, an evaluation, dropped: the learner is lost
    assert robot.evaluating
    state(0.0)
    robot.tick(0.0, None, False)
    link.connected = False
    robot.tick(0.02, None, False)
    link.connected = True
    person = np.array([0.0, 0.0, 1.0, 1.0])
    evaluating = episode(interventions=(None, person, None, None))  # done again; the person took over once
    assert evaluating and robot.evaluations == [(3, True), (9, False)]
