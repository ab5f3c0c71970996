"""A policy on camera images on the robot computer: sensor_msgs/Image decoding against the message's own
definition (REP 118, sensor_msgs/image_encodings), the image bundle's load and checks, and the arm controller
reading its cameras (holding while one is missing, stale or of another size)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.core.images import image_topics, rgb8_fields, rgb_image
from robo_rl_ros.core.inference import OnnxPolicy

PIXELS_BUNDLE = Path(__file__).resolve().parent / "data" / "pick_pixels_bundle"
RED, GREEN, BLUE, WHITE = (200, 10, 20), (5, 210, 30), (1, 2, 250), (255, 255, 255)


def test_images_decode_as_sensor_msgs_lays_them_out_padding_included():
    expected = np.array([[RED, GREEN], [BLUE, WHITE]], dtype=np.uint8)  # 2x2, rows top to bottom
    # bgr8 with step 8: each row is 6 bytes of pixels (blue, green, red each) and 2 bytes of padding
    bgr = bytes([20, 10, 200, 30, 210, 5, 99, 99, 250, 2, 1, 255, 255, 255, 99, 99])
    np.testing.assert_array_equal(rgb_image(2, 2, "bgr8", 8, bgr), expected)
    rgb = bytes([200, 10, 20, 5, 210, 30, 1, 2, 250, 255, 255, 255])  # step 6, no padding
    np.testing.assert_array_equal(rgb_image(2, 2, "rgb8", 6, rgb), expected)
    rgba = bytes([200, 10, 20, 7, 5, 210, 30, 7, 1, 2, 250, 7, 255, 255, 255, 7])
    np.testing.assert_array_equal(rgb_image(2, 2, "rgba8", 8, rgba), expected)
    bgra = bytes([20, 10, 200, 7, 30, 210, 5, 7, 250, 2, 1, 7, 255, 255, 255, 7])
    np.testing.assert_array_equal(rgb_image(2, 2, "bgra8", 8, bgra), expected)
    fields = rgb8_fields(expected)  # what the bridge and the node publish: rgb8, rows unpadded
    assert (fields["height"], fields["width"], fields["encoding"], fields["step"]) == (2, 2, "rgb8", 6)
    assert fields["data"] == rgb and fields["is_bigendian"] == 0


@pytest.mark.parametrize("height, width, encoding, step, size, message", [
    (2, 2, "mono8", 2, 4, "encoding 'mono8' is not read; allowed: rgb8, bgr8, rgba8, bgra8"),
    (2, 2, "rgb8", 5, 12, "needs a step of at least 6 bytes, got 5"),
    (2, 2, "rgb8", 6, 11, "needs 12 bytes, got 11"),
])
def test_an_image_that_is_not_what_its_fields_say_is_one_error(height, width, encoding, step, size, message):
    with pytest.raises(ValueError, match=message):
        rgb_image(height, width, encoding, step, bytes(size))


def test_image_topics_default_to_image_raw_and_take_camera_equals_topic():
    assert image_topics([], ["front", "wrist"]) == {"front": "/front/image_raw", "wrist": "/wrist/image_raw"}
    assert image_topics(["wrist=/hand/color"], ["front", "wrist"])["wrist"] == "/hand/color"
    with pytest.raises(ValueError, match=r"'side=/x' must be camera=topic with one of the policy's cameras"):
        image_topics(["side=/x"], ["front", "wrist"])


def test_the_image_bundle_loads_and_its_onnx_reproduces_the_recorded_pairs_with_their_images():
    bundle = load_bundle(PIXELS_BUNDLE)
    assert [(c.name, c.shape) for c in bundle.cameras] == [("front", (64, 64, 3)), ("wrist", (64, 64, 3))]
    assert bundle.observation_size == 7 and bundle.recorded_images["front"].shape == (16, 64, 64, 3)
    policy = OnnxPolicy(bundle)
    assert policy.engine.startswith("onnxruntime")
    np.testing.assert_allclose(policy.batch(bundle.recorded_observations, bundle.recorded_images),
                               bundle.recorded_actions, atol=1e-5, rtol=0)
    one = {name: images[3] for name, images in bundle.recorded_images.items()}
    np.testing.assert_allclose(policy(bundle.recorded_observations[3], one), bundle.recorded_actions[3], atol=1e-5)
    with pytest.raises(ValueError, match="the policy reads camera 'wrist', and no image of it was given"):
        policy(bundle.recorded_observations[3], {"front": one["front"]})


def _copy(tmp_path: Path) -> Path:
    return shutil.copytree(PIXELS_BUNDLE, tmp_path / "bundle")


def test_an_image_bundle_whose_images_do_not_match_is_refused(tmp_path):
    bundle = _copy(tmp_path)
    with np.load(bundle / "recorded_images.npz") as archive:
        front, wrist = archive["front"], archive["wrist"]
    np.savez(bundle / "recorded_images.npz", front=front)
    with pytest.raises(BundleError, match="cannot be read as the cameras' recorded images"):
        load_bundle(bundle)
    np.savez(bundle / "recorded_images.npz", front=front[:, :32], wrist=wrist)
    with pytest.raises(BundleError, match=r"front is uint8 \(16, 32, 64, 3\); policy.json declares uint8 \(16, 64, 64, 3\)"):
        load_bundle(bundle)
    np.savez(bundle / "recorded_images.npz", front=255 - front, wrist=wrist)  # other images: other actions
    with pytest.raises(BundleError, match="does not reproduce the bundle's recorded pairs"):
        OnnxPolicy(load_bundle(bundle))
    (bundle / "recorded_images.npz").unlink()
    with pytest.raises(BundleError, match="recorded images .* are not a file inside the bundle"):
        load_bundle(bundle)


def _controller(**settings) -> tuple[ArmPolicyController, dict[str, np.ndarray]]:
    bundle = load_bundle(PIXELS_BUNDLE)
    controller = ArmPolicyController(bundle, ArmSettings((0.3, 0.0, 0.1), **settings))
    names = [*controller.chain.joints, controller.chain.gripper_joint]
    home = bundle.env_config["spec"]["home"]
    assert controller.update_joint_state(0.0, names, [*home, 0.02], None)
    return controller, {name: images[0] for name, images in bundle.recorded_images.items()}


def test_the_arm_controller_reads_its_cameras_and_holds_without_them():
    controller, images = _controller(image_timeout=0.2)
    names = [*controller.chain.joints, controller.chain.gripper_joint]
    home = [*controller.bundle.env_config["spec"]["home"], 0.02]
    assert not controller.needs_object  # the cameras show the cube: no object position is waited for
    assert controller.tick(0.01).reason == "no image from camera 'front' yet"
    assert controller.update_image("front", 0.0, images["front"]) == ""
    assert controller.tick(0.01).reason == "no image from camera 'wrist' yet"
    assert controller.update_image("wrist", 0.0, images["wrist"]) == ""
    moving = controller.tick(0.01)
    assert moving.moving and set(moving.images) == {"front", "wrist"}
    np.testing.assert_array_equal(moving.images["front"], images["front"])
    assert np.all(np.isfinite(moving.joint_command))
    controller.update_joint_state(0.24, names, home, None)  # the joint state stays fresh, the images do not
    stale = controller.tick(0.25)
    assert not stale.moving and stale.reason == "the image from camera 'front' is 250 ms old"
    assert "the policy reads uint8 64x64" in controller.update_image("front", 0.3, images["front"][:32])
    assert controller.update_image("side", 0.3, images["front"]).startswith("the policy reads no camera 'side'")
    assert not controller.tick(0.3).moving  # the bad images were not taken
    controller.update_image("front", 0.3, images["front"])
    controller.update_image("wrist", 0.3, images["wrist"])
    assert controller.tick(0.31).moving
