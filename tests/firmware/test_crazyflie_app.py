"""The Crazyflie out-of-tree controller, compiled for the host against stand-in firmware headers.

Its observation must equal the simulator's for the same state, and in the loop it must command the
motors as the PyTorch policy does, with the documented fallbacks (heartbeat, enable, faults).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import sim  # noqa: F401
from robo_rl.agents.sac import SAC
from robo_rl.checkpoint import load_checkpoint
from sim.quadrotor import motor
from sim.quadrotor.observation import heading, in_heading_frame
from sim.quadrotor.rotations import quat_to_matrix, turned_about_z

APP = Path(__file__).resolve().parents[2] / "firmware" / "crazyflie"
FIRMWARE_THRUST_MAX = 0.12  # the stand-in platform_defaults.h, as crazyflie-firmware's CF2 default
FIRMWARE_THRUST_MIN = 0.012817578393224994  # likewise: motors.c turns a motor off below it
# the firmware's cf2_defconfig enables battery compensation, where THRUST_MIN applies
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-DCONFIG_ENABLE_THRUST_BAT_COMPENSATED=1"]


def compile_c(bundle: Path, out: Path, sources: list[Path], shared: bool = False, defines: tuple[str, ...] = ()) -> Path:
    """Compile against `bundle`'s policy. The app's sources are copied first: a firmware build leaves the policy
    it was given in src/, which the app's own #include "policy.h" would find before the bundle's."""
    app_src = out.parent / f"{out.name}_app_src"
    app_src.mkdir(exist_ok=True)
    for source in (APP / "src").glob("robo_rl_*.[ch]"):
        (app_src / source.name).write_bytes(source.read_bytes())
    sources = [app_src / s.name if s.parent == APP / "src" else s for s in sources]
    includes = [f"-I{APP / 'host_test' / 'include'}", f"-I{app_src}", f"-I{bundle / 'c'}"]
    flags = ["-shared", "-fPIC"] if shared else []
    subprocess.run(["cc", *CFLAGS, *defines, *flags, *includes, *map(str, sources), "-o", str(out), "-lm"], check=True)
    return out


def compile_driver(bundle: Path, out: Path, defines: tuple[str, ...] = ()) -> Path:
    """The app with the host driver and the stand-in PID and supervisor."""
    sources = [APP / "src" / "robo_rl_controller.c", APP / "src" / "robo_rl_observation.c", bundle / "c" / "policy.c",
               APP / "host_test" / "driver.c", APP / "host_test" / "stock_controller.c"]
    return compile_c(bundle, out, sources, defines=defines)


def for_firmware(bundle: Path, out: Path, thrust_max: float, thrust_min: float) -> Path:
    """A copy of `bundle`'s C whose policy_layout.h records other firmware limits, as an export for a vehicle
    whose firmware had them would."""
    (out / "c").mkdir(parents=True)
    for source in (bundle / "c").iterdir():
        text = source.read_text()
        if source.name == "policy_layout.h":
            text = re.sub(r"#define POLICY_FIRMWARE_THRUST_MAX \S+", f"#define POLICY_FIRMWARE_THRUST_MAX {thrust_max}f", text)
            text = re.sub(r"#define POLICY_FIRMWARE_THRUST_MIN \S+", f"#define POLICY_FIRMWARE_THRUST_MIN {thrust_min}f", text)
        (out / "c" / source.name).write_text(text)
    return out


def flown_commands(action: np.ndarray, policy_thrust_max: float, thrust_max: float = FIRMWARE_THRUST_MAX,
                   thrust_min: float = FIRMWARE_THRUST_MIN) -> np.ndarray:
    """What the motors get for policy actions, in the policy's units, as the simulator models the firmware
    (sim.quadrotor.motor: clamped at THRUST_MAX, off below THRUST_MIN)."""
    limits = motor.command_limits(float(policy_thrust_max), thrust_max, thrust_min)
    return motor.motor_command(np, np.asarray(action, np.float32), *limits).astype(np.float32)


def motor_forces(action: np.ndarray, policy_thrust_max: float, thrust_max: float = FIRMWARE_THRUST_MAX,
                 thrust_min: float = FIRMWARE_THRUST_MIN) -> np.ndarray:
    """The normalizedForces (fractions of THRUST_MAX) the app must send for policy actions."""
    return flown_commands(action, policy_thrust_max, thrust_max, thrust_min) * np.float32(policy_thrust_max / thrust_max)


def hover_env(bundle: Path) -> gym.Env:
    """The bundle's env config, without randomization or noise: the state the firmware sees is exact."""
    config = json.loads((bundle / "policy.json").read_text())["training"]["env_config"]
    config["randomization"]["enabled"] = False
    return gym.make("robo_rl/CrazyflieHover-v0", config=config)


def true_state(env: gym.Env) -> tuple[np.ndarray, ...]:
    pos, quat, vel, angvel = (np.asarray(a)[:, 0] for a in env.unwrapped.batch.physics.state())
    return pos, quat, vel, angvel


class Heading(ctypes.Structure):
    """rr_heading_t: the frame the app observes in, turned about z by the heading it took over at."""
    _fields_ = [("cos", ctypes.c_float), ("sin", ctypes.c_float)]


def heading_struct(yaw: float = 0.0) -> ctypes.Structure:
    return Heading(math.cos(yaw), math.sin(yaw))


def yaw_of(quat) -> float:
    """The heading of a quaternion w x y z (the app's rr_heading_of), as the simulator defines it."""
    return float(heading(quat_to_matrix(np, np.asarray(quat, dtype=np.float64))))


def state_history_struct(steps: int) -> ctypes.Structure:
    """An rr_state_history_t for a policy with `steps` past velocity errors and body rates."""
    class StateHistory(ctypes.Structure):
        _fields_ = [("values", ctypes.c_float * (6 * max(steps, 1))), ("filled", ctypes.c_int)]

    return StateHistory()


