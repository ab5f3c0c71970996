"""The arm as a joint position interface (what the ROS 2 arm bridge simulates)."""

from __future__ import annotations

import numpy as np

from sim.arm.joint_position import JointGains, SimulatedArm

GAINS = JointGains(kp=(1200.0,) * 4 + (300.0,) * 2 + (100.0,), kd=(40.0,) * 4 + (10.0,) * 2 + (5.0,))


def test_joint_targets_and_gripper_opening_are_tracked():
    arm = SimulatedArm({"task": "pick_cube"}, GAINS, seed=0)
    start = arm.state()
    np.testing.assert_allclose(start.positions[:7], arm.config.spec.home, atol=1e-6)
    target = start.positions[:7] + np.array([0.2, -0.1, 0.1, 0.1, -0.1, 0.1, 0.2])
    arm.command_arm(target)
    arm.command_gripper(0.01)
    for _ in range(500):  # 1 s
        arm.step()
    state = arm.state()
    np.testing.assert_allclose(state.positions[:7], target, atol=0.01)  # gravity compensated: no droop
    np.testing.assert_allclose(state.positions[7:], 0.01, atol=0.002)
    assert abs(state.time - 1.0) < 1e-9 and not state.success and abs(state.lift) < 1e-3
    arm.command_arm(np.full(7, 10.0))  # beyond the limits: clipped to them
    assert np.all(arm.arm_command <= arm.upper)
