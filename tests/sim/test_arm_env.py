"""The arm tasks: gymnasium API, seeding, the scripted expert, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sim import ARM_ENV_IDS
from sim.arm.env import ArmTaskConfig, ArmVectorEnv
from sim.errors import ConfigError


@pytest.mark.parametrize("env_id", sorted(ARM_ENV_IDS))
def test_gymnasium_env_checker_passes_and_make_vec_gives_the_batch(env_id):
    check_env(gym.make(env_id).unwrapped)
    venv = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point", nthread=1)
    assert isinstance(venv, ArmVectorEnv) and venv.observation_space.shape == (3, venv.layout.size)


def test_same_seed_same_episodes_and_placements_vary():
    def rollout(seed):
        env = ArmVectorEnv("pick_cube", num_envs=4, nthread=1)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(1)
        frames = [obs]
        for _ in range(20):
            frames.append(env.step(rng.uniform(-1, 1, (4, 4)))[0])
        return np.stack(frames)

    a, b, c = rollout(7), rollout(7), rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], c[0])
    cubes = a[0][:, 7:10]
    assert len({tuple(np.round(x, 4)) for x in cubes}) == 4  # each env its own cube placement


@pytest.mark.parametrize("robot", ["panda_like", "so_arm100"])
@pytest.mark.parametrize("task", ["pick_cube", "reach"])
def test_scripted_expert_succeeds(task, robot):
    env = ArmVectorEnv(task, num_envs=24, nthread=1, robot=robot)
    obs, _ = env.reset(seed=0)
    success = np.zeros(env.num_envs, dtype=bool)
    for _ in range(env.config.episode_steps):
        obs, reward, terminated, truncated, info = env.step(env.expert_actions(obs))
        success |= info["is_success"]
    assert success.mean() >= 0.9, success.mean()
    assert truncated.all() and "final_obs" in info  # every episode ended at the time limit and restarted


def test_with_end_on_success_an_episode_ends_at_its_first_success_with_the_sparse_reward_of_a_robot():
    """HIL-SERL's real-robot episodes (robo_rl_ros.core.robot_actor): reward 1 and the end at the success
    detector's first yes, so that demos and simulated evaluation mean what the robot's transitions mean."""
    env = ArmVectorEnv("pick_cube", num_envs=8, nthread=1, config={"dense": False, "end_on_success": True})
    obs, _ = env.reset(seed=0)
    ended = np.zeros(env.num_envs, dtype=bool)
    for _ in range(env.config.episode_steps - 1):
        obs, reward, terminated, truncated, info = env.step(env.expert_actions(obs))
        live = ~ended
        np.testing.assert_array_equal(terminated[live], info["is_success"][live])  # ends exactly at success
        np.testing.assert_array_equal(reward[live], info["is_success"][live] * 1.0)  # 1 there, 0 before
        assert not truncated.any()
        ended |= terminated
    assert ended.mean() >= 0.9, ended.mean()


def test_bad_actions_and_configs_raise_clear_errors():
    env = ArmVectorEnv("reach", num_envs=2, nthread=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.full((2, 4), np.nan))
    with pytest.raises(ConfigError, match="unknown arm task"):
        ArmVectorEnv("stack", num_envs=1)
    with pytest.raises(ConfigError, match="substeps"):
        ArmVectorEnv(config=ArmTaskConfig(substeps=7), num_envs=1)


def test_config_overrides_arrive_as_dicts_from_hydra():
    env = ArmVectorEnv(num_envs=1, nthread=1, config={"task": "reach", "gains": {"translation_stiffness": 3000.0},
                                                      "spec": {"ee_site": "tcp"}})
    assert env.config.task == "reach" and env.config.gains.translation_stiffness == 3000.0
    with pytest.raises(ConfigError, match=r"unknown option config.cube_colour; valid options: task, control_hz"):
        ArmVectorEnv(num_envs=1, config={"cube_colour": "red"})
    with pytest.raises(ConfigError, match=r"unknown option config.randomization.gravity; valid options: enabled"):
        ArmVectorEnv(num_envs=1, config={"randomization": {"gravity": 1.0}})
    so_arm = ArmVectorEnv(num_envs=1, nthread=1, robot="so_arm100", config={"gains": {"null_damping": 0.1}})
    assert so_arm.config.gains.translation_stiffness == 2000.0  # the robot's own gains, one of them overridden
    with pytest.raises(ConfigError, match="mujoco_batch"):
        ArmVectorEnv(num_envs=1, backend="torch")


def test_randomization_stays_in_its_ranges_reaches_the_simulation_and_is_reported():
    ranges = {"enabled": True, "friction_scale": [0.5, 1.5], "cube_half_size": [0.015, 0.025],
              "cube_mass": [0.02, 0.2], "stiffness_scale": [0.7, 1.3], "latency_steps": [0, 2]}
    env = ArmVectorEnv("pick_cube", num_envs=64, nthread=1, randomization=ranges)
    obs, info = env.reset(seed=3)
    p = info["params"]
    for name, bounds in ranges.items():
        if name != "enabled":
            assert bounds[0] <= p[name].min() < p[name].max() <= bounds[1], name
    assert set(np.unique(p["latency_steps"])) == {0, 1, 2}
    size = env.batch.expand("geom_size")[:, env._cube_geom, 0]
    np.testing.assert_allclose(size, p["cube_half_size"])
    np.testing.assert_allclose(env.batch.expand("body_mass")[:, env._cube_body], p["cube_mass"])
    np.testing.assert_allclose(obs[:, env.layout.slices()["cube_position"]][:, 2], p["cube_half_size"], atol=1e-6)
    # seeded: the same seed draws the same parameters
    _, again = ArmVectorEnv("pick_cube", num_envs=64, nthread=1, randomization=ranges).reset(seed=3)
    for name in p:
        np.testing.assert_array_equal(again["params"][name], p[name])
    # the scripted expert still picks every cube
    success = np.zeros(64, dtype=bool)
    for _ in range(env.config.episode_steps - 1):
        obs, _, _, _, info = env.step(env.expert_actions(obs))
        success |= info["is_success"]
    assert success.all()


def test_latency_delays_the_action_by_whole_control_steps():
    fixed = {"enabled": True, "friction_scale": [1, 1], "cube_half_size": [0.02, 0.02], "cube_mass": [0.05, 0.05],
             "stiffness_scale": [1, 1]}

    def tool_x(latency: int, step_at: int | None) -> np.ndarray:
        env = ArmVectorEnv("reach", num_envs=1, nthread=1,
                           randomization=fixed | {"latency_steps": [latency, latency]})
        obs, _ = env.reset(seed=0)
        xs = []
        for t in range(4):
            action = np.array([[1.0 if t == step_at else 0.0, 0.0, 0.0, -1.0]])  # one step forward
            obs, *_ = env.step(action)
            xs.append(obs[0, 0])
        return np.array(xs)

    still, prompt, delayed = tool_x(0, None), tool_x(0, 0), tool_x(2, 0)
    assert prompt[0] > still[0] + 0.001  # the prompt arm moves at once
    np.testing.assert_array_equal(delayed[:2], still[:2])  # the delayed one waits two control steps
    assert delayed[2] > still[2] + 0.001


def test_the_five_dof_servo_arm_is_the_published_so_arm100_chain():
    env = ArmVectorEnv("reach", num_envs=1, nthread=1, robot="so_arm100")
    model = env.model
    assert [model.joint(j).name for j in env.config.spec.joints] == [
        "shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"]
    # STS3215 (12 V) stall torque on every joint; Menagerie's joint ranges
    np.testing.assert_allclose(model.actuator_ctrlrange[:5], [[-2.94, 2.94]] * 5)
    np.testing.assert_allclose(model.jnt_range[model.joint("shoulder_lift").id], [-3.32, 0.174])
    obs, _ = env.reset(seed=0)
    # Menagerie's home pose puts the tool 0.19 m out and 0.075 m up, pointing down (we reach along +x)
    np.testing.assert_allclose(obs[0, :3], [0.1935, 0.0, 0.075], atol=0.015)
    z_axis = env.controller.tool_pose()[1][0][:, 2]
    np.testing.assert_allclose(z_axis, [0.0, 0.0, -1.0], atol=0.02)


def test_a_simulation_that_blows_up_ends_its_episode_and_restarts(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)  # where MuJoCo's default handler would append MUJOCO_LOG.TXT
    env = ArmVectorEnv("pick_cube", num_envs=3, nthread=1)
    obs, _ = env.reset(seed=0)
    env._qvel[1, env._cube_qvel + 2] = 1e12  # a diverging cube in env 1 only
    obs, reward, terminated, truncated, info = env.step(np.zeros((3, 4)))
    np.testing.assert_array_equal(terminated, [False, True, False])
    assert info["diverged"][1] and not info["is_success"][1] and info["_final_obs"][1]
    assert env.steps[1] == 0 and np.isfinite(obs).all()  # env 1 restarted from a fresh placement
    _, _, terminated, _, info = env.step(np.zeros((3, 4)))
    assert not terminated.any() and not info["diverged"].any()  # a warning ends one episode, not the next
    # MuJoCo's warning reached the "mujoco" logger, not a file in the working directory
    assert not list(tmp_path.iterdir())
    assert any(record.name == "mujoco" and "QVEL" in record.getMessage() for record in caplog.records)
