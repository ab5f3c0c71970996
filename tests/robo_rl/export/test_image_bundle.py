"""Export of a policy on camera images: ONNX with a "state" input and one uint8 image input per camera, named
and shaped in policy.json, its recorded pairs' images beside it; one clear error wherever C is asked of it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from robo_rl.checkpoint import agent_from_checkpoint, load_checkpoint, policy_file
from robo_rl.export.bundle import RECORDED_IMAGES, export_bundle, onnx_actions, read_manifest
from robo_rl.export.errors import ExportError


@pytest.fixture(scope="module")
def pixel_bundle(pixel_run, tmp_path_factory):
    return export_bundle(pixel_run, out=tmp_path_factory.mktemp("pixel_bundle") / "bundle", pairs=8)


def test_an_image_policy_exports_to_onnx_with_its_cameras_named_and_shaped(pixel_bundle, pixel_run):
    manifest = json.loads((pixel_bundle / "policy.json").read_text())
    observation = manifest["observation"]
    assert observation["size"] == 7 and [f["name"] for f in observation["layout"]] == [
        "tool_position", "tool_velocity", "gripper_opening"]
    images = {image["name"]: image for image in observation["images"]}
    assert sorted(images) == ["front", "wrist"]
    for name, image in images.items():
        assert (image["onnx_input"], image["height"], image["width"], image["channels"], image["dtype"],
                image["encoding"]) == (name, 24, 24, 3, "uint8", "rgb8")
    assert images["wrist"]["mount"]["body"] == "gripper" and images["front"]["mount"]["fovy_deg"] > 0
    assert manifest["files"]["onnx_inputs"] == ["state", "front", "wrist"]
    assert manifest["files"]["c_source"] is None and not (pixel_bundle / "c").exists()
    assert manifest["network"]["encoder"]["cameras"] == ["front", "wrist"]
    assert not manifest["verification"]["c_host"]["checked"]

    graph = onnx.load(str(pixel_bundle / "policy.onnx")).graph
    shapes = {i.name: (i.type.tensor_type.elem_type, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim])
              for i in graph.input}
    assert shapes == {"state": (onnx.TensorProto.FLOAT, ["batch", 7]),
                      "front": (onnx.TensorProto.UINT8, ["batch", 24, 24, 3]),
                      "wrist": (onnx.TensorProto.UINT8, ["batch", 24, 24, 3])}

    # the recorded pairs: ONNX Runtime and the checkpoint's own agent give their actions
    with np.load(pixel_bundle / RECORDED_IMAGES) as archive:
        recorded = {"state": np.array([p["observation"] for p in manifest["recorded_pairs"]], np.float32),
                    **{name: archive[name] for name in images}}
    actions = np.array([p["action"] for p in manifest["recorded_pairs"]], np.float32)
    assert recorded["front"].shape == (8, 24, 24, 3) and recorded["front"].dtype == np.uint8
    assert recorded["front"].std() > 0  # real frames, not blanks
    np.testing.assert_allclose(onnx_actions(pixel_bundle / "policy.onnx", recorded), actions, atol=1e-5, rtol=0)
    agent = agent_from_checkpoint(load_checkpoint(policy_file(pixel_run, "best")))
    with torch.no_grad():
        torch_actions = agent.act({k: torch.as_tensor(v) for k, v in recorded.items()}, deterministic=True).numpy()
    np.testing.assert_allclose(torch_actions, actions, atol=1e-5, rtol=0)
    # a changed image changes the action: the cameras are read
    changed = {**recorded, "front": 255 - recorded["front"]}
    assert np.abs(onnx_actions(pixel_bundle / "policy.onnx", changed) - actions).max() > 1e-4


def test_the_c_export_and_the_firmware_tools_refuse_an_image_policy_with_one_line(pixel_run, pixel_bundle, tmp_path):
    with pytest.raises(ExportError, match=r"c=true: .* policy on camera images \(front, wrist\).*state vectors only"):
        export_bundle(pixel_run, out=tmp_path / "with_c", c="true")
    assert not (tmp_path / "with_c").exists()
    with pytest.raises(ExportError, match=r"holds no generated C for the firmware: it is a policy on camera images"):
        read_manifest(pixel_bundle)
    command = subprocess.run([sys.executable, "-m", "robo_rl.export", f"run={pixel_run}", f"out={tmp_path / 'c'}",
                              "c=true"], capture_output=True, text=True)
    assert command.returncode != 0 and "Traceback" not in command.stderr
    assert command.stderr.strip().count("\n") == 0 and "c=true" in command.stderr


def test_c_false_exports_a_state_policy_without_c_and_the_firmware_tools_say_why(trained_run, tmp_path):
    out = export_bundle(trained_run, out=tmp_path / "bundle", c="false")
    manifest = json.loads((out / "policy.json").read_text())
    assert not (out / "c").exists() and manifest["files"]["c_source"] is None
    assert manifest["verification"]["c_host"] == {"checked": False, "reason": "exported with c=false"}
    assert manifest["verification"]["onnxruntime_max_abs_error"] <= 1e-5
    with pytest.raises(ExportError, match="holds no generated C for the firmware: it was exported with c=false"):
        read_manifest(out)
    with pytest.raises(ExportError, match="c='sometimes' is not a choice; allowed: auto, true, false"):
        export_bundle(trained_run, out=tmp_path / "other", c="sometimes")
