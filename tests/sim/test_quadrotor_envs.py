"""Gymnasium API, determinism, randomization ranges, tasks and bad configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from sim import QUADROTOR_ENV_IDS
from sim.errors import ConfigError
from sim.quadrotor import native_step
from sim.quadrotor.config import make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.env import QuadrotorVectorEnv
from tests.sim.conftest import NO_RANDOMIZATION, fixed_randomization

ENV_IDS = sorted(QUADROTOR_ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_env_checker_passes(env_id):
    check_env(gym.make(env_id).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
def test_make_vec_returns_the_batched_env(env_id, backend):
    env = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point", backend=backend, device="cpu")
    assert isinstance(env, QuadrotorVectorEnv)
    obs, info = env.reset(seed=0)
    assert tuple(obs.shape) == (4, env.layout.size) == env.observation_space.shape
    assert info["params"]["mass"].shape == (4,)
    obs, reward, terminated, truncated, info = env.step(np.full((4, 4), 0.68, dtype=np.float32))
    assert tuple(reward.shape) == (4,) and tuple(info["is_success"].shape) == (4,)
    assert set(info["reward_terms"]) >= {"position", "orientation", "alive"}


def _rollout(env_id: str, seed: int, steps: int = 60) -> np.ndarray:
    env = gym.make(env_id)  # randomization, noise and latency on
    obs, info = env.reset(seed=seed)
    out = [obs]
    rng = np.random.default_rng(123)
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(rng.uniform(0.6, 0.75, 4))
        out.append(np.append(obs, reward))
        if terminated or truncated:
            obs, _ = env.reset()
    return np.concatenate(out)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_rollout(env_id):
    np.testing.assert_array_equal(_rollout(env_id, 7), _rollout(env_id, 7))
    assert not np.array_equal(_rollout(env_id, 7), _rollout(env_id, 8))


@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
def test_vector_env_same_seed_same_rollout(backend):
    def run(seed: int) -> np.ndarray:
        env = QuadrotorVectorEnv("hover", num_envs=16, backend=backend, device="cpu")
        obs, _ = env.reset(seed=seed)
        rows = [np.asarray(obs)]
        for t in range(120):  # long enough for crashes and autoresets
            obs, reward, *_ = env.step(np.full((16, 4), 0.55 + 0.002 * t))
            rows.append(np.asarray(obs))
        return np.stack(rows)

    np.testing.assert_array_equal(run(3), run(3))


def _privileged_torch_rollout(steps: int, seed: int, **env_kwargs: Any) -> tuple[list[np.ndarray], int]:
    """Everything a privileged 32-env torch reach env returns over `steps` wide random commands (many
    crashes and restarts), observation noise off; and how many episodes restarted."""
    noise_off = {"observation_noise": {"position": 0, "orientation": 0, "velocity": 0, "angular_velocity": 0}}
    device = env_kwargs.pop("device", "cpu")
    env = QuadrotorVectorEnv("reach", num_envs=32, backend="torch", device=device, privileged=True,
                             randomization=noise_off | {"latency_steps": (0, 2)}, **env_kwargs)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    out, restarts = [np.asarray(obs), np.asarray(info["privileged_obs"])], 0
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(0.3, 0.9, (32, 4)).astype(np.float32))
        out += [np.asarray(obs), np.asarray(reward), np.asarray(terminated | truncated),
                np.asarray(info["privileged_obs"])]
        if "_final_obs" in info:
            ended = info["_final_obs"]
            restarts += int(ended.sum())
            out += [np.asarray(info["final_obs"])[ended], np.asarray(info["final_privileged_obs"])[ended],
                    info["params"]["mass"].copy(), info["params"]["target"].copy()]
    return out, restarts


@pytest.mark.parametrize("variant, reference, steps, seed, min_restarts, tolerance", [
    # restarts inside the step's kernel (with the privileged observations before and after) against
    # restarts from the host: the same episodes
    ({"autoreset": True}, {"autoreset": False}, 150, 5, 50, 1e-6),
    # the step compiled into one kernel (what the env groups train on) against the eager step: the same
    # values up to float32 rounding
    ({"compile": "inductor"}, {"compile": False}, 120, 7, 10, 1e-4),
    # the generated C++ step (the CPU default of compile=True) against the eager step
    ({"compile": "native"}, {"compile": False}, 120, 7, 10, 1e-4),
    # on a GPU: the compiled step (what compile=True picks there), restarts and their draws included
    pytest.param({"compile": True, "device": "cuda"}, {"compile": False, "device": "cuda"}, 120, 7, 10, 1e-4,
                 marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")),
], ids=["restart_in_step_vs_host", "inductor_vs_eager", "native_vs_eager", "cuda_compiled_vs_eager"])
def test_torch_step_variants_reproduce_the_reference_step(variant, reference, steps, seed, min_restarts, tolerance):
    """Alternative ways of running the torch step give the same observations, rewards, flags, final and
    privileged observations, and restarted episode parameters, over rollouts with many restarts."""
    out, restarts = _privileged_torch_rollout(steps, seed=seed, **variant)
    expected, _ = _privileged_torch_rollout(steps, seed=seed, **reference)
    assert restarts > min_restarts
    for a, b in zip(out, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


AVX2 = "avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


@pytest.mark.parametrize("task, autoreset, march", [
    ("figure_eight", False, "native"), ("hover", True, "native"), ("takeoff_land", True, "native"),
    pytest.param("hover", True, "x86-64-v3", marks=pytest.mark.skipif(not AVX2, reason="needs an AVX2 CPU")),
], ids=["figure_eight", "hover", "takeoff_land", "hover_built_for_avx2"])
def test_native_step_reproduces_the_eager_step_with_noise_and_a_partial_block(task, autoreset, march, monkeypatch):
    """The generated C++ step against the eager torch step, observation noise on, 37 envs (blocks of 16
    or 8 and a partial one): every output and the state after each step, over steps with restarts, a
    reseed with a partial reset, and a partial reset alone (after which the kernel's starts drawn ahead are
    stale for those envs). Also built for AVX2 without AVX-512 (8 lanes), which this CPU may not pick."""
    if march != "native":
        monkeypatch.setattr(native_step, "FLAGS", tuple(f.replace("native", march) for f in native_step.FLAGS))

    def batch(compile: bool | str) -> QuadrotorBatch:
        made = QuadrotorBatch(make_config(task), 37, "torch", seed=4, compile=compile, autoreset=autoreset)
        made.reset()
        return made

    native, eager = batch("native"), batch(False)
    assert native.compile == "native" and native.native is not None
    rng = np.random.default_rng(1)
    restarts = 0
    reset_from_python = np.arange(1, 37, 2)
    for step in range(200):
        if step == 80:
            most_episodes = int(native.episode.max())
            for made in (native, eager):
                made.seed(11)
                made.reset(np.arange(0, 37, 3))
        if step == 120:  # the kernel drew these envs' next starts ahead, for episodes a reset has used up
            for made in (native, eager):
                made.reset(reset_from_python)
            episodes_after_reset = native.episode[reset_from_python].clone()
        action = torch.as_tensor(rng.uniform(0.2, 0.95, (37, 4)), dtype=torch.float32)
        got, want = native.step(action), eager.step(action)
        done = (want.terminated | want.truncated).numpy()
        assert got.any_done == bool(done.any())  # the kernel's own reports, which env.step uses
        np.testing.assert_array_equal(got.ended, done)
        for name in ("terminated", "truncated", "is_success"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        np.testing.assert_allclose(got.observation, want.observation, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.reward, want.reward, rtol=1e-4, atol=1e-4)
        assert set(got.reward_terms) == set(want.reward_terms)
        for name, value in want.reward_terms.items():
            np.testing.assert_allclose(got.reward_terms[name], value, rtol=1e-4, atol=1e-4, err_msg=name)
        if autoreset:
            np.testing.assert_allclose(got.final_observation[done], want.final_observation[done], rtol=1e-4, atol=1e-4)
            restarts += int(done.sum())
            np.testing.assert_array_equal(native.episode, eager.episode)
            for name, value in eager.params_info().items():  # the restarted episodes' starts, drawn in C++
                np.testing.assert_allclose(native.params_info()[name], value, rtol=1e-12, err_msg=name)
        else:
            ids = np.flatnonzero(done)
            for made in (native, eager):
                made.reset(ids)
        np.testing.assert_allclose(native.physics.buffer, eager.physics.buffer, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(native.latency, eager.latency)
    assert restarts > 5 or not autoreset
    assert most_episodes >= 2 or not autoreset  # some env restarted twice inside the kernel before the reseed
    if autoreset:  # some env reset from Python then restarted inside the kernel (from a start drawn on the spot)
        assert (native.episode[reset_from_python] > episodes_after_reset).any()


def test_native_step_reuses_an_earlier_steps_outputs_only_when_none_of_them_is_held(monkeypatch):
    """NativeStep writes a step's outputs into an earlier step's array once nothing refers to that step's
    outputs any more; an output still held (a tensor view, a reward term, a numpy array) is never
    overwritten."""
    made = QuadrotorBatch(make_config("hover"), 37, "torch", seed=2, compile="native", autoreset=True)
    made.reset()
    rng = np.random.default_rng(0)

    def step():
        return made.step(torch.as_tensor(rng.uniform(0, 1, (37, 4)), dtype=torch.float32))

    first = step()
    distance = first.reward_terms["distance"]  # only a reward term of the first step stays held
    kept = distance.clone()
    del first
    second = step()
    second_numpy, second_kept = second.observation.numpy(), second.observation.clone()
    final, final_kept = second.final_observation, second.final_observation.clone()
    del second
    for _ in range(5):
        latest = step()
    torch.testing.assert_close(distance, kept, rtol=0, atol=0)
    np.testing.assert_array_equal(second_numpy, second_kept.numpy())
    torch.testing.assert_close(final, final_kept, rtol=0, atol=0, equal_nan=True)  # (rows of envs that went on: unset)
    del latest
    allocations = []
    empty_strided = torch.empty_strided
    monkeypatch.setattr(torch, "empty_strided", lambda *args, **kwargs: allocations.append(args)
                        or empty_strided(*args, **kwargs))
    held: list[Any] = [None]
    for _ in range(10):
        held[0] = step()  # until the next step returns, as a training loop holds its observation
    assert not allocations  # the two recent arrays take turns


@pytest.mark.parametrize("compile, dtype, message", [
    ("fast", torch.float32, "compile must be true, false, 'native' or 'inductor'"),
    ("native", torch.float64, "the native quadrotor step needs float32 tensors on a CPU"),
])
def test_bad_compile_option_raises_one_clear_error(compile, dtype, message):
    with pytest.raises(ConfigError, match=message):
        QuadrotorVectorEnv("hover", num_envs=2, backend="torch", device="cpu", dtype=dtype, compile=compile)


def test_a_kernel_that_does_not_build_falls_back_to_torch_compile_only_when_not_asked_for(monkeypatch):
    def fail(header_text: str):
        raise native_step.BuildError("building the native quadrotor step failed (g++ ...): no compiler today")

    monkeypatch.setattr(native_step, "build", fail)
    with pytest.warns(RuntimeWarning, match="no compiler today"):
        fallback = QuadrotorBatch(make_config("hover"), 2, "torch", compile=True)
    assert fallback.compile == "inductor" and fallback.native is None
    with pytest.raises(native_step.BuildError, match="no compiler today"):
        QuadrotorBatch(make_config("hover"), 2, "torch", compile="native")


def test_randomization_stays_in_its_ranges_and_is_reported():
    ranges = {"mass_scale": (0.8, 1.2), "inertia_scale": (0.7, 1.3), "thrust_scale": (0.9, 1.1),
              "yaw_torque_scale": (0.5, 1.5), "motor_tau_scale": (0.6, 1.4), "disturbance_force": 0.01,
              "disturbance_torque": 2e-5, "latency_steps": (1, 3)}
    env = QuadrotorVectorEnv("hover", num_envs=2000, backend="mujoco_batch", randomization=ranges)
    _, info = env.reset(seed=0)
    p, nominal = info["params"], env.batch.params
    assert np.all((p["mass"] >= 0.8 * nominal.mass) & (p["mass"] <= 1.2 * nominal.mass))
    ratio = p["inertia"] / nominal.inertia
    assert ratio.min() >= 0.7 and ratio.max() <= 1.3 and ratio.std() > 0.1
    assert p["thrust_scale"].min() >= 0.9 and p["thrust_scale"].max() <= 1.1
    yaw = p["yaw_torque_coefficients"] / nominal.yaw_torque_coefficients
    assert yaw.min() >= 0.5 and yaw.max() <= 1.5
    tau = p["motor_tau_rise"] / nominal.motor_tau_rise
    assert tau.min() >= 0.6 and tau.max() <= 1.4
    np.testing.assert_allclose(p["motor_tau_fall"] / nominal.motor_tau_fall, tau)
    assert np.abs(p["disturbance_force"]).max() <= 0.01 and np.abs(p["disturbance_torque"]).max() <= 2e-5
    assert set(np.unique(p["latency_steps"])) == {1, 2, 3}
    # the sampled values reach the simulation: per-simulation model fields of the MuJoCo batch
    np.testing.assert_allclose(env.batch.physics._mass[:, 1], p["mass"])


def test_latency_delays_the_applied_action_by_whole_steps(excitation):
    high = {"center": (0.0, 0.0, 30.0), "max_position_error": 100.0}
    delayed = gym.make("robo_rl/CrazyflieHover-v0", **high, **fixed_randomization(latency_steps=(2, 2)))
    prompt = gym.make("robo_rl/CrazyflieHover-v0", **high, **NO_RANDOMIZATION)
    for env in (delayed, prompt):
        env.reset(seed=0, options={"initial_state": {"position": (0, 0, 30)}})
    hover = prompt.unwrapped.batch.params.hover_command
    shifted = np.concatenate([np.full((2, 4), hover), excitation[:-2]])
    for a, b in zip(excitation, shifted):
        delayed.step(a)
        prompt.step(b)
        np.testing.assert_array_equal(delayed.unwrapped.data.qpos, prompt.unwrapped.data.qpos)


def test_observation_layout_names_every_entry():
    env = gym.make("robo_rl/CrazyflieHover-v0", action_history=32, **NO_RANDOMIZATION)
    layout = env.unwrapped.layout
    assert layout.size == 146 == env.observation_space.shape[0]  # learning-to-fly's actor input
    assert [f["name"] for f in layout.to_dict()] == [
        "position_error", "rotation_matrix", "velocity_error", "angular_velocity", "action_history"]
    obs, _ = env.reset(options={"initial_state": {"position": (0.1, 0.2, 0.9), "velocity": (0.5, 0, 0)}})
    s = layout.slices()
    np.testing.assert_allclose(obs[s["position_error"]], [0.1, 0.2, -0.1], atol=1e-6)
    np.testing.assert_allclose(obs[s["rotation_matrix"]], np.eye(3).ravel())
    np.testing.assert_allclose(obs[s["velocity_error"]], [0.5, 0, 0])


def test_hovering_at_the_target_succeeds_and_leaving_the_arena_terminates():
    env = gym.make("robo_rl/CrazyflieHover-v0", **NO_RANDOMIZATION)
    env.reset(options={"initial_state": {}})
    hover = np.full(4, env.unwrapped.batch.params.hover_command)
    successes = [env.step(hover)[4]["is_success"] for _ in range(120)]
    assert not successes[98] and all(successes[99:])  # after the 1 s window, not before
    env.reset(options={"initial_state": {"velocity": (3.0, 0, 0)}})
    for step in range(100):
        _, reward, terminated, truncated, info = env.step(hover)
        if terminated:
            break
    assert terminated and not truncated and info["reward_terms"]["termination"] == 1.0
    assert step == pytest.approx(20, abs=2)  # 0.6 m at 3 m/s
    env.reset(options={"initial_state": {"velocity": (3.0, 3.0, 0)}})
    steps = next(i for i in range(100) if env.step(hover)[2])
    assert steps == pytest.approx(20, abs=2)  # the arena is a box: 0.6 m per axis, not a 0.6 m sphere


def test_episode_truncates_at_the_time_limit():
    env = gym.make("robo_rl/CrazyflieHover-v0", episode_seconds=0.5, success_window_seconds=0.2,
                   **NO_RANDOMIZATION)
    env.reset(options={"initial_state": {}})
    hover = np.full(4, env.unwrapped.batch.params.hover_command)
    flags = [env.step(hover)[3] for _ in range(50)]
    assert flags == [False] * 49 + [True]


@pytest.mark.parametrize("env_id", ["robo_rl/CrazyflieReach-v0", "robo_rl/CrazyflieHover-v0"])
def test_reward_is_the_sum_of_scaled_named_terms(env_id):
    env = gym.make(env_id)
    env.reset(seed=1)
    _, reward, _, _, info = env.step(np.full(4, 0.7))
    scales = env.unwrapped.config.reward_scales
    assert reward == pytest.approx(sum(scales[k] * v for k, v in info["reward_terms"].items()))
    terms = info["reward_terms"]
    assert terms["distance"] == pytest.approx(np.sqrt(terms["position"]))
    assert terms["speed"] == pytest.approx(np.sqrt(terms["velocity"]))
    radius = env.unwrapped.config.success_radius
    assert terms["proximity"] == pytest.approx(np.exp(-terms["position"] / radius**2))


def test_reach_targets_and_figure_eight_reference():
    env = QuadrotorVectorEnv("reach", num_envs=500, backend="mujoco_batch")
    _, info = env.reset(seed=0)
    offset = info["params"]["target"] - np.array(env.config.center)
    assert np.all(np.abs(offset) <= np.array(env.config.reach_range)) and offset.std(0).min() > 0.1
    eight = QuadrotorVectorEnv("figure_eight", num_envs=1, backend="torch", device="cpu", dtype=torch.float64,
                               **NO_RANDOMIZATION)
    obs, _ = eight.reset(options={"initial_state": {}})
    hover = np.full((1, 4), eight.batch.params.hover_command)
    quarter = int(eight.config.figure_eight_period * eight.config.control_hz / 4)
    for _ in range(quarter):
        obs, *_ = eight.step(hover)
    # a quarter lap in, the reference is at +x amplitude, the vehicle still at the centre
    np.testing.assert_allclose(obs[0, :3].numpy(), [-eight.config.figure_eight_amplitude, 0, 0], atol=1e-9)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vehicle_overrides": {"mass": -0.03}}, "mass must be > 0"),
        ({"task": "backflip"}, "unknown quadrotor task 'backflip'"),
        ({"vehicle": "crazyflie_9000"}, "unknown vehicle 'crazyflie_9000'"),
        ({"randomization": {"mass_scale": (1.2, 0.8)}}, "mass_scale must be a"),
        ({"randomization": {"latency": 3}}, "unknown option config.randomization.latency"),
        ({"control_hz": 333.0}, "must divide the physics rate"),
        ({"reward_scales": {"style": 1.0}}, "unknown reward terms"),
        ({"vehicle_overrides": {"inertia": (1e-5, -1e-5, 1e-5)}}, "inertia must be positive"),
    ],
)
def test_bad_configuration_raises_one_clear_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        gym.make("robo_rl/CrazyflieHover-v0", **kwargs)


def test_bad_actions_raise_clear_errors():
    env = gym.make("robo_rl/CrazyflieHover-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        env.step(np.zeros(3))
    with pytest.raises(ValueError, match="NaN or Inf"):
        env.step(np.array([0.5, np.nan, 0.5, 0.5]))
    venv = QuadrotorVectorEnv("hover", num_envs=3, backend="torch", device="cpu")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have shape \(3, 4\)"):
        venv.step(np.zeros((4, 4)))
    with pytest.raises(ConfigError, match="unknown backend"):
        QuadrotorVectorEnv("hover", num_envs=2, backend="jax")


@pytest.mark.parametrize("backend, num_envs", [("mujoco", 1), ("mujoco_batch", 3)])
def test_a_simulation_that_mujoco_resets_after_diverging_ends_its_episode_as_a_failure(backend, num_envs):
    """MuJoCo puts a simulation whose state became huge back at its initial state, hovering at the origin: the
    episode went on as if nothing had happened, and could end in success."""
    batch = QuadrotorBatch(make_config("hover"), num_envs, backend=backend)
    batch.reset()
    pos, quat, vel, angvel = (np.array(a) for a in batch.physics.state())
    angvel[:, 0] = 1e11  # beyond what MuJoCo accepts (mjMAXVAL): it warns and resets the first simulation
    ids = np.arange(num_envs)
    batch.physics.set_state(ids, pos.T, quat.T, vel.T, angvel.T)
    result = batch.step(np.full((num_envs, 4), 0.5, dtype=np.float32))
    assert np.isfinite(batch.physics.state()[0]).all()  # what made the divergence invisible
    assert list(result.terminated) == [True] + [False] * (num_envs - 1)
    assert not result.is_success[0]
    result = batch.step(np.full((num_envs, 4), 0.5, dtype=np.float32))
    assert not result.terminated.any()  # the flag is about one step, not the simulation's history


@pytest.mark.parametrize("compile", [False, "native"])
def test_a_non_finite_action_raises_and_leaves_the_batch_as_it_was(compile):
    env = QuadrotorVectorEnv("hover", num_envs=37, backend="torch", device="cpu", compile=compile)
    env.reset(seed=0)
    before = env.batch.physics.buffer.clone(), env.batch.steps.clone(), env.batch.history.clone()
    for bad in (np.nan, np.inf, -np.inf):
        action = np.full((37, 4), 0.5)
        action[36, 2] = bad  # in the partial last block of the native step
        with pytest.raises(ValueError, match="NaN or Inf"):
            env.step(action)
    after = env.batch.physics.buffer, env.batch.steps, env.batch.history
    for was, now in zip(before, after):
        torch.testing.assert_close(now, was, rtol=0, atol=0)
    env.step(np.full((37, 4), 0.5))  # and it steps on


@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
def test_privileged_observation_is_the_noise_free_state_plus_hidden_variables(backend):
    env = QuadrotorVectorEnv("hover", num_envs=6, backend=backend, device="cpu", privileged=True,
                             randomization={"observation_noise": {"position": 0.0, "orientation": 0.0,
                                                                  "velocity": 0.0, "angular_velocity": 0.0}})
    obs, info = env.reset(seed=3)
    size = env.layout.size
    assert np.asarray(info["privileged_obs"]).shape == (6, env.privileged_size)
    np.testing.assert_allclose(np.asarray(info["privileged_obs"])[:, :size], np.asarray(obs), atol=1e-6)
    for _ in range(60):  # uniform random thrusts: most episodes end and restart within 60 steps
        obs, _, terminated, truncated, info = env.step(np.random.default_rng(0).uniform(0, 1, (6, 4)))
        privileged = np.asarray(info["privileged_obs"])
        np.testing.assert_allclose(privileged[:, :size], np.asarray(obs), atol=1e-5)  # after autoreset too
        rotor_speed = np.asarray(env.batch.rotor_speed).T
        np.testing.assert_allclose(privileged[:, size:size + 4], rotor_speed, atol=1e-6)
        if "_final_obs" in info:
            ended = info["_final_obs"]
            np.testing.assert_allclose(np.asarray(info["final_privileged_obs"])[ended, :size],
                                       np.asarray(info["final_obs"])[ended], atol=1e-5)
    mass_error = env.batch.params_info()["mass"] / env.batch.params.mass - 1.0
    np.testing.assert_allclose(privileged[:, size + 4], mass_error, atol=1e-6)


@pytest.mark.parametrize("backend", ["torch", "mujoco_batch"])
def test_a_privileged_actor_observes_the_privileged_rows_including_where_episodes_end(backend):
    """A teacher's observation is the asymmetric critic's row: at reset, on steps, and as the final observation
    of an episode that ended (falling envs end within the rollout)."""
    kwargs = {"device": "cpu", "compile": True} if backend == "torch" else {}
    env = QuadrotorVectorEnv("hover", num_envs=8, backend=backend, config={"state_history": 2},
                             privileged_actor=True, **kwargs)
    plain = QuadrotorVectorEnv("hover", num_envs=8, backend=backend, config={"state_history": 2}, **kwargs)
    assert env.single_observation_space.shape == (env.privileged_size,) == (plain.privileged_size,)
    assert env.privileged_size > plain.single_observation_space.shape[0]
    obs, info = env.reset(seed=3)
    np.testing.assert_array_equal(np.asarray(obs), np.asarray(info["privileged_obs"]))
    ended = 0
    for _ in range(200):  # zero thrust: every env falls and restarts
        zeros = np.zeros((8, 4), np.float32)
        obs, _, _, _, info = env.step(torch.as_tensor(zeros) if backend == "torch" else zeros)
        np.testing.assert_array_equal(np.asarray(obs), np.asarray(info["privileged_obs"]))
        if "final_obs" in info:
            rows = np.asarray(info["_final_obs"])
            np.testing.assert_array_equal(np.asarray(info["final_obs"])[rows],
                                          np.asarray(info["final_privileged_obs"])[rows])
            ended += int(rows.sum())
    assert ended >= 8


def test_rendering_without_any_opengl_says_what_to_set():
    """Headless, with MUJOCO_GL unset: GLFW's warnings, then mujoco.FatalError "an OpenGL platform library has not
    been loaded into this process"."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    code = ("import gymnasium as gym, sim\nenv = gym.make('robo_rl/CrazyflieHover-v0', render_mode='rgb_array')\n"
            "env.reset(seed=0)\ntry:\n    env.render()\nexcept RuntimeError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "MuJoCo found no OpenGL to render with" in done.stdout and "set MUJOCO_GL=egl" in done.stdout, done.stdout