@pytest.mark.parametrize("bundle", ["exported_bundle", "state_history_bundle"])
def test_observation_built_on_board_equals_the_simulators(bundle, request, tmp_path):
    bundle = request.getfixturevalue(bundle)
    lib = ctypes.CDLL(str(compile_c(bundle, tmp_path / "libobs.so", [APP / "src" / "robo_rl_observation.c"],
                                    shared=True)))
    env = hover_env(bundle)
    history_steps, state_steps = env.unwrapped.config.action_history, env.unwrapped.config.state_history
    history = (ctypes.c_float * (4 * max(history_steps, 1)))()
    state_history = state_history_struct(state_steps)
    limit = env.unwrapped.config.position_error_limit
    rng = np.random.default_rng(0)
    farthest = 0.0
    # the second start: the app's take-over, where both histories start over, in the frame of the start's heading;
    # the third: a setpoint 0.47 m off, in a frame turned 166 degrees
    for episode, (offset, frame) in enumerate([((0.0, 0.0, 0.0), "world"), ((0.0, 0.0, 0.0), "start"),
                                               ((0.3, -0.3, 0.2), 2.9)]):
        target = np.asarray(env.unwrapped.config.center, np.float32) + np.asarray(offset, np.float32)
        obs, _ = env.reset(seed=3 + episode, options={"target": target})
        yaw = {"world": 0.0, "start": yaw_of(true_state(env)[1])}.get(frame, frame)
        if frame == "start":
            assert abs(yaw) > 0.05  # a heading of its own: the frame is in play
        heading = heading_struct(yaw)
        lib.rr_history_reset(history, ctypes.c_float(env.unwrapped.batch.params.hover_command))
        lib.rr_state_history_reset(ctypes.byref(state_history))
        for _ in range(20):
            pos, quat, vel, angvel = true_state(env)
            flight = (ctypes.c_float * 13)(*pos, *vel, *quat, *angvel)
            built = (ctypes.c_float * obs.size)()
            lib.rr_observation_build(flight, ctypes.byref(heading), (ctypes.c_float * 3)(*target),
                                     (ctypes.c_float * 3)(0, 0, 0), history, ctypes.byref(state_history), built)
            np.testing.assert_allclose(np.array(built), in_heading_frame(obs, yaw, history_steps, state_steps),
                                       atol=2e-6, rtol=0)
            farthest = max(farthest, float(np.linalg.norm(np.array(built)[:3])))
            lib.rr_state_history_push(ctypes.byref(state_history), built)
            action = rng.uniform(0.3, 0.6, 4).astype(np.float32)
            obs, _, terminated, _, _ = env.step(action)
            assert not terminated
            lib.rr_history_push(history, (ctypes.c_float * 4)(*action))
    if limit:  # the far setpoint is observed at the limit: the limit was in play
        assert "POLICY_POSITION_ERROR_LIMIT_M" in (bundle / "c" / "policy_layout.h").read_text()
        assert farthest == pytest.approx(limit, rel=1e-5)
    else:
        assert farthest > 0.3


def test_state_history_holds_the_previous_observed_velocity_errors_and_body_rates(state_history_bundle, tmp_path):
    # The simulator's definition (sim/quadrotor/observation.py), written out: after a reset the first
    # observation's velocity error and body rates fill every entry; each later observation holds those of
    # the previous ones, newest first. Here with a moving reference, so the velocity error is not the velocity.
    lib = ctypes.CDLL(str(compile_c(state_history_bundle, tmp_path / "libobs.so",
                                    [APP / "src" / "robo_rl_observation.c"], shared=True)))
    layout = {f["name"]: f for f in json.loads((state_history_bundle / "policy.json").read_text())["observation"]["layout"]}
    steps = layout["state_history"]["size"] // 6
    assert steps == 4 and layout["state_history"]["offset"] == layout["action_history"]["offset"] + 32
    size = layout["state_history"]["offset"] + 6 * steps
    history = (ctypes.c_float * 32)()
    lib.rr_history_reset(history, ctypes.c_float(0.5))
    state_history = state_history_struct(steps)
    rng = np.random.default_rng(1)
    seen: list[np.ndarray] = []  # (velocity error, body rates) of each observation built, oldest first
    for step in range(10):
        if step == 6:  # a take-over
            lib.rr_state_history_reset(ctypes.byref(state_history))
            seen = []
        position, velocity, rates = rng.normal(0, 0.3, 3), rng.normal(0, 0.5, 3), rng.normal(0, 2.0, 3)
        target_velocity = rng.normal(0, 0.5, 3)
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        flight = (ctypes.c_float * 13)(*position, *velocity, *quat, *rates)
        built = (ctypes.c_float * size)()
        lib.rr_observation_build(flight, ctypes.byref(heading_struct()), (ctypes.c_float * 3)(0, 0, 1),
                                 (ctypes.c_float * 3)(*target_velocity), history, ctypes.byref(state_history), built)
        current = np.concatenate([velocity - target_velocity, rates]).astype(np.float32)
        np.testing.assert_allclose(np.array(built)[12:18], current, atol=1e-6)
        previous = (seen[::-1] + [seen[0] if seen else current] * steps)[:steps]
        np.testing.assert_allclose(np.array(built)[size - 6 * steps:], np.concatenate(previous), atol=1e-6, rtol=0)
        lib.rr_state_history_push(ctypes.byref(state_history), built)
        seen.append(current)


def driver_lines(ticks: list[dict | str]) -> str:
    """Driver input: a dict per tick (tick, enable, beat, values, the setpoint's mode (driver.c), thrust), or a
    command line as is (param, supervisor, init)."""
    return "".join(
        t + "\n" if isinstance(t, str) else
        f"tick {t['tick']} {t['enable']} {t['beat']} {' '.join(f'{v:.9g}' for v in t['values'])} {t['mode']} "
        f"{t.get('thrust', 0.0):.9g}\n"
        for t in ticks)


def run_driver(driver: Path, text: str) -> list[list[float]]:
    """Rows: tick, active, fault, controlMode, four values (forces, or roll pitch yaw thrust), stock calls."""
    out = subprocess.run([str(driver)], input=text, capture_output=True, text=True, check=True).stdout
    return [[float(v) for v in line.split()] for line in out.splitlines() if not line.startswith("selftest")]


def state_values(pos, quat, vel, angvel, setpoint) -> list[float]:
    gyro_deg_s = np.degrees(angvel)  # the firmware's gyro unit
    return [*pos, *vel, *quat, *gyro_deg_s, *setpoint]


def app_action(agent: SAC, env: gym.Env, obs: np.ndarray, yaw: float) -> np.ndarray:
    """The PyTorch policy's action on the simulator's observation seen in the frame of heading `yaw`."""
    config = env.unwrapped.config
    turned = in_heading_frame(obs, yaw, config.action_history, config.state_history)
    return agent.act(torch.as_tensor(turned[None].astype(np.float32)), deterministic=True).numpy()[0]


