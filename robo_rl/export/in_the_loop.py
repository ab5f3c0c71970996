"""Firmware in the loop: the MuJoCo quadrotor flown by each deployment target of a bundle, side by side.

The simulated plant is one named vehicle with its nominal physics (`plant_config`): by default the bundle's
deployment vehicle (policy.json `deployment`; the training vehicle for older bundles), with `latency_steps`
control steps of action latency, a constant wind force drawn uniformly in +-`wind` N per axis (none by
default), the training's observation noise, and that vehicle's flight-firmware thrust limits
(`Vehicle.firmware_thrust_max/min`: commands clamped at THRUST_MAX, motors off below THRUST_MIN, as the
Crazyflie app flies them). `fly(bundle, act, seed, steps)` flies it from a seeded start with any
`act(obs) -> action`, observing in the frame of the start's heading as the Crazyflie app and the ROS 2 node do
(`sim.quadrotor.observation.in_heading_frame`); `compare_targets` flies the same start with PyTorch, ONNX Runtime,
the host-compiled
C and the C running on the emulated STM32F405 (over its serial port) and reports how far each trajectory
strays from PyTorch's.

    python -m robo_rl.export.in_the_loop bundle=<run>/export [vehicle=<name>] [latency_steps=2] [wind=0.01]
        [steps=500] [seed=0] [checkpoint=<the bundle's training checkpoint, where its run has moved>]
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

import sim  # noqa: F401  (registers the env ids)
from robo_rl.cli import command, key_values
from robo_rl.export.bundle import check_vehicle_name, onnx_actions, read_manifest, torch_actor
from robo_rl.export.c_runtime import CompiledPolicy
from robo_rl.export.errors import ExportError
from sim.errors import ConfigError
from sim.quadrotor.config import make_config
from sim.quadrotor.observation import heading, in_heading_frame
from sim.quadrotor.rotations import quat_to_matrix

Act = Callable[[np.ndarray], np.ndarray]
MAX_LATENCY_STEPS = 10  # [control steps]; the training distribution reaches 3
MAX_WIND = 1.0  # [N] per axis; a Crazyflie weighs about 0.3 N


def plant_config(manifest: dict[str, Any], vehicle: str | None = None, latency_steps: int = 0,
                 wind: float = 0.0) -> dict[str, Any]:
    """The env config of the plant a bundle is flown on: its training config with the named vehicle's nominal
    physics (default the bundle's deployment vehicle, with the identified `vehicle_overrides` it was exported
    with), `latency_steps` steps of latency, wind up to `wind` N per axis, and that vehicle's firmware
    thrust limits. ExportError for a bad vehicle, latency or wind."""
    from sim.quadrotor.model import VEHICLES

    if manifest.get("robot") == "arm":  # it failed on the bundle's missing vehicle, or on an unknown option
        raise ExportError(f"the bundle is an arm's policy ({manifest['env_id']}); this flies quadrotors: "
                          "python -m robo_rl.export.arm_in_the_loop bundle=<bundle> flies arms")
    check_vehicle_name(vehicle, "the bundle's deployment vehicle")
    if isinstance(latency_steps, bool) or not isinstance(latency_steps, int) \
            or not 0 <= latency_steps <= MAX_LATENCY_STEPS:
        raise ExportError(f"latency_steps={latency_steps} must be a whole number of control steps in "
                          f"[0, {MAX_LATENCY_STEPS}]")
    if not 0.0 <= wind <= MAX_WIND:
        raise ExportError(f"wind={wind} must be a force in [0, {MAX_WIND:g}] N per axis")
    config = json.loads(json.dumps(manifest["training"]["env_config"]))  # a deep copy
    deployment = manifest.get("deployment") or {}
    exported = deployment.get("vehicle", config.get("vehicle"))
    name = vehicle or exported
    if name not in VEHICLES:
        raise ExportError(f"the bundle's vehicle {name!r} is not a known vehicle; give vehicle=<one of "
                          f"{', '.join(sorted(VEHICLES))}>")
    if name == exported:  # the vehicle the bundle was exported for, as exported (identified overrides included)
        overrides = deployment.get("vehicle_overrides", config.get("vehicle_overrides") or {})
    else:
        overrides = {}
    try:  # an edited policy.json: {"foo": 1} was Vehicle.__init__'s TypeError, reported as a bug
        if not isinstance(overrides, dict):
            raise TypeError(f"a mapping of Vehicle fields, got {overrides!r}")
        spec = dataclasses.replace(VEHICLES[name], **overrides)
    except TypeError as error:
        raise ExportError(f"the bundle's policy.json deployment.vehicle_overrides are not the vehicle's fields "
                          f"({error}); export the run again") from None
    config.update(vehicle=name, vehicle_overrides=overrides,
                  firmware_thrust_max=spec.firmware_thrust_max or 0.0,
                  firmware_thrust_min=spec.firmware_thrust_min or 0.0)
    config["randomization"] = {**config.get("randomization", {}), "enabled": True, "vehicle_parameters": False,
                               "latency_steps": [latency_steps, latency_steps], "disturbance_force": float(wind),
                               "disturbance_torque": 0.0}
    task = str(config.get("task", "hover"))
    calm = {**config, "randomization": {**config["randomization"], "disturbance_force": 0.0}}
    try:  # an edited policy.json (control_hz 0, say) was a ZeroDivisionError or the simulator's traceback
        make_config(task, calm)
    except (ConfigError, TypeError, ValueError) as error:
        raise ExportError(f"the bundle's policy.json training.env_config does not make a quadrotor env ({error}); "
                          "export the run again") from error
    try:
        make_config(task, config)
    except ConfigError as error:  # the plant holds without wind: this wind is beyond what the vehicle can hold
        raise ExportError(f"wind={wind:g}: {error}") from None
    return config


def bundle_env(bundle: str | Path, vehicle: str | None = None, latency_steps: int = 0, wind: float = 0.0) -> gym.Env:
    """A single MuJoCo env of the plant `plant_config` describes for the bundle; ExportError where the bundle's
    env id is not registered or its env's observation is not the size its policy reads."""
    manifest = read_manifest(bundle)
    config = plant_config(manifest, vehicle, latency_steps, wind)
    try:
        env = gym.make(manifest["env_id"], config=config)
    except gym.error.Error as error:
        raise ExportError(f"the bundle's policy.json env_id {manifest['env_id']!r} is not an env of this robo-rl "
                          f"({error}); export the run again") from error
    size = int(np.prod(env.observation_space.shape))
    if size != manifest["observation"]["size"]:
        env.close()
        raise ExportError(f"the bundle's policy.json training.env_config makes {size} observations, its policy reads "
                          f"{manifest['observation']['size']}; export the run again")
    actions = int(np.prod(env.action_space.shape))
    if actions != manifest["action"]["size"]:  # an edited action.size flew, and the targets that read it would not
        env.close()
        raise ExportError(f"the bundle's policy.json action.size is {manifest['action']['size']}, its env takes "
                          f"{actions} actions; export the run again")
    return env


