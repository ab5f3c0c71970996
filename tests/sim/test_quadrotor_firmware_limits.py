"""The flight firmware's thrust limits in the simulator (config.firmware_thrust_max / firmware_thrust_min).

On a Crazyflie the app's command c becomes the force c * thrust_max / THRUST_MAX, clamped to [0, 1], and a
motor below THRUST_MIN is off; the simulator can fly (and train) with the same limits, and its action
history then holds what the motors got, as the firmware app's does. The eager and native steps agree.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim.errors import ConfigError
from sim.quadrotor import motor
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from tests.sim.conftest import NO_RANDOMIZATION

CF21 = {"firmware_thrust_max": 0.12, "firmware_thrust_min": 0.012817578393224994}  # platform_defaults_cf2.h


def test_command_limits_are_the_firmware_limits_as_fractions_of_thrust_max():
    # the learning-to-fly vehicle (0.149 N per rotor) flown on a stock CF2.1: 81% and 8.6%
    largest, cutoff = motor.command_limits(0.149, **CF21)
    assert largest == pytest.approx(0.12 / 0.149) and cutoff == pytest.approx(0.012817578393224994 / 0.149)
    assert motor.command_limits(0.11, 0.12, 0.0) == (1.0, 0.0)  # the firmware gives this vehicle its full range
    assert motor.command_limits(0.149, 0.0, 0.0) == (1.0, 0.0)  # not modelled
    with pytest.raises(ConfigError, match="firmware_thrust_min"):
        motor.command_limits(0.149, 0.05, 0.06)
    with pytest.raises(ConfigError, match="firmware_thrust_max"):
        make_config("hover", firmware_thrust_max=float("nan"))


def test_motors_and_history_get_the_limited_command():
    config = make_config("hover", **CF21, **NO_RANDOMIZATION)
    batch = QuadrotorBatch(config, 1, "torch", dtype=torch.float64, compile=False)
    batch.reset()
    largest, cutoff = motor.command_limits(float(batch.params.thrust_max), **CF21)
    assert largest < 1.0 and cutoff > 0.0  # the hover task's vehicle (learning-to-fly's): both bite
    action = np.array([[1.0, 0.95 * cutoff, 1.05 * cutoff, 0.5]])
    flown = np.array([largest, 0.0, 1.05 * cutoff, 0.5])
    result = batch.step(torch.as_tensor(action))
    history = np.asarray(result.observation)[0, batch.layout.slices()["action_history"]][:4]
    np.testing.assert_allclose(history, flown, rtol=0, atol=1e-12)
    # the rotors are driven towards the limited command's speed, not the action's
    unlimited = QuadrotorBatch(make_config("hover", **NO_RANDOMIZATION), 1, "torch", dtype=torch.float64, compile=False)
    unlimited.reset()
    unlimited.step(torch.as_tensor(flown[None]))
    np.testing.assert_allclose(np.asarray(batch.rotor_speed), np.asarray(unlimited.rotor_speed), rtol=0, atol=1e-12)


def test_native_step_applies_the_same_limits_as_the_eager_step():
    config = make_config("hover", **CF21)

    def batch(compile: bool | str) -> QuadrotorBatch:
        made = QuadrotorBatch(config, 19, "torch", seed=3, compile=compile)
        made.reset()
        return made

    native, eager = batch("native"), batch(False)
    assert native.native is not None
    rng = np.random.default_rng(2)
    for _ in range(40):
        # around hover, with commands beyond the clamp and under the cutoff on every step
        action = rng.uniform(0.0, 1.0, (19, 4)).astype(np.float32)
        action[:, 0] = rng.uniform(0.0, 0.1, 19)
        action[:, 1] = rng.uniform(0.85, 1.0, 19)
        got, want = native.step(torch.as_tensor(action)), eager.step(torch.as_tensor(action))
        np.testing.assert_allclose(got.observation, want.observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.reward, want.reward, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got.terminated, want.terminated)