def test_controller_flies_the_policy_with_heartbeat_and_falls_back_when_it_lapses(exported_bundle, trained_run, tmp_path):
    driver = compile_driver(exported_bundle, tmp_path / "driver")
    selftest = subprocess.run([str(driver)], input="selftest\n", capture_output=True, text=True, check=True).stdout
    assert selftest.strip() == "selftest 1"  # controllerOutOfTreeTest: the recorded pairs pass on board

    # Fly the simulator with the PyTorch policy observing in the frame of the heading it took over at, as the app
    # does; every 10 stabilizer ticks (1 kHz / 100 Hz) is one policy step.
    agent = SAC.from_checkpoint(load_checkpoint(trained_run))
    manifest = json.loads((exported_bundle / "policy.json").read_text())
    thrust_max = manifest["deployment"]["thrust_max_newton"]  # the training vehicle: the default deployment
    assert thrust_max == manifest["training"]["vehicle_parameters"]["thrust_max"]
    env = hover_env(exported_bundle)
    center = list(env.unwrapped.config.center)
    obs, _ = env.reset(seed=5)
    yaw = yaw_of(true_state(env)[1])
    ticks, expected = [], []
    for step in range(30):
        action = app_action(agent, env, obs, yaw)
        state = true_state(env)
        for sub in range(10):
            tick = 10 * step + sub
            ticks.append({"tick": tick, "enable": 1, "beat": tick + 1, "values": state_values(*state, center), "mode": 1})
        expected.append(motor_forces(action, thrust_max))
        obs, _, terminated, _, _ = env.step(action)
        assert not terminated
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert (rows[:, 1] == 1).all() and (rows[:, 2] == 0).all() and (rows[:, 3] == 2).all()  # active, no fault, Force mode
    assert rows[-1, 8] == 0  # the stock controller never flew
    commanded = rows[::10, 4:8]  # right after each policy step
    np.testing.assert_allclose(commanded, np.array(expected), atol=1e-5, rtol=0)
    np.testing.assert_array_equal(rows[9::10, 4:8], commanded)  # held between policy steps

    # Heartbeat stops at tick 0: the policy flies 200 ms, then the stock controller takes over, latched.
    hover = state_values(np.array(center), np.array([1.0, 0, 0, 0]), np.zeros(3), np.zeros(3), center)
    lapse = [{"tick": t, "enable": 1, "beat": 7, "values": hover, "mode": 1} for t in range(400)]
    resumed = [{"tick": t, "enable": 0 if t < 402 else 1, "beat": t, "values": hover, "mode": 1}
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
            [{"tick": 0, "enable": 1, "beat": 1, "values": hover, "mode": 1},
             {"tick": 10, "enable": 1, "beat": 10, "values": values, "mode": 1},
             {"tick": 11, "enable": 1, "beat": 11, "values": hover, "mode": 1}])))
        assert rows[0, 1] == 1 and rows[1, 1] == 0 and rows[1, 2] == fault, (fault, rows)
        assert rows[2, 1] == 0 and rows[2, 3] == 0  # latched: the stock controller keeps flying
        assert np.isfinite(rows[:, 4:8]).all()


LEVEL = np.array([1.0, 0.0, 0.0, 0.0])
# the setpoint modes of host_test/driver.c
STOP_OR_THRUST, POSITION, HOVER, LEVEL_OUT, VELOCITY = 0, 1, 2, 3, 4


def hover_values(position, setpoint, gyro_deg_s=(0.0, 0.0, 0.0), quat=LEVEL) -> list[float]:
    """Driver values for a vehicle at rest at `position` with body rates `gyro_deg_s`, commanded to `setpoint`."""
    return [*position, 0.0, 0.0, 0.0, *quat, *gyro_deg_s, *setpoint]


def tick(n: int, values: list[float], enable: int = 1, beat: int | None = None, mode: int = 1,
         thrust: float = 0.0) -> dict:
    """One stabilizer tick; by default enabled with a heartbeat that changes every tick."""
    return {"tick": n, "enable": enable, "beat": n + 1 if beat is None else beat, "values": values,
            "mode": mode, "thrust": thrust}


@pytest.fixture(scope="module")
def driver(exported_bundle, tmp_path_factory) -> Path:
    return compile_driver(exported_bundle, tmp_path_factory.mktemp("driver") / "driver")


def test_stop_setpoint_stops_the_motors_and_the_policy_stays_stopped_until_re_enabled(driver):
    # Hovering at 0.5 m under the policy; land() ends (z = 0.03 m) and the firmware sends its all-zero stop setpoint.
    flying = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(100)]
    stopped = [tick(t, hover_values([0, 0, 0.03], [0, 0, 0]), mode=STOP_OR_THRUST, thrust=0.0) for t in range(100, 200)]
    # A new position setpoint (a pilot's go_to or a stray stream) with the heartbeat still fresh:
    later = [tick(t, hover_values([0, 0, 0.03], [0, 0, 0.5])) for t in range(200, 300)]
    rows = np.array(run_driver(driver, driver_lines(flying + stopped + later)))
    assert rows[:100, 1].all() and (rows[:100, 3] == 2).all()
    # from the stop setpoint on, the stock PID flies it: legacy mode, thrust 0, motors off
    assert not rows[100:, 1].any() and (rows[100:200, 3] == 0).all() and (rows[100:200, 4:8] == 0).all()
    assert (rows[100:, 2] == 5).all()  # latched: the policy does not take off again by itself
    # only clearing and setting enable again hands it back to the policy
    again = [tick(300, hover_values([0, 0, 0.5], [0, 0, 0.5]), enable=0),
             *[tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(301, 310)]]
    rows = np.array(run_driver(driver, driver_lines(flying + stopped + later + again)))
    assert rows[-1, 1] == 1 and rows[-1, 2] == 0


def test_the_supervisors_level_out_holds_the_last_commanded_position(driver):
    """A go_to stream moved the target 0.2 m, then setpoints stopped coming and the supervisor levelled out (x, y
    disabled, level attitude, z kept): the policy holds the last target, not where it took over."""
    flying = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(50)]
    moved = [tick(t, hover_values([0, 0, 0.5], [0.2, 0, 0.5])) for t in range(50, 100)]
    commanded = [tick(t, hover_values([0, 0, 0.5], [0.2, 0, 0.5])) for t in range(100, 130)]
    level_out = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5]), mode=LEVEL_OUT) for t in range(100, 130)]
    held = np.array(run_driver(driver, driver_lines(flying + moved + level_out)))[100:]
    expected = np.array(run_driver(driver, driver_lines(flying + moved + commanded)))[100:]
    assert held[:, 1].all() and (held[:, 2] == 0).all() and (held[:, 3] == 2).all()
    np.testing.assert_array_equal(held[:, 4:8], expected[:, 4:8])
    # the level-out never starts the policy: it continues one that flew
    rows = np.array(run_driver(driver, driver_lines(level_out)))
    assert not rows[:, 1].any() and (rows[:, 3] == 0).all()


@pytest.mark.parametrize("mode, setpoint, thrust", [
    (HOVER, [0.0, 0.0, 0.3], 0.0),  # cmd_hover, cflib's MotionCommander: velocities in x, y, a height
    (VELOCITY, [0.1, 0.0, -0.2], 0.0),  # cmd_vel_world
    (STOP_OR_THRUST, [0.0, 0.0, 0.0], 30000.0),  # attitude and thrust (a pilot's manual control)
])
def test_setpoints_the_policy_was_not_trained_on_are_the_pids_until_target_positions_return(driver, mode, setpoint,
                                                                                           thrust):
    """The policy flew every setpoint that was not a stop, to the last target position: cflib's MotionCommander
    land() (hover setpoints, z falling) left it hovering at the old height until the stop cut the motors there."""
    flying = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(50)]
    other = [tick(t, hover_values([0, 0, 0.5], setpoint), mode=mode, thrust=thrust) for t in range(50, 80)]
    back = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(80, 90)]
    rows = np.array(run_driver(driver, driver_lines(flying + other + back)))
    assert rows[:50, 1].all()
    assert not rows[50:80, 1].any() and (rows[50:80, 3] == 0).all() and (rows[50:80, 2] == 0).all()  # no fault
    assert rows[80:, 1].all() and (rows[80:, 2] == 0).all()  # target positions again: the policy flies
    # the handed-over PID starts afresh on the new setpoint, as on every hand-over
    np.testing.assert_array_equal(rows[50, 4:8], fresh_pid_output(driver, other[0]))


