"""Fuzzed policy bundles through the ROS 2 core, as the quadrotor node starts and flies one: load_bundle
(policy.json), the controller (ONNX policy, observation, vehicle model) and one tick from a hover state. A
bundle is refused at start with one BundleError, or every command it gives is finite.

The main package's robo_rl/export/bundle.py writes bundles and reads no policy.json; the ROS core is the
loader (numpy and onnxruntime only, importable here from ros2_ws/src)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.harness import SEED, mutate, mutate_bytes

from robo_rl_ros.core.bundle import load_bundle
from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.core.quadrotor import QuadrotorPolicyController, QuadrotorSettings

MANIFEST_INPUTS = 2500
ONNX_INPUTS = 150
TARGET = (0.0, 0.0, 1.0)


def fly(directory: Path) -> dict:
    """Start the node's core on the bundle and run one tick at hover on the target."""
    bundle = load_bundle(directory)
    controller = QuadrotorPolicyController(bundle, QuadrotorSettings(target_position=TARGET))
    state = VehicleState(np.array(TARGET), np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3), np.zeros(3))
    controller.update_state(0.0, state)
    result = controller.tick(0.0)
    return {"flying": result.flying, "action": result.action, "legacy": list(result.legacy),
            "setpoint": None if result.setpoint is None else list(result.setpoint)}


@pytest.fixture
def bundle_copy(exported_bundle, sandbox):
    copy = sandbox / "bundle"
    shutil.copytree(exported_bundle, copy)
    return copy


def fuzz_manifest(bundle: Path, start, tally, rng: np.random.Generator, inputs: int) -> None:
    """Mutated policy.json files of `bundle` through `start` (the node's core on the bundle); every tenth one
    cut short or not JSON at all. The intact file is put back."""
    manifest_path = bundle / "policy.json"
    manifest = json.loads(manifest_path.read_text())
    tally.run("intact", lambda: start(bundle))
    for index in range(inputs):
        edited, what = mutate(manifest, rng)
        text = json.dumps(edited)  # NaN and Infinity as Python's json writes them, as an editor might
        if index % 10 == 9:  # now and then text that is not JSON at all, or JSON cut short
            text, what = text[: int(rng.integers(len(text) + 1))], f"{what}; text truncated"
        manifest_path.write_text(text)
        tally.run(f"#{index} {what}", lambda: start(bundle))
    manifest_path.write_text(json.dumps(manifest))


def fuzz_bytes(path: Path, bundle: Path, start, tally, rng: np.random.Generator, inputs: int) -> None:
    """Damaged copies of the bundle's file `path` through `start`."""
    data = path.read_bytes()
    for index in range(inputs):
        damaged, what = mutate_bytes(data, rng)
        path.write_bytes(damaged)
        tally.run(f"#{index} {what}", lambda: start(bundle))
    path.write_bytes(data)


def test_fuzzed_policy_json(bundle_copy, report):
    fuzz_manifest(bundle_copy, fly, report.tally("policy.json (ROS core bundle loader)"),
                  np.random.default_rng([SEED, 4]), MANIFEST_INPUTS)


def test_fuzzed_policy_onnx(bundle_copy, report):
    onnx_path = bundle_copy / json.loads((bundle_copy / "policy.json").read_text())["files"]["onnx"]
    fuzz_bytes(onnx_path, bundle_copy, fly, report.tally("policy.onnx bytes (ROS core bundle loader)"),
               np.random.default_rng([SEED, 5]), ONNX_INPUTS)


PIXELS_BUNDLE = Path(__file__).resolve().parents[1] / "ros2" / "data" / "pick_pixels_bundle"
PIXELS_MANIFEST_INPUTS = 400
PIXELS_IMAGES_INPUTS = 100


def pick_from_pixels(directory: Path) -> dict:
    """Start the arm node's core on a bundle on camera images and run one tick with its first recorded images."""
    from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings

    bundle = load_bundle(directory)
    controller = ArmPolicyController(bundle, ArmSettings((0.3, 0.0, 0.1)))
    names = [*controller.chain.joints, controller.chain.gripper_joint]
    home = [0.0, -1.57, 1.57, 1.57, 0.0]  # the SO-ARM100's home pose, not the (fuzzed) bundle's
    controller.update_joint_state(0.0, names, [*home[:len(controller.chain.joints)], 0.02], None)
    for name, images in bundle.recorded_images.items():
        controller.update_image(name, 0.0, images[0])
    result = controller.tick(0.01)
    return {"moving": result.moving, "command": result.joint_command, "gripper": result.gripper_command}


@pytest.fixture
def pixels_copy(sandbox):
    return shutil.copytree(PIXELS_BUNDLE, sandbox / "pixels")


def test_fuzzed_image_bundle(pixels_copy, report):
    fuzz_manifest(pixels_copy, pick_from_pixels, report.tally("policy.json of a policy on camera images (ROS core, arm)"),
                  np.random.default_rng([SEED, 6]), PIXELS_MANIFEST_INPUTS)
    fuzz_bytes(pixels_copy / "recorded_images.npz", pixels_copy, pick_from_pixels,
               report.tally("recorded_images.npz bytes (ROS core, arm)"), np.random.default_rng([SEED, 7]),
               PIXELS_IMAGES_INPUTS)
