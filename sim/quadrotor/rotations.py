"""Quaternion helpers on batches, for numpy or torch (`xp`). Quaternions are (w, x, y, z), body to world.

Batched arrays are feature-major: the component axis comes first, the batch axes after it.
"""

from __future__ import annotations

import math
from typing import Any


def quat_to_matrix(xp: Any, quat: Any) -> Any:
    """Row-major rotation matrix entries (9, ...) mapping body to world vectors, from unit quaternions (4, ...)."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]  # fmt: skip
    return xp.stack(rows, 0)


def tilted_quats(xp: Any, axis_u: Any, angle_u: Any, max_angle: float) -> Any:
    """Orientations (4, n) uniform on SO(3) restricted to a rotation angle of at most `max_angle` [rad],
    from uniforms in [0, 1): `axis_u` (2, n) for the rotation axis, `angle_u` (n,) for the angle.

    Same distribution as learning-to-fly's rejection sampling of uniform quaternions, with a fixed count of
    numbers per orientation: a uniform axis, and the angle by inverting its SO(3) marginal CDF (density
    prop. to 1 - cos angle) with Newton's method.
    """
    z = 2.0 * axis_u[0] - 1.0
    azimuth = (2.0 * math.pi) * axis_u[1]
    radius = xp.sqrt(xp.clip(1.0 - z * z, 0.0, None))
    half = tilt_angle(xp, angle_u, max_angle) / 2.0
    sine = xp.sin(half)
    return xp.stack([xp.cos(half), sine * radius * xp.cos(azimuth), sine * radius * xp.sin(azimuth), sine * z], 0)


def tilted_towards(xp: Any, direction: Any, tilt: Any, heading: Any) -> Any:
    """Orientations (4, n): the body's z axis tilted by `tilt` (n,) [rad] towards the world azimuth `direction` (n,)
    [rad], the body turned by `heading` (n,) [rad] about its own z axis first (heading 0: the body's x axis in the
    plane of the tilt, pointing down the slope for a positive tilt)."""
    half_sum, half_difference = (direction + heading) / 2.0, (heading - direction) / 2.0
    c, s = xp.cos(tilt / 2.0), xp.sin(tilt / 2.0)
    return xp.stack([c * xp.cos(half_sum), s * xp.sin(half_difference), s * xp.cos(half_difference),
                     c * xp.sin(half_sum)], 0)


NEWTON_STEPS = 3  # from the guess below: the angle to 1e-10 (relative) or better at every angle up to pi


def tilt_angle(xp: Any, u: Any, max_angle: float) -> Any:
    """Rotation angles in [0, min(max_angle, pi)] with density prop. to 1 - cos angle, for uniforms `u`:
    the root of angle - sin(angle) = u (M - sin M)."""
    bound = min(max(max_angle, 0.0), math.pi)
    target = u * (bound - math.sin(bound))
    guess = (6.0 * target) ** (1.0 / 3.0)
    angle = guess * (1.0 + guess * guess / 60.0)  # from angle - sin(angle) ~ angle^3 / 6 - angle^5 / 120
    for _ in range(NEWTON_STEPS):
        step = (angle - xp.sin(angle) - target) / xp.clip(1.0 - xp.cos(angle), 1e-30, None)
        # below 1e-4 rad the guess is exact to 1e-9 (relative) and 1 - cos has lost its digits
        angle = xp.where(angle > 1e-4, angle - step, angle)
    return angle


def turned_about_z(yaw: float, center: Any, position: Any, quaternion: Any, velocity: Any) -> tuple[Any, Any, Any]:
    """A rigid-body state (position, body-to-world quaternion w x y z, world-frame velocity; numpy, one state)
    turned by `yaw` [rad] about the vertical through `center`. Body rates are the body's own and stay as they are."""
    import numpy as np

    c, s = math.cos(yaw), math.sin(yaw)
    turn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    w1, z1 = math.cos(yaw / 2), math.sin(yaw / 2)  # the turn as a quaternion, (w1, 0, 0, z1), applied on the left
    w2, x2, y2, z2 = (float(v) for v in quaternion)
    turned = np.array([w1 * w2 - z1 * z2, w1 * x2 - z1 * y2, w1 * y2 + z1 * x2, w1 * z2 + z1 * w2])
    center = np.asarray(center, dtype=np.float64)
    return center + turn @ (np.asarray(position, dtype=np.float64) - center), turned, turn @ np.asarray(velocity)
