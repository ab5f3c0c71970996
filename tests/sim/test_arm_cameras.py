"""The arm envs' cameras: a Dict observation (state and uint8 images) that passes gymnasium's checker without a
display, seeded images, appearance randomization inside its ranges, images of the right states (the final
observation's of the episode's last state), and clear errors for bad camera settings and failed workers."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sim.arm.cameras import AppearanceLayout, CameraRandomization, draw_appearance
from sim.arm.env import ArmEnv, ArmVectorEnv
from sim.arm.render_pool import FILE_PREFIX, RenderError, RenderPool, shared_folder
from sim.errors import ConfigError

SMALL = {"enabled": True, "width": 64, "height": 48, "workers": 1}


def run_expert(env: ArmVectorEnv, seed: int, steps: int) -> list:
    """Observations of `steps` expert steps from reset(seed)."""
    obs, _ = env.reset(seed=seed)
    history = [obs]
    for _ in range(steps):
        obs, *_ = env.step(env.expert_actions(obs))
        history.append(obs)
    return history


def test_an_image_env_passes_the_gymnasium_checker_headless():
    env = ArmEnv("pick_cube", robot="so_arm100", cameras=SMALL)
    try:
        check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=0)
        assert set(obs) == {"state", "wrist", "front"}
        assert obs["state"].shape == (7,)  # the robot's own senses: tool position and velocity, gripper opening
        assert obs["wrist"].shape == (48, 64, 3) and obs["wrist"].dtype == np.uint8
        assert obs["front"].std() > 5  # a picture, not a blank
    finally:
        env.close()


def test_the_same_seed_gives_the_same_images_and_the_cameras_leave_the_states_alone():
    cameras = {**SMALL, "randomization": {"enabled": True}}
    first, second = (ArmVectorEnv("pick_cube", 3, robot="so_arm100", cameras=cameras) for _ in range(2))
    plain = ArmVectorEnv("pick_cube", 3, robot="so_arm100")
    try:
        a, b = run_expert(first, 7, 20), run_expert(second, 7, 20)
        states = run_expert(plain, 7, 20)
        for x, y, s in zip(a, b, states):
            for key in x:
                np.testing.assert_array_equal(x[key], y[key])
            np.testing.assert_array_equal(x["state"], s[:, first._state_index])
        other = run_expert(second, 8, 0)[0]
        assert np.abs(other["front"].astype(int) - a[0]["front"]).mean() > 1.0  # another appearance
    finally:
        for env in (first, second, plain):
            env.close()


def test_appearance_rows_stay_in_their_ranges_and_are_nominal_without_randomization():
    layout = AppearanceLayout(2, 10)
    r = CameraRandomization(enabled=True)
    rows = draw_appearance(np.random.default_rng(0), 500, layout, r)
    parts = [layout.split(row) for row in rows]
    assert all(np.abs(p["camera_position"]).max() <= r.camera_position for p in parts)
    assert all(np.rad2deg(np.abs(p["camera_rotation"])).max() <= r.camera_rotation for p in parts)
    assert all(r.light_intensity[0] <= p["light_intensity"] <= r.light_intensity[1] for p in parts)
    assert all(r.ambient[0] <= p["ambient"] <= r.ambient[1] for p in parts)
    assert all(np.abs(p["colour"]).max() <= r.colour for p in parts)
    assert np.ptp(rows, axis=0).max() > 0
    nominal = draw_appearance(np.random.default_rng(0), 4, layout, CameraRandomization(enabled=False))
    assert np.ptp(nominal, axis=0).max() == 0


def test_the_wrist_camera_sees_the_cube_in_the_gripper_once_it_is_lifted():
    env = ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras={**SMALL, "names": ("wrist",)})
    try:
        obs, _ = env.reset(seed=1)
        start = obs["wrist"]
        for _ in range(140):
            obs, _, _, _, info = env.step(env.expert_actions(obs))
            if info["is_success"].all():
                break
        assert info["is_success"].all()

        def red_share(images: np.ndarray) -> np.ndarray:
            rgb = images.astype(int)
            red = (rgb[..., 0] > 120) & (rgb[..., 1] < 70) & (rgb[..., 2] < 70)
            return red.mean(axis=(1, 2))

        assert (red_share(obs["wrist"]) > 0.15).all()  # held between the fingers, close to the camera
        assert (red_share(obs["wrist"]) > 2 * red_share(start)).all()
    finally:
        env.close()


def test_the_final_observation_shows_the_last_state_and_the_next_one_the_new_episode():
    env = ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras=SMALL, episode_seconds=0.2)
    twin = ArmVectorEnv("pick_cube", 2, robot="so_arm100", episode_seconds=10.0)  # same states, no reset yet
    reference = RenderPool(env.model, 2, env.cameras, workers=1)
    try:
        obs, _ = env.reset(seed=2)
        twin_obs, _ = twin.reset(seed=2)
        for _ in range(env.config.episode_steps):
            actions = env.expert_actions(obs)
            obs, _, _, truncated, info = env.step(actions)
            twin.step(actions)
        assert truncated.all()

        def rendered(sim: ArmVectorEnv) -> np.ndarray:
            reference["qpos"][:], reference["geom_size"][:] = sim._qpos, sim._geom_size
            reference["appearance"][:] = env._render_pool["appearance"]  # nominal: no randomization
            return reference.render().copy()

        final, first = rendered(twin), rendered(env)
        assert np.abs(final.astype(int) - first).mean() > 0.5  # the test can tell the two apart
        for k, name in enumerate(env.cameras.names):
            np.testing.assert_array_equal(info["final_obs"][name], final[:, k])
            np.testing.assert_array_equal(obs[name], first[:, k])
    finally:
        for closing in (env, twin, reference):
            closing.close()


def test_osmesa_renders_the_same_images_as_egl():
    images = {}
    for backend in ("egl", "osmesa"):
        env = ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras={**SMALL, "backend": backend})
        try:
            images[backend] = env.reset(seed=4)[0]
        finally:
            env.close()
    for key in ("wrist", "front"):
        assert np.abs(images["egl"][key].astype(int) - images["osmesa"][key]).max() <= 2


def test_auto_falls_back_to_osmesa_where_egl_cannot_start(monkeypatch):
    monkeypatch.setenv("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent.json")  # glvnd finds no EGL driver
    env = ArmVectorEnv("pick_cube", 1, robot="so_arm100", cameras=SMALL)
    try:
        assert env._render_pool.backend == "osmesa"
        assert env.reset(seed=0)[0]["front"].std() > 5
    finally:
        env.close()


@pytest.mark.parametrize("cameras, message", [
    ({"enabled": True, "names": ["wrist", "top"]}, "cameras.names: so_arm100.xml has no camera 'top'"),
    ({"enabled": True, "names": ["wrist", "wrist"]}, "cameras.names must be distinct"),
    ({"enabled": True, "names": ["state"]}, "none called 'state'"),
    ({"enabled": True, "width": 4}, "cameras.width must lie in [8, 2048] px, got 4"),
    ({"enabled": True, "backend": "vulkan"}, "cameras.backend must be 'auto', 'egl', 'osmesa', got 'vulkan'"),
    ({"enabled": True, "randomization": {"ambient": [0.5, 0.1]}}, "cameras.randomization.ambient"),
    ({"enabled": True, "workers": -1}, "cameras.workers must lie in [0, 256], got -1"),
    ({"enabled": True, "state_fields": ["tool_position", "joint_angles"]},
     "cameras.state_fields: unknown observation field 'joint_angles'"),
])
def test_bad_camera_settings_are_one_config_error(cameras, message):
    with pytest.raises(ConfigError) as error:
        ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras=cameras)
    assert message in str(error.value)


def test_a_dead_render_worker_is_an_error_not_a_hang():
    env = ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras=SMALL)
    try:
        env.reset(seed=0)
        worker = env._render_pool.workers[0]
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        with pytest.raises(RenderError, match="render worker 0 failed to render"):
            env.step(np.zeros((2, 4)))
    finally:
        env.close()


def test_no_shared_memory_file_is_left_behind():
    env = ArmVectorEnv("pick_cube", 2, robot="so_arm100", cameras=SMALL)
    try:
        path = env._render_pool.path
        assert os.path.dirname(path) == shared_folder() and os.path.basename(path).startswith(FILE_PREFIX)
        env.reset(seed=0)
        assert not os.path.exists(path)  # unlinked once the workers had mapped it, while they still render
    finally:
        env.close()
