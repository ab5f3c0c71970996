"""Every numeric field of every env's config: NaN, Inf, a huge value and a wrong type are refused with one
ConfigError naming the field, and valid configs keep working."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import pytest
import torch

import sim  # noqa: F401  (registers the env ids)
from sim.arm.env import ARM_RANGES, ArmTaskConfig, ArmVectorEnv, make_arm_config
from sim.errors import ConfigError
from sim.quadrotor.config import RANGES, default_config, make_config
from sim.quadrotor.model import VEHICLES
from sim.registration import ARM_ENV_IDS, QUADROTOR_ENV_IDS
from sim.validation import Interval, coerce


def numeric_leaves(config: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(field path, value) of every number or tuple of numbers in a config dataclass (dict fields too)."""
    if dataclasses.is_dataclass(config):
        for field in dataclasses.fields(config):
            yield from numeric_leaves(getattr(config, field.name), (*path, field.name))
    elif isinstance(config, dict):
        for key, value in config.items():
            yield from numeric_leaves(value, (*path, key))
    elif isinstance(config, tuple) and config and all(isinstance(v, (int, float, tuple)) for v in config):
        yield path, config
    elif isinstance(config, (int, float)) and not isinstance(config, bool):
        yield path, config


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} for ("a", "b")."""
    for key in reversed(path):
        value = {key: value}
    return value


def replaced(template: Any, value: float) -> Any:
    """`template` (a number or nested tuple of numbers) with its first number replaced by `value`."""
    if isinstance(template, tuple):
        return [replaced(template[0], value), *template[1:]]
    return value


QUADROTOR_LEAVES = [p for p, _ in numeric_leaves(default_config("hover")) if p[0] != "vehicle_overrides"]
ARM_LEAVES = [p for p, _ in numeric_leaves(ArmTaskConfig()) if p[0] != "spec" or p[1] == "home"]


def test_the_leaf_lists_cover_the_fields_of_the_issue():
    assert ("randomization", "disturbance_force") in QUADROTOR_LEAVES
    assert ("reward_scales", "alive") in QUADROTOR_LEAVES
    assert ("randomization", "observation_noise", "position") in QUADROTOR_LEAVES
    assert len(QUADROTOR_LEAVES) > 40 and len(ARM_LEAVES) > 20


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("path", QUADROTOR_LEAVES, ids=".".join)
def test_every_quadrotor_number_refuses_nan_and_inf(path, bad):
    template = dict(numeric_leaves(default_config("hover")))[path]
    with pytest.raises(ConfigError, match=rf"config\.{'.'.join(path)}(\[\d\])* must be (a finite number|an integer), got -?(nan|inf)"):
        make_config("hover", nested(path, replaced(template, bad)))


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("path", ARM_LEAVES, ids=".".join)
def test_every_arm_number_refuses_nan_and_inf(path, bad):
    template = dict(numeric_leaves(ArmTaskConfig()))[path]
    with pytest.raises(ConfigError, match=rf"config\.{'.'.join(path)}(\[\d\])* must be (a finite number|an integer)"):
        make_arm_config("reach", config=nested(path, replaced(template, bad)))


@pytest.mark.parametrize("path", QUADROTOR_LEAVES, ids=".".join)
def test_every_quadrotor_number_has_a_range_or_is_a_reward_scale(path):
    key = ".".join(path)
    assert key in RANGES or f"{path[0]}.*" in RANGES, f"{key} has no allowed range in sim.quadrotor.config.RANGES"
    template = dict(numeric_leaves(default_config("hover")))[path]
    with pytest.raises(ConfigError, match=rf"config\.{key}"):
        make_config("hover", nested(path, replaced(template, 1e30)))
    with pytest.raises(ConfigError, match=rf"config\.{key}.* must be"):
        make_config("hover", nested(path, replaced(template, "fast")))


@pytest.mark.parametrize("path", ARM_LEAVES, ids=".".join)
def test_every_arm_number_has_a_range(path):
    key = ".".join(path)
    assert key in ARM_RANGES, f"{key} has no allowed range in sim.arm.env.ARM_RANGES"
    template = dict(numeric_leaves(ArmTaskConfig()))[path]
    with pytest.raises(ConfigError, match=rf"config\.{key}"):
        make_arm_config("reach", config=nested(path, replaced(template, 1e30)))
    with pytest.raises(ConfigError, match=rf"config\.{key}.* must be"):
        make_arm_config("reach", config=nested(path, replaced(template, "fast")))


@pytest.mark.parametrize("env_id", [*QUADROTOR_ENV_IDS, *ARM_ENV_IDS])
def test_gymnasium_make_of_every_env_refuses_a_nan_in_its_config(env_id):
    """The issue's reproductions, through the entry point every CLI uses (gymnasium.make_vec)."""
    kwargs = {"device": "cpu", "compile": False} if env_id in QUADROTOR_ENV_IDS else {"nthread": 1}
    bad = ({"randomization": {"disturbance_force": math.nan}} if env_id in QUADROTOR_ENV_IDS
           else {"gains": {"translation_stiffness": math.nan}})
    with pytest.raises(ConfigError, match="must be a finite number, got nan"):
        gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", config=bad, **kwargs)


