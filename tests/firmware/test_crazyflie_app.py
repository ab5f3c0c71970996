"""The Crazyflie out-of-tree controller, compiled for the host against stand-in firmware headers.

Its observation must equal the simulator's for the same state, and in the loop it must command the
motors as the PyTorch policy does, with the documented fallbacks (heartbeat, enable, faults).
"""

from __future__ import annotations

import ctypes
import json
import math
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import sim  # noqa: F401
from robo_rl.agents.sac import SAC
from robo_rl.checkpoint import load_checkpoint

APP = Path(__file__).resolve().parents[2] / "firmware" / "crazyflie"
FIRMWARE_THRUST_MAX = 0.12  # the stand-in platform_defaults.h, as crazyflie-firmware's CF2 default
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off"]


def compile_c(bundle: Path, out: Path, sources: list[Path], shared: bool = False) -> Path:
    includes = [f"-I{APP / 'host_test' / 'include'}", f"-I{APP / 'src'}", f"-I{bundle / 'c'}"]
    flags = ["-shared", "-fPIC"] if shared else []
    subprocess.run(["cc", *CFLAGS, *flags, *includes, *map(str, sources), "-o", str(out), "-lm"], check=True)
    return out


def hover_env(bundle: Path) -> gym.Env:
    """The bundle's env config, without randomization or noise: the state the firmware sees is exact."""
    config = json.loads((bundle / "policy.json").read_text())["training"]["env_config"]
    config["randomization"]["enabled"] = False
    return gym.make("robo_rl/CrazyflieHover-v0", config=config)


def true_state(env: gym.Env) -> tuple[np.ndarray, ...]:
    pos, quat, vel, angvel = (np.asarray(a)[:, 0] for a in env.unwrapped.batch.physics.state())
    return pos, quat, vel, angvel


def test_observation_built_on_board_equals_the_simulators(exported_bundle, tmp_path):
    lib = ctypes.CDLL(str(compile_c(exported_bundle, tmp_path / "libobs.so",
                                    [APP / "src" / "robo_rl_observation.c"], shared=True)))
    env = hover_env(exported_bundle)
    history_steps = env.unwrapped.config.action_history
    target = np.asarray(env.unwrapped.config.center, np.float32)
    obs, _ = env.reset(seed=3)
    history = (ctypes.c_float * (4 * max(history_steps, 1)))()
    lib.rr_history_reset(history, ctypes.c_float(env.unwrapped.batch.params.hover_command))
    rng = np.random.default_rng(0)
    for _ in range(20):
        pos, quat, vel, angvel = true_state(env)
        flight = (ctypes.c_float * 13)(*pos, *vel, *quat, *angvel)
        built = (ctypes.c_float * obs.size)()
        lib.rr_observation_build(flight, (ctypes.c_float * 3)(*target), (ctypes.c_float * 3)(0, 0, 0), history, built)
        np.testing.assert_allclose(np.array(built), obs, atol=2e-6, rtol=0)
        action = rng.uniform(0.3, 0.6, 4).astype(np.float32)
        obs, _, terminated, _, _ = env.step(action)
        assert not terminated
        lib.rr_history_push(history, (ctypes.c_float * 4)(*action))


def driver_lines(ticks: list[dict]) -> str:
    return "".join(
        f"tick {t['tick']} {t['enable']} {t['beat']} {' '.join(f'{v:.9g}' for v in t['values'])} {t['absolute']}\n"
        for t in ticks)


def run_driver(driver: Path, text: str) -> list[list[float]]:
    out = subprocess.run([str(driver)], input=text, capture_output=True, text=True, check=True).stdout
    return [[float(v) for v in line.split()] for line in out.splitlines() if not line.startswith("selftest")]


def state_values(pos, quat, vel, angvel, setpoint) -> list[float]:
    gyro_deg_s = np.degrees(angvel)  # the firmware's gyro unit
    return [*pos, *vel, *quat, *gyro_deg_s, *setpoint]


