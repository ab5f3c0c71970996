"""The learner's actor as arrays on the robot (robo_rl_ros.core.exploration): numpy reproduces the torch
actor it was published from, and arrays it cannot run are refused with one clear error."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from robo_rl.agents.networks import ACTIVATIONS, TanhGaussianActor
from robo_rl.distributed.inbox import actor_arrays
from robo_rl_ros.core.exploration import ActorArraysError, GaussianActor


def _actor(activation: str, layer_norm: bool) -> TanhGaussianActor:
    torch.manual_seed(0)
    actor = TanhGaussianActor(7, 3, [16, 12], activation, torch.tensor([-1.0, 0.0, -2.0]),
                              torch.tensor([1.0, 0.5, 2.0]), layer_norm)
    with torch.no_grad():  # spread the log-std head so that both bounds are exercised
        actor.log_std.weight.mul_(20.0)
    return actor


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("layer_norm", [False, True])
def test_numpy_samples_what_the_torch_actor_samples(activation, layer_norm):
    actor = _actor(activation, layer_norm)
    robot = GaussianActor(actor_arrays(actor, activation))
    obs = torch.randn(64, 7) * 3.0
    noise = torch.randn(64, 3)
    with torch.no_grad():
        expected, _ = actor.sample(obs, noise)
        deterministic = actor.deterministic(obs)
    np.testing.assert_allclose(robot.sample(obs.numpy(), noise.numpy()), expected.numpy(), atol=1e-5)  # float64 here, float32 there
    np.testing.assert_allclose(robot.mean_action(obs.numpy()), deterministic.numpy(), atol=1e-5)
    assert robot.observation_size == 7 and robot.action_size == 3


@pytest.mark.parametrize("damage,message", [
    (lambda a: a.update(format=2), "format"),
    (lambda a: a.update(activation="gelu"), "activation"),
    (lambda a: a.pop("mean"), "lack"),
    (lambda a: a["layers"][1].update(weight=np.zeros((12, 5), np.float32)), "do not chain"),
    (lambda a: a["mean"]["bias"].__setitem__(0, np.nan), "NaN"),
    (lambda a: a.update(action_scale=np.ones(2, np.float32)), "do not chain"),
])
def test_arrays_it_cannot_run_are_refused_with_one_error(damage, message):
    arrays = copy.deepcopy(actor_arrays(_actor("relu", False), "relu"))
    damage(arrays)
    with pytest.raises(ActorArraysError, match=message):
        GaussianActor(arrays)