@pytest.mark.parametrize("overrides, message", [
    ({"randomization": {"disturbance_force": math.inf}}, "disturbance_force must be a finite number, got inf"),
    ({"reward_scales": {"alive": math.nan}}, "reward_scales.alive must be a finite number, got nan"),
    ({"randomization": {"observation_noise": {"position": math.nan}}}, "observation_noise.position must be a finite"),
    ({"randomization": {"disturbance_force": 1e6}}, r"disturbance_force must lie in \[0, 10\] N, got 1000000"),
    ({"control_hz": 0.002}, r"control_hz must lie in \[10, 500\] Hz"),
    ({"action_history": 10**9}, r"action_history must lie in \[0, 256\]"),
    ({"center": [0.0, 0.0]}, "center must be a list of 3 finite numbers"),
    ({"center": 1.0}, "center must be a list of 3 finite numbers"),
    ({"randomization": {"latency_steps": [0, 1.5]}}, r"latency_steps\[1\] must be an integer"),
    ({"randomization": {"enabled": "yes"}}, "enabled must be true or false"),
    ({"vehicle": ["crazyflie_rltools"]}, "vehicle must be a string"),
    ({"vehicle_overrides": {"mass": math.nan}}, "vehicle_overrides.mass must be a finite number"),
    ({"vehicle_overrides": {"inertia": [1e-5, 1e-5]}}, "vehicle_overrides.inertia must be a list of 3"),
    ({"initial_state": 3}, "initial_state must be a mapping"),
    ({"episode_seconds": 1e-4}, "episode_seconds"),
])
def test_bad_quadrotor_values_name_the_field_and_what_is_allowed(overrides, message):
    with pytest.raises(ConfigError, match=message) as raised:
        make_config("hover", overrides)
    assert "\n" not in str(raised.value)


def test_valid_configs_are_coerced_to_their_field_types():
    config = make_config("reach", {"center": [0, 0, 2], "randomization": {"latency_steps": [0.0, 2.0]},
                                   "vehicle_overrides": {"inertia": [1.4e-5, 1.4e-5, 2.2e-5]}})
    assert config.center == (0.0, 0.0, 2.0) and all(type(c) is float for c in config.center)
    assert config.randomization.latency_steps == (0, 2) and type(config.randomization.latency_steps[1]) is int
    assert config.vehicle_overrides["inertia"] == (1.4e-5, 1.4e-5, 2.2e-5)
    arm = make_arm_config("reach", "so_arm100", {"workspace": [[0.1, 0.3], [-0.15, 0.15], [0.0, 0.2]],
                                                  "randomization": {"enabled": True, "latency_steps": [0, 2]}})
    assert arm.workspace[0] == (0.1, 0.3) and arm.randomization.latency_steps == (0, 2)


def test_a_whole_config_object_is_checked_like_overrides():
    config = default_config("hover")
    config.randomization.disturbance_force = math.nan
    with pytest.raises(ConfigError, match="disturbance_force must be a finite number"):
        make_config(config=config)
    arm = dataclasses.replace(ArmTaskConfig(), lift_height=math.inf)
    with pytest.raises(ConfigError, match="lift_height must be a finite number"):
        ArmVectorEnv(config=arm, num_envs=1, nthread=1)