def test_controller_flies_the_policy_with_heartbeat_and_falls_back_when_it_lapses(exported_bundle, trained_run, tmp_path):
    sources = [APP / "src" / "robo_rl_controller.c", APP / "src" / "robo_rl_observation.c",
               exported_bundle / "c" / "policy.c", APP / "host_test" / "driver.c", APP / "host_test" / "stock_controller.c"]
    driver = compile_c(exported_bundle, tmp_path / "driver", sources)
    selftest = subprocess.run([str(driver)], input="selftest\n", capture_output=True, text=True, check=True).stdout
    assert selftest.strip() == "selftest 1"  # controllerOutOfTreeTest: the recorded pairs pass on board

    # Fly the simulator with the PyTorch policy; every 10 stabilizer ticks (1 kHz / 100 Hz) is one policy step.
    agent = SAC.from_checkpoint(load_checkpoint(trained_run))
    manifest = json.loads((exported_bundle / "policy.json").read_text())
    thrust_max = manifest["training"]["vehicle_parameters"]["thrust_max"]
    env = hover_env(exported_bundle)
    center = list(env.unwrapped.config.center)
    obs, _ = env.reset(seed=5)
    ticks, expected = [], []
    for step in range(30):
        action = agent.act(torch.as_tensor(obs[None]), deterministic=True).numpy()[0]
        state = true_state(env)
        for sub in range(10):
            tick = 10 * step + sub
            ticks.append({"tick": tick, "enable": 1, "beat": tick, "values": state_values(*state, center), "absolute": 1})
        expected.append(np.clip(action * thrust_max / FIRMWARE_THRUST_MAX, 0, 1))
        obs, _, terminated, _, _ = env.step(action)
        assert not terminated
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert (rows[:, 1] == 1).all() and (rows[:, 2] == 0).all() and (rows[:, 3] == 2).all()  # active, no fault, Force mode
    assert rows[-1, 8] == 0  # the stock controller never ran
    commanded = rows[::10, 4:8]  # right after each policy step
    np.testing.assert_allclose(commanded, np.array(expected), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(rows[9::10, 4:8], commanded)  # held between policy steps

    # Heartbeat stops at tick 0: the policy flies 200 ms, then the stock controller takes over, latched.
    hover = state_values(np.array(center), np.array([1.0, 0, 0, 0]), np.zeros(3), np.zeros(3), center)
    lapse = [{"tick": t, "enable": 1, "beat": 7, "values": hover, "absolute": 1} for t in range(400)]
    resumed = [{"tick": t, "enable": 0 if t < 402 else 1, "beat": t, "values": hover, "absolute": 1}
               for t in range(400, 420)]
    rows = np.array(run_driver(driver, driver_lines(lapse + resumed)))
    active = rows[:, 1].astype(bool)
    assert active[:200].all() and not active[202:402].any()
    assert rows[250, 2] == 4 and rows[250, 3] == 0 and rows[399, 8] > 150  # heartbeat fault, stock controller
    assert active[405:].all() and (rows[405:, 2] == 0).all()  # enable cleared the fault; fresh heartbeat resumes

    # Guards: a state outside the training arena, a tumbling attitude, a NaN gyro.
    bad_states = {
        3: state_values(np.array(center) + [0.0, 0.0, 1.0], np.array([1.0, 0, 0, 0]), np.zeros(3), np.zeros(3), center),
        2: state_values(np.array(center), np.array([0.0, 1.0, 0, 0]), np.zeros(3), np.zeros(3), center),
        1: state_values(np.array(center), np.array([1.0, 0, 0, 0]), np.zeros(3), np.array([math.nan, 0, 0]), center),
    }
    for fault, values in bad_states.items():
        rows = np.array(run_driver(driver, driver_lines(
            [{"tick": 0, "enable": 1, "beat": 0, "values": hover, "absolute": 1},
             {"tick": 10, "enable": 1, "beat": 10, "values": values, "absolute": 1},
             {"tick": 11, "enable": 1, "beat": 11, "values": hover, "absolute": 1}])))
        assert rows[0, 1] == 1 and rows[1, 1] == 0 and rows[1, 2] == fault, (fault, rows)
        assert rows[2, 1] == 0 and rows[2, 3] == 0  # latched: the stock controller keeps flying
        assert np.isfinite(rows[:, 4:8]).all()