def fly(bundle: str | Path, act: Act, seed: int, steps: int, vehicle: str | None = None, latency_steps: int = 0,
        wind: float = 0.0) -> dict[str, Any]:
    """One closed-loop flight of the plant (`plant_config`): positions (T+1, 3), actions (T, 4), return,
    whether it terminated, whether the env counted it a success on its last step, and the final distance to the
    task's reference (the target; the figure-eight's point at that time)."""
    env = bundle_env(bundle, vehicle, latency_steps, wind)
    obs, _ = env.reset(seed=seed)
    positions = [np.asarray(env.unwrapped.batch.physics.state()[0])[:, 0].copy()]
    # the deployment targets observe in the frame of the heading they took over at: here, the start's
    quaternion = np.asarray(env.unwrapped.batch.physics.state()[1], dtype=np.float64)[:, 0]
    start_heading = float(heading(quat_to_matrix(np, quaternion).reshape(9)))
    lengths = env.unwrapped.config.action_history, env.unwrapped.config.state_history
    actions, total, terminated, success = [], 0.0, False, False
    for _ in range(steps):
        action = np.asarray(act(in_heading_frame(obs, start_heading, *lengths)), dtype=np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        success = bool(info["is_success"])
        actions.append(action)
        positions.append(np.asarray(env.unwrapped.batch.physics.state()[0])[:, 0].copy())
        total += float(reward)
        if terminated or truncated:
            break
    error = np.asarray(env.unwrapped.batch.tracking_errors()[0])[:, 0]
    env.close()
    return {"positions": np.array(positions), "actions": np.array(actions), "return": total,
            "terminated": bool(terminated), "success": success, "final_distance_m": float(np.linalg.norm(error))}


def compare_targets(bundle: str | Path, seed: int = 0, steps: int = 500, cortex_m4: bool = True,
                    checkpoint: str | Path | None = None, vehicle: str | None = None, latency_steps: int = 0,
                    wind: float = 0.0) -> dict[str, dict[str, Any]]:
    """Fly the same start of the same plant (`plant_config`) with every target; per target: max position
    deviation from PyTorch [m], final distance to the target, return, termination, success. PyTorch runs
    the checkpoint the bundle names."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    plant_config(manifest, vehicle, latency_steps, wind)  # refuse a bad plant before compiling anything
    obs_size, action_size = manifest["observation"]["size"], manifest["action"]["size"]
    targets: dict[str, Act] = {
        "pytorch": torch_actor(manifest, checkpoint),
        "onnxruntime": lambda o: onnx_actions(bundle / "policy.onnx", o[None])[0],
    }
    prefix = Path(manifest["files"]["c_source"]).stem  # the export's c_prefix
    with tempfile.TemporaryDirectory() as build:
        host = CompiledPolicy(bundle / "c", prefix, build_dir=Path(build) / "host")
        targets["c_host"] = lambda o: host.step(o)[0]
        board = None
        if cortex_m4:
            from robo_rl.export.cortex_m4 import EmulatedPolicy

            board = EmulatedPolicy(bundle / "c", Path(build) / "m4", obs_size, action_size, prefix=prefix)
            targets["c_stm32f405_qemu"] = lambda o: board.step(o)[0]
        try:
            flights = {name: fly(bundle, act, seed, steps, vehicle, latency_steps, wind)
                       for name, act in targets.items()}
        finally:
            if board is not None:
                board.close()
    reference = flights["pytorch"]["positions"]
    report = {}
    for name, flight in flights.items():
        n = min(len(reference), len(flight["positions"]))
        report[name] = {
            "steps": len(flight["actions"]),
            "max_deviation_from_pytorch_m": float(np.abs(flight["positions"][:n] - reference[:n]).max()),
            "final_distance_to_target_m": flight["final_distance_m"],  # it was to the env's centre (reach: 0.1 m
            # printed where the vehicle was 0.47 m from its target)
            "return": flight["return"],
            "terminated": flight["terminated"],
            "success": flight["success"],
        }
    return report


@command
def main(argv: list[str]) -> None:
    """CLI: key=value arguments bundle=, vehicle=, latency_steps=, wind=, seed=, steps=, cortex_m4=, checkpoint=."""
    args = key_values(argv, {"bundle": str, "vehicle": str, "latency_steps": (int, 0, MAX_LATENCY_STEPS), "wind": float, "seed": int,
                             "steps": (int, 1), "cortex_m4": bool, "checkpoint": str},
                      "usage: python -m robo_rl.export.in_the_loop bundle=<bundle dir> [vehicle=<name>] "
                      "[latency_steps=0] [wind=0] [seed=0] [steps=500] [cortex_m4=true] [checkpoint=<the bundle's "
                      "training checkpoint, if moved>]")
    torch.set_num_threads(1)
    manifest = read_manifest(args["bundle"])
    plant = plant_config(manifest, args.get("vehicle"), args.get("latency_steps", 0), args.get("wind", 0.0))
    print(f"plant: {plant['vehicle']} (nominal physics), latency {plant['randomization']['latency_steps'][0]} steps "
          f"({plant['randomization']['latency_steps'][0] * 1000.0 / plant['control_hz']:g} ms), wind up to "
          f"{plant['randomization']['disturbance_force']:g} N per axis, firmware THRUST_MAX "
          f"{plant['firmware_thrust_max']:g} N, THRUST_MIN {plant['firmware_thrust_min']:g} N")
    report = compare_targets(args["bundle"], args.get("seed", 0), args.get("steps", 500), args.get("cortex_m4", True),
                             checkpoint=args.get("checkpoint"), vehicle=args.get("vehicle"), latency_steps=args.get("latency_steps", 0),
                             wind=args.get("wind", 0.0))
    print(f"{'target':18s} {'steps':>5s} {'max dev from torch [m]':>23s} {'final dist [m]':>15s} {'return':>8s} "
          f"{'success':>8s}")
    for name, row in report.items():
        print(f"{name:18s} {row['steps']:5d} {row['max_deviation_from_pytorch_m']:23.2e} "
              f"{row['final_distance_to_target_m']:15.4f} {row['return']:8.1f} {str(row['success']):>8s}")
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
