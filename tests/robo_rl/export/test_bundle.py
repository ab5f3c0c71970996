"""Export end to end: a trained run -> policy.onnx, policy.json, C; every target reproduces PyTorch."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from robo_rl.agents.sac import SAC
from robo_rl.checkpoint import CheckpointError, load_checkpoint, policy_file, seal
from robo_rl.export import bundle as bundle_module
from robo_rl.export.bundle import BUNDLE_MARKER, check_out_folder, export_bundle, onnx_actions
from robo_rl.export.errors import ExportError
from robo_rl.export.c_runtime import CompiledPolicy


def test_bundle_reproduces_the_pytorch_policy_in_every_target(trained_run, tmp_path):
    out = export_bundle(trained_run, out=tmp_path / "bundle", pairs=12)
    manifest = json.loads((out / "policy.json").read_text())
    assert manifest["format"] == "robo_rl.policy_bundle/1" and manifest["env_id"] == "robo_rl/CrazyflieHover-v0"
    assert (manifest["robot"], manifest["task"]) == ("quadrotor", "hover")
    assert manifest["control_hz"] == 100.0
    names = [field["name"] for field in manifest["observation"]["layout"]]
    assert names[:4] == ["position_error", "rotation_matrix", "velocity_error", "angular_velocity"]
    assert sum(f["size"] for f in manifest["observation"]["layout"]) == manifest["observation"]["size"]
    assert len(manifest["action"]["layout"]) == 4 and manifest["action"]["low"] == [0.0] * 4
    assert manifest["training"]["vehicle_parameters"]["mass"] > 0
    # deployed, by default, on the vehicle it trained on, with its firmware's per-motor limits
    deployment = manifest["deployment"]
    assert deployment["vehicle"] == manifest["training"]["env_config"]["vehicle"] == "crazyflie_rltools"
    assert deployment["thrust_max_newton"] == manifest["training"]["vehicle_parameters"]["thrust_max"]
    assert deployment["hover_command"] == manifest["training"]["vehicle_parameters"]["hover_command"]
    assert (deployment["firmware_thrust_max"], deployment["firmware_thrust_min"]) == (0.12, 0.012817578393224994)
    assert manifest["training"]["commit"] and manifest["training"]["env_steps"] == 1600
    assert manifest["verification"]["c_host"]["checked"]
    # the same C, cross-compiled for the Crazyflie's STM32F405 and run on QEMU (make test installs the tools)
    m4 = manifest["verification"]["cortex_m4"]
    assert m4["checked"], f"{m4.get('reason')}: run `make test`, which installs the ARM toolchain and QEMU"
    assert m4["report"]["test_vector_failures"] == 0 and m4["report"]["self_test_failures"] == 0
    assert m4["test_vectors"] == 12 + 1000 + 1 and m4["max_abs_error"] <= 1e-5
    assert manifest["verification"]["c_host"]["test_vectors"] == 12 + 1000 + 1
    assert 1000 < m4["instructions_per_inference"] < 200_000
    assert m4["policy_ram_bytes"] == 1 and 0 < m4["policy_stack_bytes"] < 2048  # 1: the constants' checksum verdict
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


def test_a_run_on_the_torch_backend_exports(trained_run, tmp_path):
    """make train's policy trains on the torch backend, whose observations are tensors: its pairs are recorded
    and reproduced like a numpy env's (the export failed there with "'Tensor' object has no attribute 'copy'")."""
    state = torch.load(trained_run / "best_policy.pt", weights_only=False)
    state["config"]["env"]["backend"] = "torch"
    torch.save(seal(state), tmp_path / "torch_backend.pt")
    out = export_bundle(trained_run, checkpoint=str(tmp_path / "torch_backend.pt"), out=tmp_path / "bundle",
                        pairs=8, c="false")
    manifest = json.loads((out / "policy.json").read_text())
    observations = np.array([p["observation"] for p in manifest["recorded_pairs"]], np.float32)
    assert len({tuple(o) for o in observations.round(4)}) == 8
    agent = SAC.from_checkpoint(state)
    np.testing.assert_allclose(np.array([p["action"] for p in manifest["recorded_pairs"]], np.float32),
                               agent.act(torch.as_tensor(observations), deterministic=True).numpy(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(onnx_actions(out / "policy.onnx", observations),
                               agent.act(torch.as_tensor(observations), deterministic=True).numpy(), atol=1e-5, rtol=0)


def test_export_command_writes_the_bundle_and_rejects_bad_requests(trained_run, tmp_path):
    before = sorted(trained_run.rglob("*"))
    result = subprocess.run([sys.executable, "-m", "robo_rl.export", f"run={trained_run}", f"out={tmp_path / 'b'}",
                             "checkpoint=last", "safe_action=[0.1,0.1,0.1,0.1]"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "verification" in result.stdout and "safe_action" not in result.stderr  # below hover: no warning
    assert sorted(trained_run.rglob("*")) == before  # each export left export_logs/<time>/ with an empty log
    manifest = json.loads((tmp_path / "b" / "policy.json").read_text())
    assert manifest["action"]["safe_action"] == pytest.approx([0.1] * 4)
    # full thrust on every invalid observation was exported without a word
    with pytest.warns(UserWarning, match=r"safe_action=\[1.0, 1.0, 1.0, 1.0\] lies above the vehicle's hover command"):
        export_bundle(trained_run, out=tmp_path / "full", safe_action=[1.0] * 4, pairs=8, c="false")
    assert manifest["training"]["checkpoint"].endswith("checkpoint_000000001600.pt")

    with pytest.raises(ExportError, match="at least 8"):
        export_bundle(trained_run, out=tmp_path / "c", pairs=4)
    with pytest.raises(ExportError, match="safe_action"):
        export_bundle(trained_run, out=tmp_path / "c", safe_action="zero")
    with pytest.raises(ValueError, match="outside the action range"):
        export_bundle(trained_run, out=tmp_path / "c", safe_action=[2.0, 0, 0, 0])
    with pytest.raises(ValueError, match="safe_action has 2 values, the policy 4 actions"):  # was numpy's broadcast error
        export_bundle(trained_run, out=tmp_path / "c", safe_action=[0.5, 0.5])
    assert not (tmp_path / "c").exists()  # nothing half-written


@pytest.mark.parametrize("end", ["low", "high"])
def test_each_end_of_the_declared_onnx_ranges_exports_and_runs(trained_run, tmp_path, end):
    """Every opset and IR version the options allow gives a bundle ONNX Runtime runs (opset 7, IR 3 and opset
    24 were tracebacks inside the ranges once declared)."""
    from robo_rl.options import OPTIONS

    opset, ir_version = (getattr(OPTIONS["export"][name][1], end) for name in ("onnx.opset", "onnx.ir_version"))
    out = export_bundle(trained_run, out=tmp_path / "b", pairs=8, c="false", opset=int(opset), ir_version=int(ir_version))
    verification = json.loads((out / "policy.json").read_text())["verification"]
    assert verification["onnxruntime_max_abs_error"] <= verification["tolerance"]


def test_an_unknown_vehicle_is_refused_with_one_line_before_anything_is_written(trained_run, tmp_path):
    before = sorted(trained_run.rglob("*"))
    result = subprocess.run([sys.executable, "-m", "robo_rl.export", f"run={trained_run}", f"out={tmp_path / 'b'}",
                             "vehicle=crazyflie_9000"], capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "vehicle=crazyflie_9000 is not a known vehicle" in lines[0] and "crazyflie_brushless" in lines[0]
    assert not (tmp_path / "b").exists() and sorted(trained_run.rglob("*")) == before  # no bundle, no export_logs
    with pytest.raises(ExportError, match="vehicle=crazyflie_9000 is not a known vehicle"):
        export_bundle(trained_run, out=tmp_path / "c", vehicle="crazyflie_9000")
    assert list(tmp_path.iterdir()) == []


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
    torch.save(seal(state), tmp_path / "gelu.pt")
    with pytest.raises(CheckpointError, match="gelu"):
        export_bundle(trained_run, checkpoint=str(tmp_path / "gelu.pt"), out=tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out-*"))


def _digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_export_never_deletes_what_it_did_not_create(trained_run, tmp_path):
    runs = tmp_path / "runs"
    run, sibling = runs / "run", runs / "sibling"
    shutil.copytree(trained_run, run)
    shutil.copytree(trained_run, sibling)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("a user's file")
    (tmp_path / "file").write_text("not a folder")
    before = _digest(tmp_path)
    # once, out=<run> wiped the run and out=<parent> every sibling run; a folder of the user's is the same case
    for out in (run, runs, notes):
        with pytest.raises(ExportError, match=f"out={out} is a folder that export did not write"):
            export_bundle(run, out=out, pairs=8)
    with pytest.raises(ExportError, match="is a file"):
        export_bundle(run, out=tmp_path / "file", pairs=8)
    with pytest.raises(ExportError, match="mount point"):
        check_out_folder(Path("/"))  # (what export_bundle checks first; not run against a real disk here)
    assert _digest(tmp_path) == before and not list(tmp_path.rglob(".*-*"))

    # a new folder, then the same folder again: an earlier bundle is replaced, all of it and only it
    out = export_bundle(run, out=tmp_path / "new" / "bundle", pairs=8)
    marker = json.loads((out / BUNDLE_MARKER).read_text())
    assert sorted(marker["files"]) == sorted(str(p.relative_to(out)) for p in out.rglob("*")
                                             if p.is_file() and p.name != BUNDLE_MARKER)
    (out / "c" / "policy_old_prefix.c").write_text("from an earlier export")  # listed nowhere: a user's file now
    with pytest.raises(ExportError, match=r"policy_old_prefix\.c"):
        export_bundle(run, out=out, pairs=8)
    (out / "c" / "policy_old_prefix.c").unlink()
    first = json.loads((out / "policy.json").read_text())["recorded_pairs"]
    export_bundle(run, out=out, pairs=8, seed=1)
    assert json.loads((out / "policy.json").read_text())["recorded_pairs"] != first
    assert sorted(p.name for p in out.parent.iterdir()) == ["bundle"]  # no staging or replaced folder left
    # a bundle from before the marker is recognised by its policy.json and generated files; an empty folder is free
    (out / BUNDLE_MARKER).unlink()
    check_out_folder(out)
    (out / "model.pt").write_text("x")
    with pytest.raises(ExportError, match="model.pt"):
        check_out_folder(out)
    (tmp_path / "empty").mkdir()
    check_out_folder(tmp_path / "empty")


def test_out_that_is_or_holds_the_current_folder_is_refused_and_a_relative_out_is_written(trained_run, tmp_path,
                                                                                         monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    # once out=. in an empty folder named export's own staging folder (made inside it) as a file it would delete
    for out, where in ((".", "the current folder"), ("..", "a folder that holds the current one"),
                       ("sub/..", "the current folder")):
        (tmp_path / "here" / "sub").mkdir(exist_ok=True)
        with pytest.raises(ExportError, match=f"out={re.escape(out)} is {where}; give a folder for the bundle inside it"):
            export_bundle(trained_run, out=out, pairs=8)
    out = export_bundle(trained_run, out="sub/../bundle", pairs=8)
    assert out == tmp_path / "here" / "bundle" and (out / "policy.json").is_file()
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["bundle", "sub"]


@pytest.mark.parametrize("prefix", ["../../x", "a/b", "1policy", "int", "", "policy name", "p" * 17])
def test_a_c_prefix_that_is_not_a_c_identifier_is_refused_before_anything_is_written(trained_run, tmp_path, prefix):
    with pytest.raises(ExportError, match="c_prefix=.*C identifier"):
        export_bundle(trained_run, out=tmp_path / "bundle" / "deep", prefix=prefix)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ExportError, match="c_prefix='main' names a file of the STM32F405 check's harness"):
        export_bundle(trained_run, out=tmp_path / "bundle" / "deep", prefix="main")
    assert list(tmp_path.iterdir()) == []


def test_a_state_history_bundle_passes_every_check_and_its_layout_header_names_the_history(state_history_bundle,
                                                                                          exported_bundle):
    manifest = json.loads((state_history_bundle / "policy.json").read_text())
    layout = {f["name"]: f for f in manifest["observation"]["layout"]}
    assert list(layout)[-2:] == ["action_history", "state_history"]
    assert (layout["state_history"]["offset"], layout["state_history"]["size"]) == (18 + 32, 6 * 4)
    assert manifest["observation"]["size"] == 74 == manifest["network"]["layers"][0]["in"]
    assert manifest["training"]["env_config"]["state_history"] == 4
    verification = manifest["verification"]
    assert verification["onnxruntime_max_abs_error"] <= 1e-5 and verification["c_host"]["checked"]
    m4 = verification["cortex_m4"]
    assert m4["checked"] and m4["report"]["test_vector_failures"] == 0 and m4["report"]["self_test_failures"] == 0
    header = (state_history_bundle / "c" / "policy_layout.h").read_text()
    for line in ("POLICY_STATE_HISTORY 4", "POLICY_ACTION_HISTORY 8", "POLICY_OBS_STATE_HISTORY_OFFSET 50",
                 "POLICY_OBS_STATE_HISTORY_SIZE 24", "POLICY_OBS_LAYOUT_SIZE 74"):
        assert f"#define {line}\n" in header or f"#define {line}  " in header, line
    # a bundle without one says so, and its layout is as before
    header = (exported_bundle / "c" / "policy_layout.h").read_text()
    assert "#define POLICY_STATE_HISTORY 0\n" in header and "STATE_HISTORY_OFFSET" not in header
    assert "#define POLICY_OBS_LAYOUT_SIZE 50\n" in header


def _whole_bundle(out: Path) -> list[str]:
    """The files of the bundle at `out`, after checking that every one its marker lists is there."""
    listed = json.loads((out / BUNDLE_MARKER).read_text())["files"]
    assert all((out / name).is_file() for name in listed)
    return listed


def test_a_stop_while_an_earlier_bundle_is_replaced_leaves_a_whole_bundle_at_out(trained_run, tmp_path,
                                                                                  monkeypatch):
    """Ctrl-C after export had moved the earlier bundle aside and before it renamed the new one to `out` left
    no bundle at `out` (the earlier one hidden beside it, the new one deleted)."""
    out = export_bundle(trained_run, out=tmp_path / "bundle", pairs=8, c="false")
    rename = os.rename

    def rename_then_stop(source, target):
        rename(source, target)
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle_module.os, "rename", rename_then_stop)
    with pytest.raises(KeyboardInterrupt):
        monkeypatch.setattr(bundle_module.shutil, "rmtree", lambda *args, **kwargs: (_ for _ in ()).throw(
            KeyboardInterrupt()))  # and a stop as soon as the new bundle is in place
        export_bundle(trained_run, out=out, pairs=8, seed=1, c="false")
    monkeypatch.undo()
    assert json.loads((out / "policy.json").read_text())["recorded_pairs"]
    _whole_bundle(out)


def test_an_earlier_bundle_is_replaced_where_two_folders_cannot_swap(trained_run, tmp_path, monkeypatch):
    """Where renameat2 cannot exchange (not Linux, or a file system without it), two renames replace the bundle
    and leave nothing beside it."""
    monkeypatch.setattr(bundle_module, "_exchange", lambda first, second: False)
    out = export_bundle(trained_run, out=tmp_path / "bundle", pairs=8, c="false")
    first = json.loads((out / "policy.json").read_text())["recorded_pairs"]
    export_bundle(trained_run, out=out, pairs=8, seed=1, c="false")
    assert json.loads((out / "policy.json").read_text())["recorded_pairs"] != first
    _whole_bundle(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


def test_an_out_where_nothing_can_be_written_names_out(trained_run, tmp_path):
    """out=/proc/foo failed naming the hidden staging folder (/proc/.foo-<random>), as if the user had given it."""
    with pytest.raises(ExportError, match=r"out=/proc/foo: no bundle can be written in /proc \(.*\); give a folder"):
        export_bundle(trained_run, out="/proc/foo", pairs=8, c="false")
    with pytest.raises(ExportError, match="out=/proc/new/foo: no bundle can be written in /proc/new"):
        export_bundle(trained_run, out="/proc/new/foo", pairs=8, c="false")
