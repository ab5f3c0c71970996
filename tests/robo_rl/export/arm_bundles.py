"""Committed SO-ARM100 policies for the arm app's tests (tests/robo_rl/export/data/<name>/): policy.json and
policy.onnx as the export wrote them, and the trained actor's weights (actor.pt, the state dict of its
TanhGaussianActor) in place of the 3 MB training checkpoint. `arm_bundle` rebuilds the bundle's generated C
from those weights, exactly as the export does, and returns the PyTorch policy (the export's
DeterministicPolicy) for the same-seed comparison.

Made by `python tests/robo_rl/export/arm_bundles.py <run dir> <name>` from a trained run's export."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch

DATA = Path(__file__).resolve().with_name("data")


def _actor(manifest: dict, weights: dict) -> "torch.nn.Module":
    from robo_rl.agents.networks import TanhGaussianActor

    layers = manifest["network"]["layers"]
    actor = TanhGaussianActor(layers[0]["in"], layers[-1]["out"], [layer["out"] for layer in layers[:-1]],
                              manifest["network"]["hidden_activation"],
                              torch.tensor(manifest["action"]["low"]), torch.tensor(manifest["action"]["high"]),
                              layer_norm=layers[0]["layer_norm"])
    actor.load_state_dict(weights)
    return actor.eval()


def arm_bundle(name: str, out: Path) -> tuple[Path, Callable[[np.ndarray], np.ndarray]]:
    """The committed bundle `name` in `out/name` with its C generated again, and its PyTorch policy."""
    from robo_rl.export.bundle import C_SELF_TEST_PAIRS, TOLERANCE
    from robo_rl.export.c_generator import generate_c
    from robo_rl.export.policy_spec import DeterministicPolicy, PolicySpec

    source, bundle = DATA / name, out / name
    manifest = json.loads((source / "policy.json").read_text())
    actor = _actor(manifest, torch.load(source / "actor.pt", weights_only=True))
    normalization = manifest["observation"]["normalization"]
    spec = PolicySpec.from_actor(actor, manifest["network"]["hidden_activation"], normalization["mean"],
                                 normalization["std"], manifest["action"]["safe_action"])
    (bundle / "c").mkdir(parents=True)
    for file in ("policy.json", "policy.onnx"):
        shutil.copy(source / file, bundle / file)
    pairs = [(np.asarray(p["observation"], np.float32), np.asarray(p["action"], np.float32))
             for p in manifest["recorded_pairs"]][:C_SELF_TEST_PAIRS]
    for file, text in generate_c(spec, pairs, "policy", TOLERANCE, f"{manifest['env_id']} (tests)").items():
        (bundle / "c" / file).write_text(text)
    policy = DeterministicPolicy(actor, spec)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return policy(torch.as_tensor(obs[None], dtype=torch.float32)).numpy()[0]
    return bundle, act


def save(run: Path, name: str) -> None:
    """Keep `run`'s export (policy.json, policy.onnx) and its actor's weights as test data `name`."""
    from robo_rl.checkpoint import agent_from_checkpoint, load_checkpoint

    manifest = json.loads((run / "export" / "policy.json").read_text())
    agent = agent_from_checkpoint(load_checkpoint(manifest["training"]["checkpoint"]))
    target = DATA / name
    target.mkdir(parents=True, exist_ok=True)
    for file in ("policy.json", "policy.onnx"):
        shutil.copy(run / "export" / file, target / file)
    torch.save(agent.actor.state_dict(), target / "actor.pt")


if __name__ == "__main__":
    save(Path(sys.argv[1]), sys.argv[2])
