"""Quaternion helpers on batches, for numpy or torch (`xp`). Quaternions are (w, x, y, z), body to world.

Batched arrays are feature-major: the component axis comes first, the batch axes after it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def quat_to_matrix(xp: Any, quat: Any) -> Any:
    """Row-major rotation matrix entries (9, ...) mapping body to world vectors, from unit quaternions (4, ...)."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]  # fmt: skip
    return xp.stack(rows, 0)


def random_tilted_quats(rng: np.random.Generator, n: int, max_angle: float) -> np.ndarray:
    """Orientations uniform on SO(3) restricted to a rotation angle of at most `max_angle` [rad].

    Same distribution as learning-to-fly's rejection sampling of uniform quaternions, but efficient for
    small limits: a uniform axis, and the angle drawn from its SO(3) marginal density, prop. to 1 - cos.
    """
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = np.empty(n)
    filled = 0
    envelope = 1.0 - np.cos(min(max_angle, np.pi))
    while filled < n and max_angle > 0:
        candidate = rng.uniform(0.0, max_angle, size=2 * (n - filled) + 8)
        accept = rng.uniform(0.0, envelope, size=candidate.shape) <= 1.0 - np.cos(candidate)
        keep = candidate[accept][: n - filled]
        angle[filled : filled + len(keep)] = keep
        filled += len(keep)
    if max_angle <= 0:
        angle[:] = 0.0
    half = angle[:, None] / 2.0
    return np.concatenate([np.cos(half), np.sin(half) * axis], axis=1)
