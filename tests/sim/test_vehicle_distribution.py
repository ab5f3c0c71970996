"""The distribution of vehicles: drawn within its ranges, identically on every simulation path, and flown
alike by every path (MuJoCo single, MuJoCo batch, torch eager, the native step)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from sim.errors import ConfigError
from sim.quadrotor.config import make_config
from sim.quadrotor.env import QuadrotorVectorEnv
from tests.sim.conftest import fixed_randomization, native_and_eager

# Wide ranges, every one of them drawn (what a family-of-vehicles training distribution exercises)
WIDE: dict[str, Any] = {
    "mass_scale": (0.9, 1.6), "inertia_scale": (0.9, 1.1), "inertia_size_scale": (0.5, 8.0), "arm_length_scale": (0.8, 1.3),
    "thrust_to_weight": (1.4, 3.0), "thrust_curve_linear_share": (0.0, 0.5), "thrust_scale": (0.95, 1.05),
    "yaw_torque_scale": (0.7, 3.0), "motor_tau_scale": (0.5, 1.5), "motor_tau_rise_scale": (0.3, 1.0),
    "motor_tau_fall_scale": (1.0, 2.0), "latency_steps": (0, 3), "disturbance_force": 0.01,
    "disturbance_torque": 1e-5,
}
NOISE_OFF = {"observation_noise": {"position": 0, "orientation": 0, "velocity": 0, "angular_velocity": 0}}


def _thrust_to_weight(params: dict[str, np.ndarray], gravity: float) -> np.ndarray:
    """4 thrust_max / (m g) of drawn vehicles, rotors' own errors left out."""
    return 4.0 * params["thrust_curve"].sum(1) / (params["mass"] * gravity)


@pytest.mark.parametrize("path", ["mujoco_batch", "torch_eager", "torch_native"])
def test_every_path_draws_the_distribution_within_its_ranges(path):
    backend = "mujoco_batch" if path == "mujoco_batch" else "torch"
    compile = {"torch_eager": False, "torch_native": "native"}.get(path, False)
    env = QuadrotorVectorEnv("hover", num_envs=3000, backend=backend, device="cpu", compile=compile,
                             randomization=WIDE)
    _, info = env.reset(seed=0)
    p, nominal = info["params"], env.batch.params
    for name, field in (("mass_scale", "mass"), ("arm_length_scale", "arm_scale")):
        value = p[field] / (nominal.mass if field == "mass" else 1.0)
        low, high = WIDE[name]
        assert value.min() >= low and value.max() <= high and value.max() - value.min() > 0.9 * (high - low), name
    size = p["inertia"] / nominal.inertia  # per-axis scale times one size scale, drawn log-uniformly
    assert size.min() >= 0.5 * 0.9 and size.max() <= 8.0 * 1.1
    log_size = np.log(size.mean(1))
    assert abs(np.median(log_size) - np.log(2.0)) < 0.1  # the geometric middle of [0.5, 8], not the arithmetic
    ratio = _thrust_to_weight(p, nominal.gravity)
    assert ratio.min() >= 1.4 - 1e-9 and ratio.max() <= 3.0 + 1e-9 and ratio.min() < 1.45 and ratio.max() > 2.95
    # the curve keeps its shape's bounds: thrust at zero speed falls with the linear share, full speed is thrust_max
    share = 1.0 - p["thrust_curve"][:, 2] / (nominal.thrust_curve[2] * p["thrust_curve"].sum(1) / nominal.thrust_max)
    assert share.min() >= -1e-9 and share.max() <= 0.5 + 1e-9 and share.max() > 0.49
    rise = p["motor_tau_rise"] / nominal.motor_tau_rise
    fall = p["motor_tau_fall"] / nominal.motor_tau_fall
    assert rise.min() >= 0.15 - 1e-12 and rise.max() <= 1.5 + 1e-12
    assert fall.min() >= 0.5 - 1e-12 and fall.max() <= 3.0 + 1e-12
    assert abs(np.corrcoef(np.log(rise), np.log(fall))[0, 1]) < 0.8  # drawn independently, not one scale
    assert np.abs(p["disturbance_force"]).max() <= 0.01 and np.abs(p["disturbance_force"]).max() > 0.0099
    assert set(np.unique(p["latency_steps"])) == {0, 1, 2, 3}
    # the drawn values are what the simulation holds
    if backend == "torch":
        np.testing.assert_allclose(env.batch.physics.arm_scale.numpy(), p["arm_scale"], rtol=1e-6)
        np.testing.assert_allclose(env.batch.thrust_curve.numpy().T, p["thrust_curve"], rtol=1e-6)
    else:
        rotors = env.batch.physics._rotors
        arm = np.abs(env.batch.physics._site_pos[:, rotors, 0]) / np.abs(env.batch.physics._rotor_positions[:, 0])
        np.testing.assert_allclose(arm, np.repeat(p["arm_scale"][:, None], 4, 1), rtol=1e-12)
        np.testing.assert_allclose(env.batch.thrust_curve.T, p["thrust_curve"], rtol=1e-12)


