"""Camera images as sensor_msgs/Image carries them (REP 118 / sensor_msgs image_encodings), to and from the
uint8 RGB (height, width, 3) arrays a policy on camera images reads. Pure numpy: no ROS, no cv_bridge.

A message's `step` is the length of one row in bytes, which may exceed width x channels (rows padded to an
alignment); `data` holds `height` such rows. Only 8-bit colour encodings are read: a policy trained on
colour has no use for a mono or depth image.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# encoding -> (bytes per pixel, where red, green and blue are in a pixel)
COLOUR_ENCODINGS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "rgb8": (3, (0, 1, 2)), "bgr8": (3, (2, 1, 0)), "rgba8": (4, (0, 1, 2)), "bgra8": (4, (2, 1, 0)),
}
OUTPUT_ENCODING = "rgb8"  # what the sim bridge publishes and the policy node republishes


def rgb_image(height: int, width: int, encoding: str, step: int, data: Any) -> np.ndarray:
    """The uint8 RGB (height, width, 3) image of a sensor_msgs/Image's fields; ValueError naming what is wrong."""
    if encoding not in COLOUR_ENCODINGS:
        raise ValueError(f"encoding {encoding!r} is not read; allowed: {', '.join(COLOUR_ENCODINGS)}")
    channels, order = COLOUR_ENCODINGS[encoding]
    if height < 1 or width < 1 or step < width * channels:
        raise ValueError(f"a {width}x{height} {encoding} image needs a step of at least {width * channels} bytes, "
                         f"got {step}")
    buffer = np.frombuffer(data, dtype=np.uint8)
    if buffer.size < step * height:
        raise ValueError(f"a {width}x{height} {encoding} image with step {step} needs {step * height} bytes, "
                         f"got {buffer.size}")
    pixels = buffer[:step * height].reshape(height, step)[:, :width * channels].reshape(height, width, channels)
    return np.ascontiguousarray(pixels[:, :, list(order)])


def rgb8_fields(image: np.ndarray) -> dict[str, Any]:
    """The sensor_msgs/Image fields (height, width, encoding, is_bigendian, step, data) of a uint8 RGB
    (height, width, 3) image, rows unpadded."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"an RGB image is (height, width, 3), got {image.shape}")
    height, width, _ = image.shape
    return {"height": height, "width": width, "encoding": OUTPUT_ENCODING, "is_bigendian": 0, "step": width * 3,
            "data": image.tobytes()}


def image_topics(entries: list[str], cameras: list[str]) -> dict[str, str]:
    """The topic of each camera, from "camera=topic" entries (default /<camera>/image_raw); ValueError for an
    entry that is not one, or that names another camera."""
    topics = {camera: f"/{camera}/image_raw" for camera in cameras}
    for entry in entries:
        camera, _, topic = entry.partition("=")
        if not topic or camera not in topics:
            raise ValueError(f"image_topics entry {entry!r} must be camera=topic with one of the policy's cameras "
                             f"({', '.join(cameras) or 'none: it reads no images'})")
        topics[camera] = topic
    return topics
