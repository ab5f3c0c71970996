"""The take-off-and-landing task: the floor on every path, its reference, its success (landed, still, motors
idle) and crash (tipped over on the floor), and its config."""

import math

import numpy as np
import pytest
import torch

from sim.errors import ConfigError
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.tasks import task_named
from sim.quadrotor.tasks.takeoff_land import CLIMB_HEIGHT, CLIMB_SECONDS, HOLD_SECONDS, LAND_SECONDS, TOUCHDOWN_DEPTH
from sim.kernel_expr import ArrayMath

PATHS = {"torch_eager": ("torch", False), "torch_native": ("torch", "native"), "mujoco_batch": ("mujoco_batch", False)}


def _batch(path: str, n: int = 4, **overrides) -> QuadrotorBatch:
    backend, compile = PATHS[path]
    config = make_config("takeoff_land", randomization={"enabled": False}, **overrides)
    return QuadrotorBatch(config, n, backend, seed=0, compile=compile, nthread=1)


def _as_numpy(x):
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("floor_height", [None, 0.3])
@pytest.mark.parametrize("path", list(PATHS))
def test_the_floor_holds_a_vehicle_without_thrust_where_it_stands(path, floor_height):
    """Motors off from a start on the floor: after 2 s the vehicle stands where it started, at the floor height
    (MuJoCo's soft contact within 2 mm), neither sinking nor sliding (the box around the climbing reference
    widened, so that the episode goes on). A raised floor too: MuJoCo's plane was left at 0, and the vehicle fell
    0.3 m through the floor the task and the torch path put it on."""
    raised = {} if floor_height is None else {"floor_height": floor_height, "center": (0.0, 0.0, floor_height)}
    batch = _batch(path, max_position_error=10.0, **raised)
    batch.reset()
    start = _as_numpy(batch.physics.state()[0]).copy()
    for _ in range(200):
        result = batch.step(np.zeros((4, 4)) if path == "mujoco_batch" else torch.zeros(4, 4))
        assert not _as_numpy(result.terminated).any()
    pos, _, vel, _ = (_as_numpy(x) for x in batch.physics.state())
    tolerance = 2e-3 if path == "mujoco_batch" else 1e-6
    np.testing.assert_allclose(pos[2], batch.config.floor_height, atol=tolerance)
    np.testing.assert_allclose(pos[:2], start[:2], atol=tolerance)
    np.testing.assert_allclose(vel, 0.0, atol=0.02 if path == "mujoco_batch" else 1e-6)


@pytest.mark.parametrize("path", ["torch_eager", "torch_native"])
def test_full_thrust_lifts_the_vehicle_off_the_floor(path):
    batch = _batch(path)
    batch.reset()
    for _ in range(20):
        batch.step(torch.ones(4, 4))
    assert (batch.physics.state()[0][2] > batch.config.floor_height + 0.05).all()


def test_the_reference_climbs_holds_and_lands_on_the_target_pad_smoothly():
    """Start pad at t=0, the hover point from the end of the climb through the hold, the landing pad from the end
    of the descent on; the reference velocity is the derivative of the reference position."""
    task, config = task_named("takeoff_land"), make_config("takeoff_land")
    m = ArrayMath(np)
    target = [np.array([0.2]), np.array([-0.1]), np.array([config.floor_height - TOUCHDOWN_DEPTH])]
    times = np.linspace(0.0, 6.0, 6001)
    position, velocity = task.reference(m, config, target, times)
    position, velocity = np.stack([np.broadcast_to(p, times.shape) for p in position]), np.stack(
        [np.broadcast_to(v, times.shape) for v in velocity])
    center = np.asarray(config.center)
    np.testing.assert_allclose(position[:, 0], center, atol=1e-12)
    hover = center + (0.0, 0.0, CLIMB_HEIGHT)
    for t in (CLIMB_SECONDS, CLIMB_SECONDS + HOLD_SECONDS):
        np.testing.assert_allclose(position[:, int(round(t * 1000))], hover, atol=1e-9)
    landed = int(round((CLIMB_SECONDS + HOLD_SECONDS + LAND_SECONDS) * 1000))
    np.testing.assert_allclose(position[:, landed:], np.broadcast_to(np.concatenate(target)[:, None], position[:, landed:].shape),
                               atol=1e-9)
    np.testing.assert_allclose(np.gradient(position, times, axis=1)[:, 1:-1], velocity[:, 1:-1], atol=2e-3)


@pytest.mark.parametrize("path", ["torch_eager", "torch_native"])
def test_success_is_standing_still_on_the_landing_pad_to_the_end(path):
    """A vehicle placed on the landing pad: with its motors off it succeeds once the reference has landed there
    and the window has passed; with 10% more than hover thrust it lifts off again and never does; 5 cm beyond
    the success radius it never does."""
    batch = _batch(path, n=3)
    pad = np.array([0.2, -0.1, batch.config.floor_height])
    positions = np.stack([pad, pad, pad + (batch.config.success_radius + 0.05, 0.0, 0.0)])
    target = pad - (0.0, 0.0, TOUCHDOWN_DEPTH)
    batch.reset(options={"initial_state": {"position": positions}, "target": np.stack([target] * 3)})
    hover = batch.constants.hover_command
    action = torch.tensor([[0.0] * 4, [1.1 * hover] * 4, [0.0] * 4], dtype=torch.float32)
    successes = []
    for _ in range(int(round(batch.config.episode_seconds * batch.config.control_hz))):
        result = batch.step(action)
        successes.append(_as_numpy(result.is_success).copy())
    successes = np.stack(successes)
    assert successes[-1].tolist() == [True, False, False]
    # not while the reference is still more than the radius above the pad, then to the end
    landed = int(round((CLIMB_SECONDS + HOLD_SECONDS + LAND_SECONDS) * 100))
    assert not successes[:landed, 0].any() and successes[landed + 100:, 0].all()


def test_tipping_over_on_the_floor_ends_the_episode():
    batch = _batch("torch_eager", n=2)
    tilted = [math.cos(math.radians(20)), math.sin(math.radians(20)), 0.0, 0.0]  # 40 degrees about x
    batch.reset(options={"initial_state": {"quaternion": np.stack([[1.0, 0.0, 0.0, 0.0], tilted])}})
    result = batch.step(torch.zeros(2, 4))
    assert _as_numpy(result.terminated).tolist() == [False, True]


def test_the_task_needs_a_floor():
    with pytest.raises(ConfigError, match="floor_height must be a height in \\[0, 1\\] m for the takeoff_land task"):
        make_config("takeoff_land", floor_height=None)
    with pytest.raises(ConfigError, match="floor_height must lie in"):
        make_config("takeoff_land", floor_height=-0.1)
