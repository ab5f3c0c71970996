"""The batched Cartesian impedance controller drives many arms to their own tool poses."""

from __future__ import annotations

import mujoco
import mujoco.batch
import numpy as np
import pytest

from sim.arm import PANDA_LIKE, load_arm
from sim.arm.controller import BatchedImpedanceController, rotation_error

HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


@pytest.mark.parametrize("jacobian_every", [1, 5])
def test_every_arm_reaches_its_own_target_pose(jacobian_every):
    model = load_arm()
    n = 16
    batch = mujoco.batch.Batch(model, n, 1, persistent=True)
    qpos = batch.bind("qpos")
    qpos[:, :7] = HOME
    batch.forward()
    controller = BatchedImpedanceController(batch, model, PANDA_LIKE)
    start, rot = controller.tool_pose()
    target = start + np.random.default_rng(0).uniform([-0.15, -0.2, -0.2], [0.15, 0.2, 0.1], (n, 3))
    pointing_down = np.tile(rot[:1], (n, 1, 1))
    controller.step(target, pointing_down, substeps=1000, jacobian_every=jacobian_every)  # 2 s
    pos, rot = controller.tool_pose()
    assert np.linalg.norm(pos - target, axis=1).max() < 5e-3
    assert np.degrees(np.linalg.norm(rotation_error(pointing_down, rot), axis=1)).max() < 1.0
    assert np.linalg.norm(start - target, axis=1).min() > 0.05  # every arm had somewhere to go


def test_rotation_error_is_the_axis_angle_between_orientations():
    angle = np.array([0.3, 2.0, np.pi - 1e-3])
    axis = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    rotations = []
    for a, u in zip(angle, axis):
        quat = np.zeros(4)
        mujoco.mju_axisAngle2Quat(quat, u, a)
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, quat)
        rotations.append(mat.reshape(3, 3))
    error = rotation_error(np.stack(rotations), np.tile(np.eye(3), (3, 1, 1)))
    np.testing.assert_allclose(error, axis * angle[:, None], atol=1e-6)