def test_the_same_seed_draws_the_same_vehicles_on_every_path():
    """Reset and restarts inside the native step draw what numpy draws (the kernel draws restarts in C++)."""
    def draw(backend: str, compile: bool | str) -> dict[str, np.ndarray]:
        env = QuadrotorVectorEnv("hover", num_envs=64, backend=backend, device="cpu", compile=compile,
                                 randomization=WIDE)
        _, info = env.reset(seed=5)
        return info["params"]

    reference = draw("mujoco_batch", False)
    for backend, compile in (("torch", False), ("torch", "native")):
        got = draw(backend, compile)
        for name, value in reference.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, err_msg=f"{backend} {compile} {name}")


def test_the_native_step_restarts_episodes_with_the_distribution_as_the_eager_step_does():
    """Over a rollout with many crashes, the kernel's restarts (drawn in C++), states, observations and
    privileged observations equal the eager step's with every range of the distribution drawn."""
    native, eager = native_and_eager(make_config("hover", randomization={**WIDE, **NOISE_OFF}), 40, seed=2)
    rng = np.random.default_rng(0)
    restarts = 0
    for _ in range(150):
        action = torch.as_tensor(rng.uniform(0.1, 1.0, (40, 4)), dtype=torch.float32)
        got, want = native.step(action), eager.step(action)
        done = (want.terminated | want.truncated).numpy()
        restarts += int(done.sum())
        np.testing.assert_array_equal(got.terminated, want.terminated)
        np.testing.assert_allclose(got.observation, want.observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.privileged_observation, want.privileged_observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(native.physics.buffer, eager.physics.buffer, rtol=1e-4, atol=1e-4)
        for name, value in eager.params_info().items():
            np.testing.assert_allclose(native.params_info()[name], value, rtol=1e-12, err_msg=name)
    assert restarts > 40


# One drawn vehicle far from the nominal one (every range collapsed to a point, so every env and path
# flies the same vehicle): longer arms, a partly linear thrust curve at thrust-to-weight 1.8, heavier,
# slower to speed up than to slow down.
ODD_VEHICLE = fixed_randomization(
    mass_scale=(1.3, 1.3), inertia_scale=(1.2, 1.2), inertia_size_scale=(1.4, 1.4), arm_length_scale=(1.25, 1.25), thrust_to_weight=(1.8, 1.8),
    thrust_curve_linear_share=(0.4, 0.4), yaw_torque_scale=(2.0, 2.0), motor_tau_rise_scale=(0.5, 0.5),
    motor_tau_fall_scale=(1.5, 1.5),
)
ARENA = {"center": (0.0, 0.0, 30.0), "max_position_error": 100.0, "max_speed": 100.0}
INIT = {"position": [0.1, -0.1, 30.1], "quaternion": [0.98, 0.1, -0.05, 0.1],
        "velocity": [0.3, -0.2, 0.1], "angular_velocity": [0.5, -0.8, 1.0]}


def _fly(make: Any, actions: np.ndarray) -> np.ndarray:
    env = make()
    env.reset(seed=0, options={"initial_state": INIT})
    states = []
    for action in actions:
        env.step(np.tile(action, (env.num_envs, 1)) if isinstance(env, QuadrotorVectorEnv) else action)
        physics = env.unwrapped.batch.physics
        states.append(np.concatenate([np.asarray(x)[:, 0] for x in physics.state()]))
    return np.array(states)


@pytest.mark.parametrize("backend, dtype, tolerance", [
    ("mujoco_batch", torch.float64, 1e-12), ("torch", torch.float64, 1e-9), ("torch", torch.float32, 2e-3)])
def test_every_path_flies_a_drawn_vehicle_as_mujoco_does(excitation, backend, dtype, tolerance):
    """The rotor arms (MuJoCo's site positions, the torch step's moment factor) and the plant's thrust curve
    act alike on every path: the same trajectory as the single MuJoCo env's for the same drawn vehicle."""
    single = _fly(lambda: gym.make("robo_rl/CrazyflieHover-v0", **ARENA, **ODD_VEHICLE), excitation)
    nominal = _fly(lambda: gym.make("robo_rl/CrazyflieHover-v0", **ARENA, **fixed_randomization()), excitation)
    assert np.abs(single - nominal).max() > 0.1  # the drawn vehicle flies differently from the nominal one
    torch_only = {"device": "cpu", "dtype": dtype} if backend == "torch" else {}  # MuJoCo steps in float64
    batched = _fly(lambda: QuadrotorVectorEnv("hover", num_envs=2, backend=backend, **torch_only, **ARENA,
                                              **ODD_VEHICLE), excitation)
    np.testing.assert_allclose(batched, single, rtol=0, atol=tolerance)


def test_the_privileged_observation_shows_the_drawn_vehicle():
    env = QuadrotorVectorEnv("hover", num_envs=8, backend="torch", device="cpu", privileged=True,
                             randomization={**WIDE, **NOISE_OFF})
    _, info = env.reset(seed=1)
    p, nominal, batch = info["params"], env.batch.params, env.batch
    hidden = np.asarray(info["privileged_obs"])[:, env.layout.size + 4 + 12:]
    np.testing.assert_allclose(hidden[:, 0:3], p["inertia"] / nominal.inertia - 1.0, atol=1e-5)
    np.testing.assert_allclose(hidden[:, 3], p["arm_scale"] - 1.0, atol=1e-6)
    np.testing.assert_allclose(hidden[:, 4], p["yaw_torque_coefficients"][:, 0] / nominal.yaw_torque_coefficients[0] - 1,
                               atol=1e-5)
    np.testing.assert_allclose(hidden[:, 5:8], (p["thrust_curve"] - nominal.thrust_curve) / nominal.thrust_max, atol=1e-5)
    per_step = np.exp(-batch.substeps * nominal.timestep / p["motor_tau_rise"])
    np.testing.assert_allclose(hidden[:, 8], per_step, atol=1e-5)


def test_reset_can_set_episode_parameters_and_refuses_bad_ones():
    env = QuadrotorVectorEnv("hover", num_envs=4, backend="torch", device="cpu", compile="native",
                             randomization={"latency_steps": (0, 3)})
    _, info = env.reset(seed=0, options={"params": {"latency_steps": [0, 1, 2, 3], "disturbance_force": [0.01, 0, 0]}})
    np.testing.assert_array_equal(info["params"]["latency_steps"], [0, 1, 2, 3])
    np.testing.assert_array_equal(env.batch.latency.numpy(), [0, 1, 2, 3])
    np.testing.assert_allclose(env.batch.physics.force.numpy().T, [[0.01, 0, 0]] * 4, rtol=1e-6)
    for params, message in (({"latency_steps": 4}, "whole steps in \\[0, 3\\]"), ({"wind": 1.0}, "unknown reset params"),
                            ({"mass": [1.0, 2.0]}, "must be a number or have shape")):
        with pytest.raises(ConfigError, match=message):
            env.reset(seed=0, options={"params": params})


@pytest.mark.parametrize("randomization, message", [
    ({"thrust_to_weight": (1.0, 2.0)}, "thrust_to_weight"),
    ({"arm_length_scale": (1.2, 0.9)}, "arm_length_scale must be a"),
    ({"thrust_curve_linear_share": (0.0, 1.5)}, "thrust_curve_linear_share"),
    ({"motor_tau_rise_scale": (-1.0, 1.0)}, "motor_tau_rise_scale"),
])
def test_a_bad_distribution_is_refused_with_one_clear_error(randomization, message):
    with pytest.raises(ConfigError, match=message):
        make_config("hover", randomization=randomization)


def test_inertia_can_follow_the_drawn_mass_and_arm_on_every_path():
    """With inertia_follows_mass_and_arm, the moments are the nominal ones times m / m0, (L / L0)^2 and the
    size and per-axis scales, drawn alike by numpy and the native step (which draws restarts in C++)."""
    coupled = {**WIDE, "inertia_follows_mass_and_arm": True}

    def draw(compile: bool | str, steps: int) -> dict[str, np.ndarray]:
        env = QuadrotorVectorEnv("hover", num_envs=64, backend="torch", device="cpu", compile=compile,
                                 randomization=coupled)
        env.reset(seed=5)
        for _ in range(steps):  # full thrust: every episode ends (out of the box) and restarts in the step
            env.step(np.ones((64, 4), dtype=np.float32))
        return env.batch.params_info()

    native, eager = draw("native", 60), draw(False, 60)
    assert (native["mass"] != QuadrotorVectorEnv("hover", num_envs=64, backend="torch", device="cpu",
                                                 randomization=coupled).reset(seed=5)[1]["params"]["mass"]).any()
    for name, value in eager.items():
        np.testing.assert_allclose(native[name], value, rtol=1e-12, err_msg=name)
    nominal = QuadrotorVectorEnv("hover", num_envs=1, backend="torch", device="cpu").batch.params
    size = native["inertia"] / nominal.inertia / ((native["mass"] / nominal.mass) * native["arm_scale"] ** 2)[:, None]
    assert size.min() >= 0.5 * 0.9 - 1e-12 and size.max() <= 8.0 * 1.1 + 1e-12


def test_difficulty_shrinks_every_range_towards_the_nominal_vehicle_on_every_path():
    """At difficulty 0 every drawn vehicle is the nominal one, without wind or latency; at 0.5 the ranges are
    halved around it (log-uniform ones in log space); the native step draws what numpy draws."""
    nominal = QuadrotorVectorEnv("hover", num_envs=1, backend="torch", device="cpu").batch.params

    def params(difficulty: float, backend: str = "mujoco_batch", compile: bool | str = False) -> dict[str, np.ndarray]:
        env = QuadrotorVectorEnv("hover", num_envs=500, backend=backend, device="cpu", compile=compile,
                                 randomization={**WIDE, "difficulty": difficulty})
        return env.reset(seed=0)[1]["params"]

    easy = params(0.0)
    np.testing.assert_allclose(easy["mass"], nominal.mass)
    np.testing.assert_allclose(easy["inertia"], np.tile(nominal.inertia, (500, 1)))
    np.testing.assert_allclose(easy["arm_scale"], 1.0)
    np.testing.assert_allclose(_thrust_to_weight(easy, nominal.gravity), 4 * nominal.thrust_max / (nominal.mass * nominal.gravity))
    assert not easy["disturbance_force"].any() and not easy["latency_steps"].any()
    half = params(0.5)
    assert half["mass"].max() <= nominal.mass * 1.3 and half["mass"].min() >= nominal.mass * 0.95
    assert set(np.unique(half["latency_steps"])) == {0, 1, 2}  # round(0.5 * 3)
    assert np.abs(half["disturbance_force"]).max() <= 0.005
    ratio = _thrust_to_weight(half, nominal.gravity)
    twr = 4 * nominal.thrust_max / (nominal.mass * nominal.gravity)
    assert ratio.min() >= twr + 0.5 * (1.4 - twr) - 1e-9 and ratio.max() <= twr + 0.5 * (3.0 - twr) + 1e-9
    native = params(0.5, "torch", "native")
    for name, value in half.items():
        np.testing.assert_allclose(native[name], value, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("path", ["mujoco_batch", "torch_eager", "torch_native"])
def test_each_drawn_vehicle_hovers_at_the_command_its_action_cost_is_centred_on(path):
    """The action reward term is centred on each drawn vehicle's own hover command (per rotor): commanding it
    costs nothing on every path and holds the vehicle where it started (rotors without lag, so that they
    start at its speed), where the nominal vehicle's command, on which the term was centred before, lets a
    weak vehicle fall and a strong one climb."""
    backend = "mujoco_batch" if path == "mujoco_batch" else "torch"
    compile = {"torch_eager": False, "torch_native": "native"}.get(path, False)
    still = {**WIDE, "disturbance_force": 0.0, "disturbance_torque": 0.0, "latency_steps": (0, 0),
             "motor_tau_scale": (0.0, 0.0), **NOISE_OFF}

    def fly(command: str) -> tuple[np.ndarray, np.ndarray, float]:
        env = QuadrotorVectorEnv("hover", num_envs=64, backend=backend, device="cpu", compile=compile,
                                 randomization=still, initial_state={"hover_fraction": 1.0})
        env.reset(seed=4)
        batch = env.batch
        from sim.kernel_expr import ArrayMath
        hover = np.stack([np.asarray(r, dtype=np.float64) for r in batch._hover_commands(ArrayMath(batch.xp))], 1)
        action = hover if command == "own" else np.full_like(hover, batch.params.hover_command)
        action_cost, ended = 0.0, np.zeros(64, dtype=bool)
        for _ in range(30):
            _, _, terminated, _, info = env.step(action.astype(np.float32))
            ended |= np.asarray(terminated)
            action_cost = max(action_cost, float(np.abs(np.asarray(info["reward_terms"]["action"])).max()))
        return hover, np.where(ended, np.inf, np.asarray(env.batch.physics.state()[2])[2]), action_cost

    hover, climb, cost = fly("own")
    assert hover.min() < 0.4 and hover.max() > 0.55  # the family spans weaker and stronger vehicles
    assert cost < 1e-9
    assert np.abs(climb).max() < 0.01, np.abs(climb).max()  # m/s after 0.3 s; none ended
    _, climb_nominal, cost_nominal = fly("nominal")  # the rotors' own thrust errors also tip some over
    assert np.abs(climb_nominal).max() > 0.3 and cost_nominal > 1e-3
