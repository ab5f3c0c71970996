"""The Panda-class arm model: its kinematics are Franka's published DH parameters, its names resolve."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from sim.arm import PANDA_LIKE, load_arm
from sim.errors import ConfigError

# Franka's modified (Craig) DH table: a [m], d [m], alpha [rad] per joint; flange, hand and TCP offsets
DH = [(0, 0.333, 0), (0, 0, -np.pi / 2), (0, 0.316, np.pi / 2), (0.0825, 0, np.pi / 2),
      (-0.0825, 0.384, -np.pi / 2), (0, 0, np.pi / 2), (0.088, 0, np.pi / 2)]
LIMITS = [(-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698), (-2.8973, 2.8973),
          (-0.0175, 3.7525), (-2.8973, 2.8973)]


def dh_tcp(q: np.ndarray) -> np.ndarray:
    def rot_x(a):
        c, s = np.cos(a), np.sin(a)
        return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])

    def rot_z(a):
        c, s = np.cos(a), np.sin(a)
        return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])

    def trans(x=0.0, z=0.0):
        t = np.eye(4)
        t[0, 3], t[2, 3] = x, z
        return t

    pose = np.eye(4)
    for (a, d, alpha), angle in zip(DH, q):
        pose = pose @ rot_x(alpha) @ trans(x=a) @ rot_z(angle) @ trans(z=d)
    return pose @ trans(z=0.107) @ rot_z(-np.pi / 4) @ trans(z=0.1034)


def test_tool_centre_point_follows_the_published_kinematics():
    model = load_arm()
    data = mujoco.MjData(model)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, PANDA_LIKE.ee_site)
    joints = [model.joint(name) for name in PANDA_LIKE.joints]
    np.testing.assert_allclose([j.range for j in joints], LIMITS)
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = rng.uniform(*np.array(LIMITS).T)
        for joint, angle in zip(joints, q):
            data.qpos[joint.qposadr[0]] = angle
        mujoco.mj_kinematics(model, data)
        expected = dh_tcp(q)
        np.testing.assert_allclose(data.site_xpos[site], expected[:3, 3], atol=1e-9)
        np.testing.assert_allclose(data.site_xmat[site].reshape(3, 3), expected[:3, :3], atol=1e-6)


def test_a_spec_naming_parts_the_mjcf_lacks_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="lacks site nope"):
        load_arm(dataclasses.replace(PANDA_LIKE, ee_site="nope"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_arm(dataclasses.replace(PANDA_LIKE, mjcf=tmp_path / "missing.xml"))
