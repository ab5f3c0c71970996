/* Forward kinematics, the tool Jacobian and damped least-squares IK of the chain in arm_config.h (float32). */
#ifndef ARM_KINEMATICS_H
#define ARM_KINEMATICS_H
#include "arm_config.h"

#define ARM_IK_ROWS (3 + ARM_ORIENTATION_ROWS)
#define ARM_IK_PASSES 3

/* Tool position (3), rotation (row-major 3x3) and Jacobian (6 x ARM_JOINTS, row-major: linear then angular,
 * world frame) at joint angles q. */
void arm_forward(const float q[ARM_JOINTS], float tool[3], float rotation[9], float jacobian[6 * ARM_JOINTS]);

/* The joint change that best moves the tool by `dp` (3) and turns it by the rotation error `dr` (3, world
 * frame) without leaving the joint limits: damped least squares, dq = C^T (C C^T + damping^2 I)^-1 e, over the
 * position rows and the orientation rows the arm controls (ARM_ORIENTATION_ROWS: 3, or 2 about the target
 * frame's x and y axes for 5-DoF arms, which hold only the tool axis' direction), weighted by
 * ARM_ORIENTATION_WEIGHT; a joint the step would take past a limit stops there and the others solve again
 * (up to ARM_IK_PASSES times), as under the training's Cartesian impedance. The same steps as
 * robo_rl_ros.core.arm.limited_ik_step. Returns 0, or -1 if a system is not positive definite. */
int arm_ik_step(const float jacobian[6 * ARM_JOINTS], const float target_rotation[9], const float dp[3],
                const float dr[3], const float q[ARM_JOINTS], float dq[ARM_JOINTS]);

/* Rotation vector (world frame) that turns `current` into `target` (both row-major 3x3). */
void arm_rotation_error(const float target[9], const float current[9], float error[3]);

#endif