def test_a_landing_below_the_floor_is_the_pids_and_the_stop_after_it_keeps_the_motors_off(driver):
    """A high-level land() streams target positions down to the ground: the policy, trained without ground or
    ground effect (episodes end below 0.05 m), flew them down to 6 mm. It now hands over to the PID when the
    target goes below the take-over floor (0.1 m), and sinking below the floor by 5 cm is a geofence fault."""
    descent = np.linspace(0.5, 0.0, 50)
    landing = [tick(t, hover_values([0, 0, z], [0, 0, z])) for t, z in enumerate(descent)]
    stop = [tick(t, hover_values([0, 0, 0.01], [0, 0, 0]), mode=STOP_OR_THRUST) for t in range(50, 60)]
    rows = np.array(run_driver(driver, driver_lines(landing + stop)))
    flown = descent >= 0.1
    assert (rows[:50, 1] == flown).all() and (rows[:60, 2] == 0).all()
    assert (rows[50:, 3] == 0).all() and (rows[50:, 7] == 0).all()  # the PID stops the motors
    # a vehicle sinking under the policy while its target stays above the floor
    sinking = [tick(10 * k, hover_values([0, 0, z], [0, 0, 0.3]))  # the policy's ticks, where its guards run
               for k, z in enumerate([0.3, 0.2, 0.12, 0.06, 0.04])]
    rows = np.array(run_driver(driver, driver_lines(sinking)))
    assert rows[:3, 1].all() and not rows[4:, 1].any() and rows[4, 2] == 3


@pytest.mark.parametrize("value", [-1.0, 0.0, math.nan])
def test_a_take_over_floor_parameter_below_the_apps_own_is_not_taken(driver, value):
    """robo_rl.minTakeOverZ = -1 handed a vehicle stopped on the ground at 0.03 m to the policy on re-enabling."""
    flying = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(20)]
    stopped = [tick(t, hover_values([0, 0, 0.03], [0, 0, 0]), mode=STOP_OR_THRUST) for t in range(20, 40)]
    again = [tick(40, hover_values([0, 0, 0.03], [0, 0, 0.5]), enable=0),
             *[tick(t, hover_values([0, 0, 0.03], [0, 0, 0.5])) for t in range(41, 60)]]
    rows = np.array(run_driver(driver, driver_lines([f"param minTakeOverZ {value}", *flying, *stopped, *again])))
    assert rows[19, 1] == 1 and not rows[20:, 1].any()
    raised = ["param minTakeOverZ 0.6", tick(0, hover_values([0, 0, 0.5], [0, 0, 0.5]))]
    assert not np.array(run_driver(driver, driver_lines(raised)))[0, 1]  # raising it is taken


def test_a_vehicle_on_the_ground_is_not_handed_to_the_policy_by_re_enabling(driver):
    # After a stop at 0.03 m the supervisor still reports "flying" for a while (it looks at recent thrust):
    # clearing and setting enable again with heartbeats and a position setpoint must not start the policy.
    flying = [tick(t, hover_values([0, 0, 0.5], [0, 0, 0.5])) for t in range(100)]
    stopped = [tick(t, hover_values([0, 0, 0.03], [0, 0, 0]), mode=STOP_OR_THRUST, thrust=0.0) for t in range(100, 150)]
    again = [tick(150, hover_values([0, 0, 0.03], [0, 0, 0.5]), enable=0),
             *[tick(t, hover_values([0, 0, 0.03], [0, 0, 0.5])) for t in range(151, 200)]]
    rows = np.array(run_driver(driver, driver_lines(flying + stopped + again)))
    assert rows[99, 1] == 1 and not rows[100:, 1].any()
    # once the stock controller has it in the air again, the policy may take over
    airborne = [tick(t, hover_values([0, 0, 0.3], [0, 0, 0.5])) for t in range(200, 210)]
    rows = np.array(run_driver(driver, driver_lines(flying + stopped + again + airborne)))
    assert rows[-1, 1] == 1


def fresh_pid_output(driver: Path, last: dict) -> np.ndarray:
    """roll, pitch, yaw, thrust of a freshly started stock controller for the state and setpoint of `last`."""
    return np.array(run_driver(driver, driver_lines([{**last, "tick": 0, "enable": 0}])))[0, 4:8]


@pytest.mark.parametrize("cause", ["enable cleared", "heartbeat lapse", "stop setpoint", "supervisor"])
def test_hand_over_to_the_pid_starts_it_afresh_with_every_field_written(driver, cause):
    # The stock PID flies first, 0.5 m below its target: its altitude integrator winds up.
    climbing = [tick(t, hover_values([0, 0, 0.5], [0, 0, 1.0]), enable=0) for t in range(100)]
    # The policy takes over on an odd tick and flies; the hand-over comes on an odd tick that is not a
    # position-loop tick, where the PID's attitude loop (500 Hz) does not run.
    gyro = (3.0, -2.0, 1.0)
    at_target = hover_values([0, 0, 1.0], [0, 0, 1.0], gyro)
    policy = [tick(t, at_target) for t in range(101, 151)]
    if cause == "enable cleared":
        after = [tick(t, at_target, enable=0) for t in range(151, 171)]
    elif cause == "heartbeat lapse":
        policy = [tick(t, at_target, beat=151 if t >= 150 else None) for t in range(101, 150 + 201)]
        after = [tick(t, at_target, beat=151) for t in range(351, 371)]
    elif cause == "stop setpoint":
        at_target = hover_values([0, 0, 1.0], [0, 0, 0], gyro)
        after = [tick(t, at_target, mode=STOP_OR_THRUST, thrust=0.0) for t in range(151, 171)]
    else:
        after = ["supervisor 0 1 1", *[tick(t, at_target) for t in range(151, 171)]]
    rows = np.array(run_driver(driver, driver_lines(climbing + policy + after)))
    first = len(climbing) + len(policy)
    assert rows[first - 1, 1] == 1 and rows[first - 1, 3] == 2  # the policy flew until here
    assert int(rows[first, 0]) % 2 == 1 and int(rows[first, 0]) % 10 != 0
    handed = rows[first:]
    assert not handed[:, 1].any() and (handed[:, 3] == 0).all()
    # every stock tick after the hand-over: what a freshly started PID commands here (no wound-up
    # integrator, no float bits in roll/pitch/yaw)
    expected = fresh_pid_output(driver, after[-1])
    np.testing.assert_array_equal(handed[:, 4:8], np.tile(expected, (len(handed), 1)))


