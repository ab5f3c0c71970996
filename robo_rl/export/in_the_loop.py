"""Firmware in the loop: the MuJoCo quadrotor flown by each deployment target of a bundle, side by side.

`fly(bundle, act, seed, steps)` flies the bundle's env (its training config, randomization included) from a
seeded start with any `act(obs) -> action`; `compare_targets` flies the same start with PyTorch, ONNX
Runtime, the host-compiled C and the C running on the emulated STM32F405 (over its serial port) and
reports how far each trajectory strays from PyTorch's.

    python -m robo_rl.export.in_the_loop bundle=<run>/export [steps=500] [seed=0]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

import sim  # noqa: F401  (registers the env ids)
from robo_rl.checkpoint import agent_from_checkpoint, load_checkpoint
from robo_rl.cli import command, key_values
from robo_rl.export.bundle import onnx_actions, read_manifest
from robo_rl.export.c_runtime import CompiledPolicy

Act = Callable[[np.ndarray], np.ndarray]


def bundle_env(bundle: str | Path) -> gym.Env:
    """A single MuJoCo env with the config the bundle's policy was trained on."""
    manifest = read_manifest(bundle)
    return gym.make(manifest["env_id"], config=manifest["training"]["env_config"])


def fly(bundle: str | Path, act: Act, seed: int, steps: int) -> dict[str, Any]:
    """One closed-loop flight: positions (T+1, 3), actions (T, 4), return, whether it terminated and
    whether the env counted it a success on its last step."""
    env = bundle_env(bundle)
    obs, _ = env.reset(seed=seed)
    positions = [np.asarray(env.unwrapped.batch.physics.state()[0])[:, 0].copy()]
    actions, total, terminated, success = [], 0.0, False, False
    for _ in range(steps):
        action = np.asarray(act(obs), dtype=np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        success = bool(info["is_success"])
        actions.append(action)
        positions.append(np.asarray(env.unwrapped.batch.physics.state()[0])[:, 0].copy())
        total += float(reward)
        if terminated or truncated:
            break
    env.close()
    return {"positions": np.array(positions), "actions": np.array(actions), "return": total,
            "terminated": bool(terminated), "success": success}


def compare_targets(bundle: str | Path, seed: int = 0, steps: int = 500, cortex_m4: bool = True,
                    checkpoint: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Fly the same start with every target; per target: max position deviation from PyTorch [m],
    final distance to the target, return, termination. PyTorch runs the checkpoint the bundle names."""
    bundle = Path(bundle)
    manifest = read_manifest(bundle)
    agent = agent_from_checkpoint(load_checkpoint(checkpoint or manifest["training"]["checkpoint"]))
    obs_size, action_size = manifest["observation"]["size"], manifest["action"]["size"]
    targets: dict[str, Act] = {
        "pytorch": lambda o: agent.act(torch.as_tensor(o[None], dtype=torch.float32), deterministic=True).numpy()[0],
        "onnxruntime": lambda o: onnx_actions(bundle / "policy.onnx", o[None])[0],
    }
    with tempfile.TemporaryDirectory() as build:
        host = CompiledPolicy(bundle / "c", build_dir=Path(build) / "host")
        targets["c_host"] = lambda o: host.step(o)[0]
        board = None
        if cortex_m4:
            from robo_rl.export.cortex_m4 import EmulatedPolicy

            board = EmulatedPolicy(bundle / "c", Path(build) / "m4", obs_size, action_size)
            targets["c_stm32f405_qemu"] = lambda o: board.step(o)[0]
        try:
            flights = {name: fly(bundle, act, seed, steps) for name, act in targets.items()}
        finally:
            if board is not None:
                board.close()
    center = np.asarray(manifest["training"]["env_config"]["center"])
    reference = flights["pytorch"]["positions"]
    report = {}
    for name, flight in flights.items():
        n = min(len(reference), len(flight["positions"]))
        report[name] = {
            "steps": len(flight["actions"]),
            "max_deviation_from_pytorch_m": float(np.abs(flight["positions"][:n] - reference[:n]).max()),
            "final_distance_to_target_m": float(np.linalg.norm(flight["positions"][-1] - center)),
            "return": flight["return"],
            "terminated": flight["terminated"],
            "success": flight["success"],
        }
    return report


@command
def main(argv: list[str]) -> None:
    """CLI: key=value arguments bundle=, seed=, steps=, cortex_m4=."""
    args = key_values(argv, {"bundle": str, "seed": int, "steps": (int, 1), "cortex_m4": bool},
                      "usage: python -m robo_rl.export.in_the_loop bundle=<bundle dir> [seed=0] [steps=500] [cortex_m4=true]")
    torch.set_num_threads(1)
    report = compare_targets(args["bundle"], args.get("seed", 0), args.get("steps", 500), args.get("cortex_m4", True))
    print(f"{'target':18s} {'steps':>5s} {'max dev from torch [m]':>23s} {'final dist [m]':>15s} {'return':>8s} "
          f"{'success':>8s}")
    for name, row in report.items():
        print(f"{name:18s} {row['steps']:5d} {row['max_deviation_from_pytorch_m']:23.2e} "
              f"{row['final_distance_to_target_m']:15.4f} {row['return']:8.1f} {str(row['success']):>8s}")
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
