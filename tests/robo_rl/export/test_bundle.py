"""Export end to end: a trained run -> policy.onnx, policy.json, C; every target reproduces PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from robo_rl.agents.sac import SAC
from robo_rl.checkpoint import CheckpointError, load_checkpoint, policy_file
from robo_rl.export.bundle import ExportError, export_bundle, onnx_actions
from robo_rl.export.c_runtime import CompiledPolicy


def test_bundle_reproduces_the_pytorch_policy_in_every_target(trained_run, tmp_path):
    out = export_bundle(trained_run, out=tmp_path / "bundle", pairs=12)
    manifest = json.loads((out / "policy.json").read_text())
    assert manifest["format"] == "robo_rl.policy_bundle/1" and manifest["env_id"] == "robo_rl/CrazyflieHover-v0"
    assert manifest["control_hz"] == 100.0
    names = [field["name"] for field in manifest["observation"]["layout"]]
    assert names[:4] == ["position_error", "rotation_matrix", "velocity_error", "angular_velocity"]
    assert sum(f["size"] for f in manifest["observation"]["layout"]) == manifest["observation"]["size"]
    assert len(manifest["action"]["layout"]) == 4 and manifest["action"]["low"] == [0.0] * 4
    assert manifest["training"]["vehicle_parameters"]["mass"] > 0
    assert manifest["training"]["commit"] and manifest["training"]["env_steps"] == 1600
    assert manifest["verification"]["c_host"]["checked"]
    # the same C, cross-compiled for the Crazyflie's STM32F405 and run on QEMU (make test installs the tools)
    m4 = manifest["verification"]["cortex_m4"]
    assert m4["checked"], f"{m4.get('reason')}: run `make test`, which installs the ARM toolchain and QEMU"
    assert m4["report"]["test_vector_failures"] == 0 and m4["report"]["self_test_failures"] == 0
    assert m4["test_vectors"] == 12 + 1000 + 1 and m4["max_abs_error"] <= 1e-5
    assert manifest["verification"]["c_host"]["test_vectors"] == 12 + 1000 + 1
    assert 1000 < m4["instructions_per_inference"] < 200_000
    assert m4["policy_ram_bytes"] == 0 and 0 < m4["policy_stack_bytes"] < 2048
    assert m4["policy_flash_bytes"] > 4 * manifest["network"]["parameters"]  # the weights live in flash
    pairs = manifest["recorded_pairs"]
    assert len(pairs) == 12
    observations = np.array([p["observation"] for p in pairs], np.float32)
    recorded = np.array([p["action"] for p in pairs], np.float32)
    assert len({tuple(o) for o in observations.round(4)}) == 12  # distinct states, not one repeated

    # PyTorch (the checkpoint's actor, mean action) is the reference
    agent = SAC.from_checkpoint(load_checkpoint(policy_file(trained_run)))
    torch_actions = agent.act(torch.as_tensor(observations), deterministic=True).numpy()
    np.testing.assert_allclose(recorded, torch_actions, atol=1e-6, rtol=0)
    random_obs = np.random.default_rng(0).normal(0, 1, (1000, observations.shape[1])).astype(np.float32)
    expected = agent.act(torch.as_tensor(random_obs), deterministic=True).numpy()

    model = onnx.load(str(out / "policy.onnx"))
    assert model.ir_version == 8
    np.testing.assert_allclose(onnx_actions(out / "policy.onnx", observations), recorded, atol=1e-5, rtol=0)
    np.testing.assert_allclose(onnx_actions(out / "policy.onnx", random_obs), expected, atol=1e-5, rtol=0)

    for fma in (False, True):
        compiled = CompiledPolicy(out / "c", fma_kernel=fma, build_dir=tmp_path / f"build{int(fma)}")
        assert compiled.self_test()[0] == 0
        np.testing.assert_allclose(compiled.batch(observations)[0], recorded, atol=1e-5, rtol=0)
        np.testing.assert_allclose(compiled.batch(random_obs)[0], expected, atol=1e-5, rtol=0)


def test_export_command_writes_the_bundle_and_rejects_bad_requests(trained_run, tmp_path):
    result = subprocess.run([sys.executable, "-m", "robo_rl.export", f"run={trained_run}", f"out={tmp_path / 'b'}",
                             "checkpoint=last", "safe_action=[0.1,0.1,0.1,0.1]"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "verification" in result.stdout
    manifest = json.loads((tmp_path / "b" / "policy.json").read_text())
    assert manifest["action"]["safe_action"] == pytest.approx([0.1] * 4)
    assert manifest["training"]["checkpoint"].endswith("checkpoint_000000001600.pt")

    with pytest.raises(ExportError, match="at least 8"):
        export_bundle(trained_run, out=tmp_path / "c", pairs=4)
    with pytest.raises(ExportError, match="safe_action"):
        export_bundle(trained_run, out=tmp_path / "c", safe_action="zero")
    with pytest.raises(ValueError, match="outside the action range"):
        export_bundle(trained_run, out=tmp_path / "c", safe_action=[2.0, 0, 0, 0])
    assert not (tmp_path / "c").exists()  # nothing half-written


def test_missing_corrupt_or_unsupported_runs_give_one_clear_error_and_no_bundle(trained_run, tmp_path):
    with pytest.raises(CheckpointError, match="no policy"):
        export_bundle(tmp_path / "nothing", out=tmp_path / "out")
    corrupt = tmp_path / "corrupt"
    (corrupt / "checkpoints").mkdir(parents=True)
    (corrupt / "checkpoints" / "checkpoint_000000001600.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="unreadable"):
        export_bundle(corrupt, checkpoint="last", out=tmp_path / "out")
    state = torch.load(trained_run / "best_policy.pt", weights_only=False)
    state["agent_config"]["activation"] = "gelu"  # a network the generator has no C for
    torch.save(state, tmp_path / "gelu.pt")
    with pytest.raises(ValueError, match="gelu"):
        export_bundle(trained_run, checkpoint=str(tmp_path / "gelu.pt"), out=tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out-*"))
