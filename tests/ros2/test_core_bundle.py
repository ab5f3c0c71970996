"""The core's bundle loading and ONNX inference: recorded pairs reproduced, clear errors for bad bundles."""

import json
import shutil

import numpy as np
import pytest

from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.core.inference import OnnxPolicy
from tests.ros2.conftest import HOVER_BUNDLE


def test_inference_reproduces_recorded_pairs(hover_bundle):
    policy = OnnxPolicy(hover_bundle)
    assert len(hover_bundle.recorded_observations) == 16
    for obs, expected in zip(hover_bundle.recorded_observations, hover_bundle.recorded_actions):
        np.testing.assert_allclose(policy(obs), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(policy.batch(hover_bundle.recorded_observations), hover_bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def test_freshly_exported_bundle_loads_and_reproduces_its_pairs(exported_bundle):
    bundle = load_bundle(exported_bundle)
    np.testing.assert_allclose(OnnxPolicy(bundle).batch(bundle.recorded_observations), bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def test_bundle_contents(hover_bundle):
    assert hover_bundle.control_hz == 100.0 and hover_bundle.is_quadrotor
    assert [f.name for f in hover_bundle.layout] == ["position_error", "rotation_matrix", "velocity_error",
                                                     "angular_velocity", "action_history"]
    assert hover_bundle.field("action_history").size == 32


def _copy(tmp_path):
    target = tmp_path / "bundle"
    shutil.copytree(HOVER_BUNDLE, target)
    return target


def _edit(path, change):
    manifest = json.loads((path / "policy.json").read_text())
    change(manifest)
    (path / "policy.json").write_text(json.dumps(manifest))


def test_missing_files(tmp_path):
    with pytest.raises(BundleError, match="no policy.json"):
        load_bundle(tmp_path)
    bundle = _copy(tmp_path)
    (bundle / "policy.onnx").unlink()
    with pytest.raises(BundleError, match="ONNX file .* does not exist"):
        load_bundle(bundle)


def test_corrupt_files(tmp_path):
    bundle = _copy(tmp_path)
    (bundle / "policy.onnx").write_bytes(b"not an onnx model")
    with pytest.raises(BundleError, match="ONNX Runtime cannot load"):
        OnnxPolicy(load_bundle(bundle))
    (bundle / "policy.json").write_text("{ truncated")
    with pytest.raises(BundleError, match="not valid JSON"):
        load_bundle(bundle)


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(format="something/2"), "format must be"),
    (lambda m: m["observation"].update(size=51), "covers 50 entries but observation.size is 51"),
    (lambda m: m["observation"]["layout"][1].update(offset=4), "does not follow"),
    (lambda m: m["action"].update(low=[0.0, 0.0, 0.0]), "action.low must be 4 finite numbers"),
    (lambda m: m["action"].update(safe_action=[2.0] * 4), "outside"),
    (lambda m: m.pop("control_hz"), "missing or malformed entry"),
])
def test_inconsistent_manifest(tmp_path, change, message):
    bundle = _copy(tmp_path)
    _edit(bundle, change)
    with pytest.raises(BundleError, match=message):
        load_bundle(bundle)


def test_onnx_shape_mismatch(tmp_path):
    bundle = _copy(tmp_path)

    def grow(manifest):
        manifest["observation"]["size"] = 54
        manifest["observation"]["layout"][-1]["size"] = 36
        for pair in manifest["recorded_pairs"]:
            pair["observation"] += [0.0] * 4
    _edit(bundle, grow)
    with pytest.raises(BundleError, match="maps 50 -> 4 entries, policy.json declares 54 -> 4"):
        OnnxPolicy(load_bundle(bundle))