def test_a_controller_switch_in_flight_hands_the_pid_the_current_state_and_the_log_says_so(driver):
    """stabilizer.controller set to the PID while the policy flew: the firmware calls only the PID's init, which
    resets its position loop but not its thrust (nor, in the real one, its attitude loop), so the PID started from
    the wound-up thrust of its flight before the policy took over, and log robo_rl.active kept reading 1."""
    climbing = [tick(t, hover_values([0, 0, 0.5], [0, 0, 1.0]), enable=0) for t in range(100)]
    at_target = hover_values([0, 0, 1.0], [0, 0, 1.0], (3.0, -2.0, 1.0))
    policy = [tick(t, at_target) for t in range(101, 151)]
    # the switch comes before an odd tick that is no position-loop tick: neither of the PID's loops runs there
    switched = ["controller pid", *[tick(t, at_target) for t in range(151, 171)]]
    rows = np.array(run_driver(driver, driver_lines(climbing + policy + switched)))
    first = len(climbing) + len(policy)
    assert rows[first - 1, 1] == 1 and rows[first - 1, 3] == 2  # the policy flew until here
    handed = rows[first:]
    assert not handed[:, 1].any() and (handed[:, 3] == 0).all()
    expected = fresh_pid_output(driver, switched[-1])
    assert handed[0, 7] == expected[3]  # the thrust of a PID started from this state, not the climb's
    # From the next tick, where its attitude loop runs, every field is a fresh PID's. (The first tick's legacy
    # roll/pitch/yaw still hold the policy's forces: control_t is the stabilizer's, and the switch tells the app
    # nothing.)
    np.testing.assert_array_equal(handed[1:, 4:8], np.tile(expected, (len(handed) - 1, 1)))
    # selected again, the app takes over again only on a fresh heartbeat, from the state it finds
    back = ["controller oot", *[tick(t, at_target) for t in range(171, 181)]]
    rows = np.array(run_driver(driver, driver_lines(climbing + policy + switched + back)))
    assert rows[-1, 1] == 1 and rows[-1, 2] == 0 and rows[-1, 3] == 2


def test_policy_takes_over_only_from_a_vehicle_the_supervisor_reports_armed_and_flying(driver):
    hover = hover_values([0, 0, 1.0], [0, 0, 1.0])
    for state in ("0 1 1", "1 0 1", "1 1 0"):  # not allowed to fly / not armed / landed
        rows = np.array(run_driver(driver, driver_lines(
            [f"supervisor {state}", *[tick(t, hover) for t in range(20)],
             "supervisor 1 1 1", *[tick(t, hover) for t in range(20, 40)]])))
        assert not rows[:20, 1].any() and (rows[:20, 3] == 0).all() and (rows[:20, 2] == 0).all(), state
        assert rows[20:, 1].all(), state  # taken off (by the stock controller): now it takes over
        # withdrawn while the policy flies: the PID takes it, latched until re-enabled
        rows = np.array(run_driver(driver, driver_lines(
            [*[tick(t, hover) for t in range(20)], f"supervisor {state}", *[tick(t, hover) for t in range(20, 30)],
             "supervisor 1 1 1", *[tick(t, hover) for t in range(30, 40)]])))
        assert rows[:20, 1].all() and not rows[20:, 1].any() and (rows[20:, 2] == 6).all(), state


def test_geofence_holds_the_absolute_arena_as_well_as_the_training_box(driver):
    # At the target, so the error bound alone would pass; the arena is x, y in [-2, 2] m, z in [-0.2, 2.5] m
    # by default and settable by parameter.
    for position, params in (([2.5, 0, 1.0], []), ([0, 0, 2.7], []), ([0, 0, 1.3], ["param arenaZMax 1.2"]),
                             ([-1.1, 0, 1.0], ["param arenaXMin -1.0"])):
        values = hover_values(position, position)
        rows = np.array(run_driver(driver, driver_lines([*params, tick(0, values), tick(1, values)])))
        assert not rows[:, 1].any() and (rows[:, 2] == 3).all(), position
    rows = np.array(run_driver(driver, driver_lines([tick(0, hover_values([1.9, -1.9, 2.4], [1.9, -1.9, 2.4]))])))
    assert rows[0, 1] == 1


def test_only_a_heartbeat_change_after_selecting_and_enabling_the_controller_counts(driver):
    hover = hover_values([0, 0, 1.0], [0, 0, 1.0])
    # The ground station incremented the heartbeat to 57 while another controller flew; then
    # stabilizer.controller switches to this one (controllerOutOfTreeInit) and the heartbeat stops.
    rows = np.array(run_driver(driver, driver_lines(
        ["param enable 1", "param heartbeat 57", "init", *[tick(t, hover, beat=57) for t in range(300)],
         *[tick(t, hover, beat=58) for t in range(300, 310)]])))
    assert not rows[:300, 1].any() and rows[300:, 1].all()
    # Enabling with a heartbeat that no longer changes does not fly the policy either.
    rows = np.array(run_driver(driver, driver_lines(
        [tick(0, hover, enable=0, beat=5), *[tick(t, hover, beat=5) for t in range(1, 100)]])))
    assert not rows[:, 1].any()


def test_tilt_limit_is_below_90_degrees(driver):
    for degrees, faults in ((55.0, False), (65.0, True), (89.0, True)):
        half = math.radians(degrees) / 2
        values = hover_values([0, 0, 1.0], [0, 0, 1.0], quat=np.array([math.cos(half), math.sin(half), 0, 0]))
        rows = np.array(run_driver(driver, driver_lines([tick(0, values)])))
        assert (rows[0, 2] == 2) == faults and rows[0, 1] == (not faults), degrees


def test_history_holds_what_the_motors_got_when_the_firmware_clamps_and_cuts(exported_bundle, trained_run, tmp_path):
    # The history the app keeps must be the simulator's (config.firmware_thrust_max/min): a firmware whose
    # limits bite on this briefly trained policy (commands 0.46-0.55): THRUST_MAX 0.056 N and
    # THRUST_MIN 0.054 N against the trained vehicle's thrust_max of about 0.11 N, so commands above ~0.51 are
    # clamped and below ~0.49 turned off.
    # (The policy is exported for those limits, or the app's limit check would keep it from taking over.)
    thrust_max, thrust_min = 0.056, 0.054
    driver = compile_driver(for_firmware(exported_bundle, tmp_path / "bundle", thrust_max, thrust_min),
                            tmp_path / "driver", (f"-DTHRUST_MAX={thrust_max}f", f"-DTHRUST_MIN={thrust_min}f"))
    manifest = json.loads((exported_bundle / "policy.json").read_text())
    policy_thrust_max = np.float32(manifest["deployment"]["thrust_max_newton"])
    agent = SAC.from_checkpoint(load_checkpoint(trained_run))
    env = hover_env(exported_bundle)
    center = np.asarray(env.unwrapped.config.center, np.float32)
    history_steps = env.unwrapped.config.action_history
    # The vehicle held 0.1 m below and beside its target: the policy asks for more than the clamp on some
    # motors. On board: the observation gets, as the simulator's does, the commands the motors actually got.
    position = center + np.float32([0.1, -0.05, -0.1])
    values = hover_values(position, center)
    history = np.full((history_steps, 4), env.unwrapped.batch.params.hover_command, np.float32)
    expected, actions = [], []
    for _ in range(30):
        obs = np.concatenate([position - center, np.eye(3, dtype=np.float32).ravel(), np.zeros(6, np.float32),
                              history.ravel()]).astype(np.float32)
        action = agent.act(torch.as_tensor(obs[None]), deterministic=True).numpy()[0]
        flown = flown_commands(action, policy_thrust_max, thrust_max, thrust_min)
        history = np.concatenate([flown[None], history[:-1]])
        expected.append(flown * np.float32(policy_thrust_max / thrust_max))
        actions.append(action)
    commands = np.array(actions) * policy_thrust_max  # [N]
    assert (commands > thrust_max).any() and (commands < thrust_min).any()  # both limits bite ...
    assert np.abs(commands - thrust_max).min() > 1e-5 and np.abs(commands - thrust_min).min() > 1e-5  # ... clearly
    rows = np.array(run_driver(driver, driver_lines([tick(t, values) for t in range(300)])))
    assert rows[:, 1].all()
    np.testing.assert_allclose(rows[::10, 4:8], np.array(expected), atol=1e-5, rtol=0)