@pytest.mark.parametrize("overrides, message", [
    ({"workspace": [[0.75, 0.25], [-0.3, 0.3], [0.0, 0.45]]}, r"workspace\[0\] must be a \[low, high\] range"),
    ({"workspace": [[0.25, 0.75]]}, "workspace must be a list of"),
    ({"randomization": {"cube_mass": [0.1, math.nan]}}, r"cube_mass\[1\] must be a finite number"),
    ({"substeps": 2.5}, "substeps must be an integer"),
    ({"dense": 1}, "dense must be true or false"),
    ({"spec": {"mjcf": "/etc/hostname"}}, "does not compile"),
    ({"spec": {"home": [0.0] * 7 + [math.nan]}}, r"spec.home\[7\] must be a finite number"),
])
def test_bad_arm_values_name_the_field_and_what_is_allowed(overrides, message):
    with pytest.raises(ConfigError, match=message) as raised:
        ArmVectorEnv("reach", num_envs=1, nthread=1, config=overrides)
    assert "\n" not in str(raised.value)


def test_interval_and_coerce_describe_what_is_allowed():
    assert str(Interval(0.0, 10.0, open_low=True, unit="N")) == "(0, 10] N"
    assert 0.0 not in Interval(0.0, 1.0, open_low=True) and 1.0 in Interval(0.0, 1.0)
    assert coerce(np.float32(0.5), float, "x") == 0.5 and coerce(np.int64(3), int, "x") == 3
    with pytest.raises(ConfigError, match="x must be a finite number, got True"):
        coerce(True, float, "x")
    with pytest.raises(ConfigError, match="x must be a finite number, got 'a'"):
        coerce("a", float | None, "x")
    assert coerce(None, float | None, "x") is None


@pytest.mark.parametrize("overrides, message", [
    ({"critic_hidden": [0]}, r"agent.critic_hidden\[0\] must lie in \[1, 65536\], got 0"),  # was ZeroDivisionError
    ({"actor_lr": math.nan}, "agent.actor_lr must be a finite number, got nan"),  # was a NaN-training run
    ({"actor_hidden": "abc"}, "agent.actor_hidden must be a list of integers"),
    ({"num_critics": 1.5}, "agent.num_critics must be an integer"),
    ({"target_entropy": math.inf}, "agent.target_entropy must be a finite number"),
])
def test_agent_config_numbers_are_checked_like_env_configs(overrides, message):
    from robo_rl.agents.sac import SACConfig

    with pytest.raises(ConfigError, match=message):
        SACConfig(**overrides).validate()
    SACConfig(target_entropy=None).validate()  # None: the default target


def test_firmware_thrust_limits_must_leave_a_range_that_hovers():
    # min >= max was refused only once the env was built, and a max below hover thrust made a vehicle that
    # could never lift off
    with pytest.raises(ConfigError, match="firmware_thrust_min must lie below firmware_thrust_max=0.05 N"):
        make_config("hover", {"firmware_thrust_max": 0.05, "firmware_thrust_min": 0.06})
    with pytest.raises(ConfigError, match="firmware_thrust_max=1e-09 N cannot hover this vehicle"):
        gym.make("robo_rl/CrazyflieHover-v0", config={"firmware_thrust_max": 1e-9})


@pytest.mark.parametrize("overrides, message", [
    # every episode ended at its first step, without a word (the reward looked like a poor policy's)
    ({"initial_state": {"position_range": 1.0}}, "position_range 1 m must lie below max_position_error 0.6 m"),
    ({"center": [0.0, 0.0, 0.0]}, r"starts reach down to -0.2 m .*not above min_altitude 0.05 m"),
    ({"min_altitude": 5.0}, "not above min_altitude 5 m"),
    # hover starts at 1.0 +- 0.2 m under a floor at 1 m: torch never ended an episode, 0.63 reward a step
    ({"floor_height": 1.0}, r"starts reach down to 0.8 m .*below floor_height 1 m: they start inside the floor"),
    ({"max_speed": 0.01}, r"velocity_range 1 m/s per axis draws starts up to 1.73 m/s, not below max_speed 0.01"),
    ({"max_angular_speed": 1.0}, "angular_velocity_range 1 rad/s per axis draws starts up to 1.73 rad/s"),
])
def test_starts_that_the_episodes_bounds_end_at_once_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        make_config("hover", overrides)


