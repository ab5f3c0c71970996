"""Quaternion and rotation helpers (quaternions (w, x, y, z), body to world), numpy only."""

from __future__ import annotations

import math

import numpy as np


def floats(values) -> list[float]:
    """A vector's entries as Python floats (the tick's 3- and 4-vector math is cheaper on them than on numpy)."""
    return values.tolist() if isinstance(values, np.ndarray) else [float(v) for v in values]


def all_finite(values: list[float]) -> bool:
    """Whether every entry is a finite number."""
    # a sum is finite only if every term is (NaN and Inf propagate; finite overflow is rejected too)
    return math.isfinite(sum(values))


def quat_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Body-to-world rotation matrix (3, 3) of a unit quaternion (w, x, y, z)."""
    return np.array(rotation_entries(quat)).reshape(3, 3)


def rotation_entries(quat: np.ndarray) -> list[float]:
    """The body-to-world rotation matrix of a unit quaternion (w, x, y, z), row-major, as 9 floats."""
    # Python floats: the policy nodes call this every tick, where numpy scalar arithmetic costs several times more
    w, x, y, z = floats(quat)
    return [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]


def heading(quat: np.ndarray) -> float:
    """The heading [rad] of a unit quaternion (w, x, y, z): the yaw of its z-y-x Euler angles."""
    w, x, y, z = floats(quat)
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def turned_by_minus(vector: list[float], cos: float, sin: float) -> list[float]:
    """A world-frame 3-vector in the frame turned about z by the heading whose cosine and sine are given."""
    x, y, z = vector
    return [cos * x + sin * y, -sin * x + cos * y, z]


def normalized_quat(quat: np.ndarray) -> np.ndarray:
    """`quat` scaled to unit norm; ValueError for a zero or non-finite quaternion."""
    norm = float(np.linalg.norm(quat))
    if not np.isfinite(norm) or norm < 1e-6:
        raise ValueError(f"not a rotation quaternion: {quat}")
    return np.asarray(quat, dtype=np.float64) / norm


def matrix_to_euler_zyx(rotation: np.ndarray) -> tuple[float, float, float]:
    """(roll, pitch, yaw) [rad], right-handed, of a body-to-world matrix R = Rz(yaw) Ry(pitch) Rx(roll)."""
    (r00, _, _), (r10, _, _), (r20, r21, r22) = rotation.tolist()
    return math.atan2(r21, r22), math.asin(min(max(-r20, -1.0), 1.0)), math.atan2(r10, r00)


def rotation_exp(rotation_vector: np.ndarray) -> np.ndarray:
    """Rotation matrix of a rotation vector (axis times angle), Rodrigues' formula."""
    return np.array(rotation_exp_entries(rotation_vector)).reshape(3, 3)


def rotation_exp_entries(rotation_vector: np.ndarray) -> list[float]:
    """`rotation_exp` row-major, as 9 floats."""
    x, y, z = floats(rotation_vector)
    angle = math.sqrt(x * x + y * y + z * z)
    if angle < 1e-12:
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    x, y, z = x / angle, y / angle, z / angle
    s, c = math.sin(angle), math.cos(angle)
    t = 1.0 - c
    return [c + t * x * x, t * x * y - s * z, t * x * z + s * y,
            t * x * y + s * z, c + t * y * y, t * y * z - s * x,
            t * x * z - s * y, t * y * z + s * x, c + t * z * z]


def matmul3(a: list[float], b: list[float]) -> list[float]:
    """The product of two 3x3 matrices given row-major as 9 floats."""
    return [a[r] * b[c] + a[r + 1] * b[c + 3] + a[r + 2] * b[c + 6] for r in (0, 3, 6) for c in (0, 1, 2)]


def relative_rotation_vector(r_from: np.ndarray, r_to: np.ndarray) -> np.ndarray:
    """Rotation vector (body frame of `r_from`) taking body-to-world matrix `r_from` to `r_to`."""
    delta = r_from.T @ r_to
    angle = float(np.arccos(np.clip((np.trace(delta) - 1.0) / 2.0, -1.0, 1.0)))
    axis = np.array([delta[2, 1] - delta[1, 2], delta[0, 2] - delta[2, 0], delta[1, 0] - delta[0, 1]])
    if angle < 1e-9:
        return axis / 2.0
    return axis * angle / (2.0 * np.sin(angle))


def matrix_to_quat(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i, i] - m[j, j] - m[k, k], 1e-12))
        q = np.empty(4)
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def body_to_world(quaternion: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """A body-frame vector expressed in the world frame."""
    w, x, y, z = floats(quaternion)
    vx, vy, vz = floats(vector)
    # v + 2 q_v x (q_v x v + w v)
    tx, ty, tz = y * vz - z * vy + w * vx, z * vx - x * vz + w * vy, x * vy - y * vx + w * vz
    return np.array([vx + 2.0 * (y * tz - z * ty), vy + 2.0 * (z * tx - x * tz), vz + 2.0 * (x * ty - y * tx)])


def world_to_body(quaternion: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """A world-frame vector expressed in the body frame."""
    return quat_to_matrix(quaternion).T @ np.asarray(vector, dtype=np.float64)