def self_test(driver: Path) -> int:
    """controllerOutOfTreeTest's verdict (1 passed, 0 failed)."""
    out = subprocess.run([str(driver)], input="selftest\n", capture_output=True, text=True, check=True).stdout
    return int(out.split()[1])


BRUSHLESS_LIMITS = ("-DTHRUST_MAX=0.2f", "-DTHRUST_MIN=0.02136263065537499f")  # platform_defaults_cf21bl.h


@pytest.mark.parametrize("defines", [BRUSHLESS_LIMITS, BRUSHLESS_LIMITS[:1], BRUSHLESS_LIMITS[1:]])
def test_on_a_firmware_with_other_thrust_limits_the_self_test_fails_and_the_pid_flies(exported_bundle, tmp_path,
                                                                                     defines):
    # A policy exported for a CF2.1 (THRUST_MAX 0.12 N) on a Brushless's firmware: its actions would become
    # other forces than the ones it was checked with, so it must never take over, whatever the ground station does.
    driver = compile_driver(exported_bundle, tmp_path / "driver", defines)
    assert self_test(driver) == 0
    values = hover_values([0.0, 0.0, 1.0], [0.0, 0.0, 1.0])
    ticks = [tick(t, values) for t in range(40)] + [tick(40, values, enable=0)] + [tick(t, values) for t in range(41, 80)]
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert not rows[:, 1].any() and (rows[:, 2] == 7).all()  # never active; fault 7, not acknowledged by enable
    assert (rows[:, 3] == 0).all() and np.diff(rows[:, 8]).min() == 1  # the stock PID flies every tick


def test_the_limit_check_allows_float_rounding_of_the_same_limits(exported_bundle, tmp_path):
    # a firmware that writes the CF2's limits as double literals, or with fewer digits that round to the same float
    driver = compile_driver(exported_bundle, tmp_path / "driver", ("-DTHRUST_MAX=0.12", "-DTHRUST_MIN=0.0128175784"))
    assert self_test(driver) == 1
    rows = np.array(run_driver(driver, driver_lines([tick(t, hover_values([0.0, 0.0, 1.0], [0.0, 0.0, 1.0]))
                                                      for t in range(20)])))
    assert rows[:, 1].all() and (rows[:, 2] == 0).all()


def test_a_policy_exported_for_another_vehicle_commands_its_thrust_on_its_firmware(trained_run, tmp_path):
    from robo_rl.export.bundle import export_bundle
    from robo_rl.export.c_generator import c_float
    from sim.quadrotor.model import VEHICLES, QuadrotorParams, load_model

    bundle = export_bundle(trained_run, out=tmp_path / "bundle", pairs=8, vehicle="crazyflie_brushless")
    manifest = json.loads((bundle / "policy.json").read_text())
    deployment = manifest["deployment"]
    params = QuadrotorParams.from_model(load_model("crazyflie_brushless"))
    assert deployment["vehicle"] == "crazyflie_brushless" and manifest["training"]["env_config"]["vehicle"] == "crazyflie_rltools"
    assert deployment["thrust_max_newton"] == params.thrust_max and deployment["hover_command"] == params.hover_command
    assert deployment["firmware_thrust_max"] == VEHICLES["crazyflie_brushless"].firmware_thrust_max == 0.2
    assert deployment["firmware_thrust_min"] == VEHICLES["crazyflie_brushless"].firmware_thrust_min
    assert manifest["action"]["safe_action"] == pytest.approx([params.hover_command] * 4)
    layout = (bundle / "c" / "policy_layout.h").read_text()
    for name, value in (("THRUST_MAX_NEWTON", params.thrust_max), ("HOVER_COMMAND", params.hover_command),
                        ("FIRMWARE_THRUST_MAX", 0.2), ("FIRMWARE_THRUST_MIN", deployment["firmware_thrust_min"])):
        assert f"#define POLICY_{name} {c_float(value)}\n" in layout, name

    assert self_test(compile_driver(bundle, tmp_path / "cf2")) == 0  # refused on a CF2.1's firmware
    driver = compile_driver(bundle, tmp_path / "brushless", BRUSHLESS_LIMITS)
    assert self_test(driver) == 1
    # Take-over, then again after enable was cleared: each time the first action is the policy's on the
    # observation whose history is the Brushless's hover command, sent as forces of its 0.2 N THRUST_MAX.
    agent = SAC.from_checkpoint(load_checkpoint(trained_run))
    center = np.asarray(manifest["training"]["env_config"]["center"], np.float32)
    position = center + np.float32([0.05, 0.0, -0.05])
    history = np.full(4 * manifest["training"]["env_config"]["action_history"], params.hover_command, np.float32)
    obs = np.concatenate([position - center, np.eye(3, dtype=np.float32).ravel(), np.zeros(6, np.float32), history])
    action = agent.act(torch.as_tensor(obs[None].astype(np.float32)), deterministic=True).numpy()[0]
    expected = motor_forces(action, params.thrust_max, 0.2, deployment["firmware_thrust_min"])
    values = hover_values(position, center)
    ticks = [tick(t, values) for t in range(20)] + [tick(20, values, enable=0)] + [tick(t, values) for t in range(21, 40)]
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert rows[:20, 1].all() and not rows[20, 1] and rows[21:, 1].all()
    np.testing.assert_allclose(rows[0, 4:8], expected, atol=1e-5, rtol=0)
    assert np.abs(rows[10, 4:8] - rows[0, 4:8]).max() > 1e-4  # the second step saw its own history ...
    np.testing.assert_array_equal(rows[21, 4:8], rows[0, 4:8])  # ... and the take-over reset it


# STAND-IN for crazyflie-firmware's tools/make/oot.mk (CI has no firmware checkout): its OOT default and the
# build folder it creates under $(OOT); the "image" is the policy it was built with, named as the firmware names
# it after the configured platform (PROG = PLATFORM: cf2, or cf21bl after cf21bl_defconfig).
STAND_IN_OOT_MK = """OOT ?= $(PWD)
PROG ?= cf2
all:
\tmkdir -p $(OOT)/build && echo $(OOT) > $(OOT)/build/oot.txt && cp $(OOT)/src/policy.c $(OOT)/build/$(PROG).bin
"""