@pytest.mark.parametrize("randomization, weakest", [
    ({"thrust_scale": [0.0, 0.0]}, "0"),  # NaN rewards on every step
    ({"mass_scale": [5.0, 10.0]}, "0.214"),  # every episode crashed
    ({"thrust_to_weight": [1.05, 2.0], "thrust_scale": [0.9, 1.0]}, "0.945"),
])
def test_randomization_that_draws_vehicles_that_cannot_lift_themselves_is_refused(randomization, weakest):
    with pytest.raises(ConfigError, match=f"has thrust-to-weight {weakest}, and <= 1 cannot lift itself"):
        gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, randomization=randomization)
    gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, randomization={"mass_scale": [0.5, 2.0]}).close()


@pytest.mark.parametrize("overrides, message", [
    # each gave episodes of one or a few steps on every path, without a word
    ({"randomization": {"disturbance_force": 10.0}}, r"disturbance_force 10 N per axis: its weakest, lightest "
     r"vehicle \(thrust-to-weight 1.33, weight 0.285 N\) cannot hold against more than 0.0773 N per axis"),
    ({"randomization": {"disturbance_torque": 0.1}}, r"disturbance_torque 0.1 N m per axis is beyond its weakest "
     r"vehicle's rotor authority about roll and pitch, 0.00262 N m"),
    ({"randomization": {"disturbance_torque": 0.001}}, "rotor authority about yaw, 0.000392 N m"),
    ({"vehicle_overrides": {"inertia": [1e-9, 1e-9, 1e-9]}}, r"spins the least inertia it draws \(9e-10 kg m\^2, "
     r"from the vehicle's 1e-09\) to 5.01e\+03 rad/s, past max_angular_speed 35 rad/s"),
    ({"randomization": {"inertia_size_scale": [0.01, 1.0], "thrust_scale": [0.8, 1.2]}}, "past max_angular_speed"),
])
def test_disturbances_and_inertias_that_no_vehicle_can_fly_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, vehicle="crazyflie_rltools", **overrides)


@pytest.mark.parametrize("vehicle", sorted(VEHICLES))
def test_every_named_vehicle_holds_the_suites_wind_and_the_training_distribution(vehicle):
    gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, vehicle=vehicle,
                 randomization={"disturbance_force": 0.01}).close()


