"""The kinematic chain the export records (robo_rl.export.kinematics) and the core's numpy forward
kinematics reproduce MuJoCo's tool pose and Jacobian."""

import json

import mujoco
import numpy as np
import pytest

from robo_rl.export.kinematics import arm_kinematics
from robo_rl_ros.core.bundle import BundleError
from robo_rl_ros.core.kinematics import KinematicChain
from sim.arm.robot import PANDA_LIKE, load_arm


def test_forward_kinematics_and_jacobian_equal_mujoco():
    model = load_arm(PANDA_LIKE)
    description = json.loads(json.dumps(arm_kinematics(model, PANDA_LIKE)))  # as it comes out of policy.json
    chain = KinematicChain(description)
    assert chain.joints == PANDA_LIKE.joints and chain.gripper_joint == "finger_left"
    data = mujoco.MjData(model)
    site = model.site(PANDA_LIKE.ee_site).id
    qpos = [model.jnt_qposadr[model.joint(n).id] for n in PANDA_LIKE.joints]
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = rng.uniform(chain.lower, chain.upper)
        data.qpos[qpos] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jacp, jacr, site)
        dofs = [model.jnt_dofadr[model.joint(n).id] for n in PANDA_LIKE.joints]
        tool, rotation, jacobian = chain.forward(q)
        np.testing.assert_allclose(tool, data.site_xpos[site], atol=1e-12)
        np.testing.assert_allclose(rotation, data.site_xmat[site].reshape(3, 3), atol=1e-12)
        np.testing.assert_allclose(jacobian, np.vstack([jacp[:, dofs], jacr[:, dofs]]), atol=1e-12)


def test_incomplete_description():
    description = arm_kinematics(load_arm(PANDA_LIKE), PANDA_LIKE)
    del description["tool"]
    with pytest.raises(BundleError, match="kinematics is incomplete"):
        KinematicChain(description)
