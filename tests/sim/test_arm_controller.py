"""The batched Cartesian impedance controller drives many arms to their own tool poses."""

from __future__ import annotations

import mujoco
import mujoco.batch
import numpy as np
import pytest

from sim.arm import PANDA_LIKE, load_arm
from sim.arm.controller import BatchedImpedanceController, ImpedanceGains, home_tool_rotation, load_impedance_arm
from sim.arm.robot import SO_ARM100_LIKE


def rotation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Axis-angle vector (N, 3), world frame, rotating `current` onto `target` (both (N, 3, 3))."""
    delta = np.einsum("nij,nkj->nik", target, current)  # target @ current^T
    vee = 0.5 * np.stack([delta[:, 2, 1] - delta[:, 1, 2], delta[:, 0, 2] - delta[:, 2, 0],
                          delta[:, 1, 0] - delta[:, 0, 1]], axis=1)
    sin = np.linalg.norm(vee, axis=1, keepdims=True)
    cos = np.clip(0.5 * (np.trace(delta, axis1=1, axis2=2)[:, None] - 1.0), -1.0, 1.0)
    angle = np.arctan2(sin, cos)
    return np.where(sin > 1e-9, vee * angle / np.maximum(sin, 1e-12), vee)


def _arms_at_home(arm, n, gains=ImpedanceGains()):
    model = load_impedance_arm(arm, gains)
    batch = mujoco.batch.Batch(model, n, 1, persistent=True)
    qpos = batch.bind("qpos")
    qpos[:, [model.jnt_qposadr[model.joint(j).id] for j in arm.joints]] = arm.home
    cube = model.jnt_qposadr[model.joint("cube").id]
    qpos[:, cube:cube + 7] = (0.5, 0.0, 0.02, 1.0, 0.0, 0.0, 0.0)
    batch.forward()
    return model, batch, BatchedImpedanceController(batch, model, arm, gains)


def test_every_arm_reaches_its_own_target_pose():
    n = 16
    model, batch, controller = _arms_at_home(PANDA_LIKE, n)
    start, rot = controller.tool_pose()
    np.testing.assert_allclose(rot[0], home_tool_rotation(model, PANDA_LIKE), atol=1e-9)
    target = start + np.random.default_rng(0).uniform([-0.15, -0.2, -0.2], [0.15, 0.2, 0.1], (n, 3))
    controller.step(target, substeps=1000)  # 2 s
    pos, now = controller.tool_pose()
    assert np.linalg.norm(pos - target, axis=1).max() < 5e-3
    assert np.degrees(np.linalg.norm(rotation_error(rot, now), axis=1)).max() < 1.0
    assert np.linalg.norm(controller.tool_velocity(), axis=1).max() < 1e-2  # settled
    assert np.linalg.norm(start - target, axis=1).min() > 0.05  # every arm had somewhere to go


def test_a_two_cm_step_is_mostly_done_in_five_control_steps_and_stiffness_scales_per_arm():
    model, batch, controller = _arms_at_home(PANDA_LIKE, 2)
    controller.set_stiffness_scale(np.array([1]), np.array([0.25]))
    start, _ = controller.tool_pose()
    for _ in range(5):  # 100 ms
        controller.step(start + (0.02, 0.0, 0.0), substeps=10)
    moved = controller.tool_pose()[0][:, 0] - start[:, 0]
    assert 0.015 < moved[0] < 0.022 and moved[1] < 0.7 * moved[0]  # the softer arm lags


def test_five_dof_arm_holds_the_tool_axis_and_leaves_yaw_free():
    arm = SO_ARM100_LIKE
    model, batch, controller = _arms_at_home(arm, 4, ImpedanceGains(translation_stiffness=2000.0,
                                                                  rotation_stiffness=20.0, null_damping=0.05,
                                                                  effective_mass=0.3))
    assert model.actuator("tool_rx").id >= 0 and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, "tool_rz") < 0
    start, rot = controller.tool_pose()
    target = start + np.random.default_rng(1).uniform([-0.03, -0.05, -0.03], [0.03, 0.05, 0.03], (4, 3))
    controller.step(target, substeps=1000)
    pos, now = controller.tool_pose()
    assert np.linalg.norm(pos - target, axis=1).max() < 5e-3
    tilt = np.degrees(np.arccos(np.clip(np.einsum("ni,ni->n", now[:, :, 2], rot[:, :, 2]), -1, 1)))
    assert tilt.max() < 3.0


def test_a_model_without_the_impedance_actuators_is_refused():
    model = load_arm(PANDA_LIKE)
    with pytest.raises(ValueError, match="load_impedance_arm"):
        BatchedImpedanceController(mujoco.batch.Batch(model, 1, 1, persistent=True), model, PANDA_LIKE)


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