@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
@pytest.mark.parametrize("options, message", [
    # NaN or zero rotations: the first observation was NaN, then MuJoCo restarted from its default pose (or, on
    # torch, a NaN reward); a NaN target gave NaN rewards on every step, never terminated
    ({"initial_state": {"position": [math.nan, 0.0, 1.0]}}, r"initial_state\['position'\] must be finite numbers"),
    ({"initial_state": {"angular_velocity": [math.inf, 0.0, 0.0]}}, "angular_velocity'] must be finite numbers"),
    ({"initial_state": {"quaternion": [0.0, 0.0, 0.0, 0.0]}}, "quaternion'] must be a rotation"),
    ({"target": [math.nan, 0.0, 1.0]}, r"reset options\['target'\] must be finite numbers"),
    ({"target": [0.0, 1.0]}, r"reset options\['target'\] must have shape \(3,\) or \(2, 3\)"),
    # zero or negative magnitudes gave NaN or -inf rewards and ran on
    ({"params": {"mass": 0.0}}, r"reset params\['mass'\] must be > 0, got 0"),
    ({"params": {"mass": -1.0}}, r"reset params\['mass'\] must be > 0, got -1"),
    ({"params": {"inertia": [0.0, 0.0, 0.0]}}, r"reset params\['inertia'\] must be > 0"),
    ({"params": {"motor_tau_rise": -1.0}}, r"reset params\['motor_tau_rise'\] must be >= 0"),
    ({"params": {"thrust_scale": [0.0, 0.0, 0.0, 0.0]}}, "thrust-to-weight 0, and <= 1 cannot lift itself"),
    ({"params": {"mass": 1.0}}, r"thrust-to-weight 0.0\d+, and <= 1 cannot lift itself"),
    # starts where the episode ends at its first step: one-step episodes (and 1e12 m a MuJoCo reset to its home pose,
    # flown on with full reward), as the config's starts are refused
    ({"initial_state": {"position": [0.0, 0.0, -5.0]}}, "the start lies 6 m from the task's reference"),
    ({"initial_state": {"position": [0.0, 0.0, 1e12]}}, "lies 1e\\+12 m from the task's reference"),
    ({"target": [0.0, 0.0, 1e9]}, "lies 1e\\+09 m from the task's reference .* beyond max_position_error 0.6 m"),
    ({"initial_state": {"velocity": [100.0, 0.0, 0.0]}}, r"initial_state\['velocity'\] of norm 100 lies above max_speed"),
    ({"initial_state": {"angular_velocity": [0.0, 0.0, 1e3]}}, "of norm 1000 lies above max_angular_speed"),
    ({"initial_state": {"position": [0.0, 0.0, 0.02]}, "target": [0.0, 0.0, 0.3]}, "z 0.02 m lies below min_altitude"),
])
def test_reset_options_that_no_vehicle_or_state_can_be_are_refused(backend, options, message):
    env = gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, backend=backend)
    try:
        with pytest.raises(ConfigError, match=message):
            env.reset(options=options)
        obs, _ = env.reset(options={"params": {"mass": [0.03, 0.04]}, "target": [0.1, 0.0, 1.0]})  # still usable
        assert np.isfinite(np.asarray(obs)).all()
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["robo_rl/CrazyflieHover-v0", "robo_rl/ArmReach-v0"])
@pytest.mark.parametrize("arguments, message", [
    # pybind's "incompatible constructor arguments", MuJoCo's "nsim must be positive", a '<' TypeError; a
    # negative thread count was taken
    ({"num_envs": 2**40}, r"num_envs must be a whole number in \[1, 1048576\], got 1099511627776"),
    ({"num_envs": 2.5}, "num_envs must be a whole number in .*, got 2.5"),
    ({"num_envs": "4"}, "num_envs must be a whole number in .*, got '4'"),
    ({"num_envs": 0}, "num_envs must be a whole number in .*, got 0"),
    ({"num_envs": 2, "nthread": -3}, r"nthread must be a whole number in \[0, 4096\], got -3"),
])
def test_a_batch_size_or_thread_count_that_cannot_be_is_one_config_error(env_id, arguments, message):
    with pytest.raises(ConfigError, match=message):
        gym.make_vec(env_id, vectorization_mode="vector_entry_point", **arguments)


@pytest.mark.parametrize("arguments, message", [
    # torch's errors ("Torch not compiled with CUDA enabled", "Expected one of cpu, cuda, ...", an index_put dtype
    # mismatch at the first step), and float16, which stepped silently wrong physics
    ({"device": "gpu"}, "device='gpu' is not a torch device; give cpu, cuda or cuda:<index>"),
    ({"device": "cuda:99"}, r"device='cuda:99': this machine has \d+ CUDA devices; give cpu"),
    ({"dtype": torch.float16}, "dtype must be torch.float32 or torch.float64, got torch.float16"),
    ({"dtype": torch.int32}, "dtype must be torch.float32 or torch.float64, got torch.int32"),
    ({"dtype": "float32"}, "dtype must be torch.float32 or torch.float64, got 'float32'"),
])
def test_a_torch_device_or_dtype_that_cannot_run_the_batch_is_one_config_error(arguments, message):
    from sim.quadrotor import QuadrotorVectorEnv

    with pytest.raises(ConfigError, match=message):
        QuadrotorVectorEnv(num_envs=2, backend="torch", **arguments)