def make_app(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the app (without any policy) and a stand-in firmware to build it against."""
    app = tmp_path / "app"
    for name in ("Makefile", "Kbuild", "app-config"):
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_bytes((APP / name).read_bytes())
    (app / "src").mkdir()
    for source in (APP / "src").glob("robo_rl_*.[ch]"):
        (app / "src" / source.name).write_bytes(source.read_bytes())
    (app / "src" / "Kbuild").write_bytes((APP / "src" / "Kbuild").read_bytes())
    firmware = tmp_path / "crazyflie-firmware"
    (firmware / "tools" / "make").mkdir(parents=True)
    (firmware / "tools" / "make" / "oot.mk").write_text(STAND_IN_OOT_MK)
    return app, firmware


def run_make(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """make as a shell in `cwd` runs it (the shell sets PWD, which make -C keeps)."""
    return subprocess.run(["make", *args], cwd=cwd, env={**os.environ, "PWD": str(cwd)}, capture_output=True, text=True)


def test_make_from_another_directory_builds_the_app_in_its_own_folder(exported_bundle, tmp_path):
    app, firmware = make_app(tmp_path)
    elsewhere = tmp_path / "repo_root"
    elsewhere.mkdir()
    result = run_make(elsewhere, "-C", str(app), f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={exported_bundle / 'c'}")
    assert result.returncode == 0, result.stderr
    assert (app / "build" / "oot.txt").read_text().strip() == str(app)
    assert (app / "build" / "cf2.bin").read_bytes() == (exported_bundle / "c" / "policy.c").read_bytes()
    assert not (elsewhere / "build").exists()


@pytest.mark.parametrize("platform", ["cf2", "cf21bl"])
def test_a_wrong_policy_dir_fails_with_one_line_and_leaves_no_policy_to_flash(exported_bundle, tmp_path, platform):
    app, firmware = make_app(tmp_path)
    image = app / "build" / f"{platform}.bin"  # what `make cload` flashes for the configured platform
    built = run_make(app, f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={exported_bundle / 'c'}", f"PROG={platform}")
    assert built.returncode == 0 and image.exists()  # an earlier policy, built
    result = run_make(app, f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={tmp_path / 'no_such_export'}", f"PROG={platform}")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "POLICY_DIR=" in lines[0] and "no_such_export" in lines[0], result.stderr
    assert not image.exists() and not (app / "src" / "policy.c").exists()
    # and a plain make afterwards says what is missing instead of building or flashing an old policy
    result = run_make(app, f"CRAZYFLIE_BASE={firmware}", f"PROG={platform}")
    assert result.returncode != 0 and "POLICY_DIR" in result.stderr and not image.exists()
    result = run_make(app, f"CRAZYFLIE_BASE={tmp_path / 'nowhere'}", f"POLICY_DIR={exported_bundle / 'c'}")
    assert result.returncode != 0 and "CRAZYFLIE_BASE" in result.stderr.strip().splitlines()[0]



def test_an_empty_or_spaced_policy_dir_fails_with_one_line_and_builds_no_stale_policy(exported_bundle, tmp_path):
    """POLICY_DIR= (an unset shell variable) read as not given: the previously copied policy was built, ready for
    `make cload`. A path with a space was split by make, and the error named a folder that does not exist."""
    app, firmware = make_app(tmp_path)
    image = app / "build" / "cf2.bin"
    assert run_make(app, f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={exported_bundle / 'c'}").returncode == 0
    assert image.exists()  # an earlier policy, built
    spaced = tmp_path / "my exports"
    shutil.copytree(exported_bundle / "c", spaced)
    result = run_make(app, f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={spaced}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and f"POLICY_DIR={spaced} holds a space" in lines[0], lines
    # refused, but the previous policy and image stayed for `make cload` (seen against the real firmware)
    assert not image.exists() and not (app / "src" / "policy.c").exists()
    assert run_make(app, f"CRAZYFLIE_BASE={firmware}", f"POLICY_DIR={exported_bundle / 'c'}").returncode == 0
    result = run_make(app, f"CRAZYFLIE_BASE={firmware}", "POLICY_DIR=")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "POLICY_DIR= is empty" in lines[0], result.stderr
    assert not image.exists() and not (app / "src" / "policy.c").exists()


def test_a_spaced_crazyflie_base_is_named_as_given(tmp_path):
    """abspath split it at the space: the error named '<first word> <app folder>/<second word>', a checkout that
    does not exist (seen against the real firmware)."""
    app, firmware = make_app(tmp_path)
    spaced = tmp_path / "cf fw"
    spaced.symlink_to(firmware)
    before = sorted(p.name for p in (app / "src").iterdir())
    result = run_make(app, f"CRAZYFLIE_BASE={spaced}", "POLICY_DIR=/nowhere")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert f"CRAZYFLIE_BASE={spaced} is empty or holds a space" in lines[0], lines
    assert sorted(p.name for p in (app / "src").iterdir()) == before


def test_a_wrong_crazyflie_base_is_refused_before_the_policy_is_copied(tmp_path):
    """It copied POLICY_DIR's files into src/ first, and then refused the checkout."""
    app, _ = make_app(tmp_path)
    export = tmp_path / "export_c"
    export.mkdir()
    for name in ("policy.c", "policy.h", "policy_layout.h"):  # never compiled: the build stops before
        (export / name).write_text("")
    before = sorted(p.name for p in (app / "src").iterdir())
    result = run_make(app, f"CRAZYFLIE_BASE={tmp_path / 'nowhere'}", f"POLICY_DIR={export}")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"CRAZYFLIE_BASE={tmp_path / 'nowhere'} " in lines[0], result.stderr
    assert sorted(p.name for p in (app / "src").iterdir()) == before and not (app / "build").exists()

def test_the_app_flies_a_state_history_policy_as_the_simulator_and_starts_its_history_over_on_take_over(
        state_history_bundle, state_history_run, tmp_path):
    driver = compile_driver(state_history_bundle, tmp_path / "driver")
    assert self_test(driver) == 1
    agent = SAC.from_checkpoint(load_checkpoint(state_history_run))
    manifest = json.loads((state_history_bundle / "policy.json").read_text())
    thrust_max = manifest["deployment"]["thrust_max_newton"]
    env = hover_env(state_history_bundle)
    assert env.unwrapped.config.state_history == 4
    center = list(env.unwrapped.config.center)
    # Along a simulated flight, the PyTorch policy on the simulator's observations (in the take-over heading's frame)
    # commands what the app does.
    obs, _ = env.reset(seed=5)
    yaw = yaw_of(true_state(env)[1])
    ticks, expected = [], []
    for step in range(30):
        action = app_action(agent, env, obs, yaw)
        state = true_state(env)
        ticks += [tick(10 * step + sub, state_values(*state, center)) for sub in range(10)]
        expected.append(motor_forces(action, thrust_max))
        obs, _, terminated, _, _ = env.step(action)
        assert not terminated
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert rows[:, 1].all() and (rows[:, 2] == 0).all() and rows[-1, 8] == 0
    np.testing.assert_allclose(rows[::10, 4:8], np.array(expected), atol=1e-5, rtol=0)

    # Enable cleared, then set again: the policy takes over anew, its first observation's velocity error and
    # body rates in every entry of the state history, the hover command in every entry of the action history.
    last = ticks[-1]["values"]
    values = [*last[:6], *last[6:10], *last[10:13], *center]
    again = [tick(300, values, enable=0)] + [tick(t, values) for t in range(301, 311)]
    rows = np.array(run_driver(driver, driver_lines(ticks + again)))
    assert not rows[300, 1] and rows[301:, 1].all()
    position, velocity, quat = (np.asarray(last[i:j], np.float32) for i, j in ((0, 3), (3, 6), (6, 10)))
    rates = np.radians(np.asarray(last[10:13], np.float64)).astype(np.float32)
    w, x, y, z = quat.astype(np.float64)
    matrix = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                       [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                       [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    hover = np.full(32, manifest["deployment"]["hover_command"], np.float32)
    now = np.concatenate([velocity, rates]).astype(np.float32)
    fresh = np.concatenate([position - np.float32(center), matrix.ravel(), now, hover, np.tile(now, 4)])
    fresh = in_heading_frame(fresh, yaw_of(quat), 8, 4)  # the frame of the new take-over's heading
    action = agent.act(torch.as_tensor(fresh[None].astype(np.float32)), deterministic=True).numpy()[0]
    np.testing.assert_allclose(rows[301, 4:8], motor_forces(action, thrust_max), atol=1e-5, rtol=0)
    # without the reset the history would have held the flight's last observations: another command
    stale = fresh.copy()
    stale[50:] = in_heading_frame(obs, yaw, 8, 4)[50:]  # as the app observed them, in the first take-over's frame
    stale_action = agent.act(torch.as_tensor(stale[None].astype(np.float32)), deterministic=True).numpy()[0]
    assert np.abs(motor_forces(stale_action, thrust_max) - rows[301, 4:8]).max() > 1e-4


@pytest.mark.parametrize("edit, message", [
    (("#define POLICY_STATE_HISTORY 4", "#define POLICY_STATE_HISTORY 3"), "state history does not end the observation"),
    (("#define POLICY_OBS_LAYOUT_SIZE 74", "#define POLICY_OBS_LAYOUT_SIZE 75"), "disagree on the observation size"),
])
def test_a_layout_header_that_does_not_add_up_to_the_policys_input_does_not_compile(state_history_bundle, tmp_path,
                                                                                   edit, message):
    bundle = tmp_path / "bundle"
    (bundle / "c").mkdir(parents=True)
    for source in (state_history_bundle / "c").iterdir():
        text = source.read_text()
        if source.name == "policy_layout.h":
            assert edit[0] + "\n" in text
            text = text.replace(edit[0] + "\n", edit[1] + "\n")
        (bundle / "c" / source.name).write_text(text)
    app = tmp_path / "app"  # (a copy: the app's own folder may hold the policy of a firmware build)
    app.mkdir()
    for name in ("robo_rl_observation.c", "robo_rl_observation.h"):
        (app / name).write_bytes((APP / "src" / name).read_bytes())
    result = subprocess.run(["cc", *CFLAGS, f"-I{bundle / 'c'}", "-fsyntax-only", str(app / "robo_rl_observation.c")],
                            capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    # the export's own header compiles
    result = subprocess.run(["cc", *CFLAGS, f"-I{state_history_bundle / 'c'}", "-fsyntax-only",
                             str(app / "robo_rl_observation.c")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("degrees", [180.0, -120.0, 95.0, 30.0])
def test_a_vehicle_facing_any_way_is_flown_as_the_simulators_facing_plus_x(exported_bundle, trained_run, tmp_path,
                                                                           degrees):
    """Training starts face within 90 degrees of +x: make train's policy flew 0% of level, still starts turned 180
    degrees in the world frame (bench/start_heading.py). The app observes in the frame of the heading it took over
    at, where the dynamics are the same (tests/sim/test_heading_frame.py): a vehicle set down facing -x flies as
    the simulated one facing +x, command for command."""
    driver = compile_driver(exported_bundle, tmp_path / "driver")
    agent = SAC.from_checkpoint(load_checkpoint(trained_run))
    thrust_max = json.loads((exported_bundle / "policy.json").read_text())["deployment"]["thrust_max_newton"]
    env = hover_env(exported_bundle)
    center = np.asarray(env.unwrapped.config.center)
    # a tilted, moving start facing +x (heading 0: the simulator's frame is the app's)
    cr, sr, cp, sp = math.cos(0.1), math.sin(0.1), math.cos(-0.08), math.sin(-0.08)  # half of roll 0.2, pitch -0.16
    tilt = np.array([cp * cr, cp * sr, sp * cr, -sp * sr])  # z-y-x Euler angles with yaw 0
    obs, _ = env.reset(seed=7, options={"initial_state": {
        "position": center + [0.1, -0.08, 0.05], "quaternion": tilt, "velocity": [0.2, 0.1, -0.1],
        "angular_velocity": [0.5, -0.3, 0.8]}})
    assert abs(yaw_of(true_state(env)[1])) < 1e-6
    yaw = math.radians(degrees)
    ticks, expected = [], []
    for step in range(40):
        action = agent.act(torch.as_tensor(obs[None]), deterministic=True).numpy()[0]
        pos, quat, vel, angvel = true_state(env)
        turned = turned_about_z(yaw, center, pos, quat, vel)
        ticks += [tick(10 * step + sub, state_values(*turned, angvel, center)) for sub in range(10)]
        expected.append(motor_forces(action, thrust_max))
        obs, _, terminated, _, _ = env.step(action)
        assert not terminated
    rows = np.array(run_driver(driver, driver_lines(ticks)))
    assert rows[:, 1].all() and (rows[:, 2] == 0).all() and rows[-1, 8] == 0, rows[:3]  # flown, no fault, no PID
    np.testing.assert_allclose(rows[::10, 4:8], np.array(expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize("degrees, fault", [(0.0, 0), (45.0, 3)])
def test_the_training_box_is_held_in_the_frame_the_policy_observes_in(driver, exported_bundle, degrees, fault):
    """Training ended its episodes beyond max_position_error on an axis of its frame; the app's frame is turned by the
    take-over heading, and so is the box: 0.45 m off on world x and y is 0.64 m along the frame's x at 45 degrees."""
    limit = json.loads((exported_bundle / "policy.json").read_text())["training"]["env_config"]["max_position_error"]
    assert 0.45 < limit < 0.45 * math.sqrt(2)
    half = math.radians(degrees) / 2
    facing = np.array([math.cos(half), 0.0, 0.0, math.sin(half)])
    target = [0.0, 0.0, 1.0]
    rows = np.array(run_driver(driver, driver_lines(
        [tick(0, hover_values(target, target, quat=facing)),
         tick(10, hover_values([0.45, 0.45, 1.0], target, quat=facing))])))
    assert rows[0, 1] == 1 and rows[1, 2] == fault, rows