@pytest.mark.parametrize("backend", ["mujoco_batch", "mujoco"])
@pytest.mark.parametrize("arguments, message", [
    # each was ignored: float64 observations asked for came as float32, a CUDA device stepped on the CPU
    ({"device": "cuda"}, "device='cuda': only the torch backend takes device; the .* backend steps MuJoCo"),
    ({"dtype": torch.float64}, "dtype=torch.float64: only the torch backend takes dtype"),
    ({"compile": "native"}, "compile='native': only the torch backend takes compile"),
    ({"device": "gpu", "compile": True}, "device='gpu', compile=True: only the torch backend takes device and compile"),
])
def test_the_mujoco_backends_refuse_the_torch_backends_options(backend, arguments, message):
    from sim.quadrotor.core import QuadrotorBatch

    with pytest.raises(ConfigError, match=message):
        QuadrotorBatch(make_config("hover"), 1 if backend == "mujoco" else 2, backend, **arguments)
    QuadrotorBatch(make_config("hover"), 2, "mujoco_batch", device=torch.device("cpu"), dtype=torch.float32)


def test_a_mujoco_batch_env_without_a_device_steps_on_the_cpu():
    from sim.quadrotor import QuadrotorVectorEnv

    assert QuadrotorVectorEnv(num_envs=2, backend="mujoco_batch").batch.physics.xp is np  # on CUDA machines too


def test_an_arm_action_with_a_nan_names_the_env_not_the_shape():
    """It said "actions must be finite with shape (2, 4), got (2, 4)"."""
    env = ArmVectorEnv("reach", num_envs=2, nthread=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must be finite, got NaN or Inf in env\(s\) \[1\]"):
        env.step(np.array([[0.0, 0.0, 0.0, 0.0], [math.nan, 0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("overrides, message", [
    # no action could succeed: the cube 2.6 m out, goals 5 m away, the arm started 9 rad past its joint limits
    ({"cube_x": (2.0, 3.0)}, r"config.cube_x \[2.0, 3.0\] must lie inside the workspace's \[0.25, 0.75\] m"),
    ({"reach_box": ((5, 6), (5, 6), (5, 6))}, "config.reach_box's x range .* must lie inside the workspace's"),
    ({"spec": {"home": (9.0,) * 7}}, r"config.spec.home puts joint1 at 9 rad, outside its range \[-2.8973, 2.8973\]"),
])
def test_an_arm_task_no_action_can_succeed_in_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        ArmVectorEnv("reach", num_envs=2, nthread=1, **overrides)


@pytest.mark.parametrize("backend", ["mujoco_batch", "torch"])
def test_a_refused_reset_changes_nothing_and_no_backend_steps_before_a_reset(backend):
    """A refused reset numbered the episodes on (the next draws differed) and counted as a reset: on torch a refused
    first reset let step() run on states never set; mujoco_batch stepped before any reset, unseeded."""
    def envs() -> Any:
        return gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, vectorization_mode="vector_entry_point",
                            backend=backend)

    fresh = envs()
    with pytest.raises(RuntimeError, match=r"call reset\(\) before the first step"):
        fresh.step(np.full((2, 4), 0.5, np.float32))
    with pytest.raises(ConfigError):
        fresh.reset(seed=0, options={"target": [math.nan] * 3})
    with pytest.raises(RuntimeError, match=r"call reset\(\) before the first step"):
        fresh.step(np.full((2, 4), 0.5, np.float32))
    plain, refused = envs(), envs()
    plain.reset(seed=0)
    refused.reset(seed=0)
    with pytest.raises(ConfigError):
        refused.reset(options={"target": [math.nan] * 3})
    np.testing.assert_array_equal(np.asarray(plain.reset()[0]), np.asarray(refused.reset()[0]))
    for env in (fresh, plain, refused):
        env.close()


@pytest.mark.parametrize("seed", [1.5, "a", -1, True])
def test_a_seed_that_is_not_a_whole_number_is_refused_naming_seed(seed):
    """seed=1.5 or "a" was NumPy's TypeError "SeedSequence expects int or sequence of ints"."""
    env = gym.make_vec("robo_rl/CrazyflieHover-v0", num_envs=2, vectorization_mode="vector_entry_point")
    try:
        with pytest.raises(ConfigError, match=f"^seed must be a whole number >= 0 or None, got {seed!r}$"):
            env.reset(seed=seed)
        assert np.isfinite(np.asarray(env.reset(seed=3)[0])).all()
    finally:
        env.close()
