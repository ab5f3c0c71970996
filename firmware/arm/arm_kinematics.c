/* The chain's maths in float32, the same steps as robo_rl_ros.core.kinematics and core.arm (float64). */
#include "arm_kinematics.h"

#include <math.h>
#include <string.h>

static void matmul3(const float a[9], const float b[9], float out[9])
{
    float r[9];
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            r[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
        }
    }
    memcpy(out, r, sizeof r);
}

static void matvec3(const float m[9], const float v[3], float out[3])
{
    const float x = m[0] * v[0] + m[1] * v[1] + m[2] * v[2];
    const float y = m[3] * v[0] + m[4] * v[1] + m[5] * v[2];
    const float z = m[6] * v[0] + m[7] * v[1] + m[8] * v[2];
    out[0] = x;
    out[1] = y;
    out[2] = z;
}

/* Rodrigues: the rotation by `angle` about the unit `axis`. */
static void rotation_about(const float axis[3], float angle, float out[9])
{
    const float s = sinf(angle), c = cosf(angle), t = 1.0f - c;
    const float x = axis[0], y = axis[1], z = axis[2];
    out[0] = c + t * x * x;     out[1] = t * x * y - s * z; out[2] = t * x * z + s * y;
    out[3] = t * x * y + s * z; out[4] = c + t * y * y;     out[5] = t * y * z - s * x;
    out[6] = t * x * z - s * y; out[7] = t * y * z + s * x; out[8] = c + t * z * z;
}

void arm_forward(const float q[ARM_JOINTS], float tool[3], float rotation[9], float jacobian[6 * ARM_JOINTS])
{
    float position[3] = {0.0f, 0.0f, 0.0f};
    float frame[9] = {1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 1.0f};
    float axes[ARM_JOINTS][3], anchors[ARM_JOINTS][3];
    int k = 0;
    for (int l = 0; l < ARM_LINKS; ++l) {
        const arm_link_t *link = &arm_links[l];
        float offset[3];
        matvec3(frame, link->pos, offset);
        for (int i = 0; i < 3; ++i) {
            position[i] += offset[i];
        }
        matmul3(frame, link->rot, frame);
        if (link->has_joint && k < ARM_JOINTS) {
            float anchor_offset[3], turn[9];
            matvec3(frame, link->anchor, anchor_offset);
            matvec3(frame, link->axis, axes[k]);
            for (int i = 0; i < 3; ++i) {
                anchors[k][i] = position[i] + anchor_offset[i];
            }
            rotation_about(link->axis, q[k], turn);
            matmul3(frame, turn, frame);
            matvec3(frame, link->anchor, anchor_offset);
            for (int i = 0; i < 3; ++i) {
                position[i] = anchors[k][i] - anchor_offset[i];
            }
            ++k;
        }
    }
    float tool_offset[3];
    matvec3(frame, arm_tool_pos, tool_offset);
    for (int i = 0; i < 3; ++i) {
        tool[i] = position[i] + tool_offset[i];
    }
    matmul3(frame, arm_tool_rot, rotation);
    for (int j = 0; j < ARM_JOINTS; ++j) {
        const float r[3] = {tool[0] - anchors[j][0], tool[1] - anchors[j][1], tool[2] - anchors[j][2]};
        const float *a = axes[j];
        jacobian[0 * ARM_JOINTS + j] = a[1] * r[2] - a[2] * r[1];
        jacobian[1 * ARM_JOINTS + j] = a[2] * r[0] - a[0] * r[2];
        jacobian[2 * ARM_JOINTS + j] = a[0] * r[1] - a[1] * r[0];
        jacobian[3 * ARM_JOINTS + j] = a[0];
        jacobian[4 * ARM_JOINTS + j] = a[1];
        jacobian[5 * ARM_JOINTS + j] = a[2];
    }
}

void arm_rotation_error(const float target[9], const float current[9], float error[3])
{
    /* delta = target current^T */
    float delta[9];
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            delta[3 * i + j] = target[3 * i] * current[3 * j] + target[3 * i + 1] * current[3 * j + 1]
                             + target[3 * i + 2] * current[3 * j + 2];
        }
    }
    float cosine = 0.5f * (delta[0] + delta[4] + delta[8] - 1.0f);
    cosine = cosine > 1.0f ? 1.0f : (cosine < -1.0f ? -1.0f : cosine);
    const float angle = acosf(cosine);
    /* below 1e-4 rad, angle / sin(angle) is 1 within float precision */
    const float scale = angle < 1e-4f ? 0.5f : angle / (2.0f * sinf(angle));
    error[0] = scale * (delta[7] - delta[5]);
    error[1] = scale * (delta[2] - delta[6]);
    error[2] = scale * (delta[3] - delta[1]);
}

/* Solve (C C^T + damping^2 I) y = e by Cholesky and return dq = C^T y; -1 if not positive definite. */
static int damped_least_squares(float rows[ARM_IK_ROWS][ARM_JOINTS], const float error[ARM_IK_ROWS],
                                float dq[ARM_JOINTS])
{
    float a[ARM_IK_ROWS][ARM_IK_ROWS];
    for (int i = 0; i < ARM_IK_ROWS; ++i) {
        for (int j = 0; j <= i; ++j) {
            float s = i == j ? ARM_IK_DAMPING * ARM_IK_DAMPING : 0.0f;
            for (int k = 0; k < ARM_JOINTS; ++k) {
                s += rows[i][k] * rows[j][k];
            }
            a[i][j] = s;
        }
    }
    for (int j = 0; j < ARM_IK_ROWS; ++j) { /* the Cholesky factor L, lower, in place */
        float d = a[j][j];
        for (int k = 0; k < j; ++k) {
            d -= a[j][k] * a[j][k];
        }
        if (!(d > 0.0f)) {
            return -1;
        }
        a[j][j] = sqrtf(d);
        for (int i = j + 1; i < ARM_IK_ROWS; ++i) {
            float s = a[i][j];
            for (int k = 0; k < j; ++k) {
                s -= a[i][k] * a[j][k];
            }
            a[i][j] = s / a[j][j];
        }
    }
    float y[ARM_IK_ROWS];
    for (int i = 0; i < ARM_IK_ROWS; ++i) { /* L y = e */
        float s = error[i];
        for (int k = 0; k < i; ++k) {
            s -= a[i][k] * y[k];
        }
        y[i] = s / a[i][i];
    }
    for (int i = ARM_IK_ROWS - 1; i >= 0; --i) { /* L^T y = y */
        float s = y[i];
        for (int k = i + 1; k < ARM_IK_ROWS; ++k) {
            s -= a[k][i] * y[k];
        }
        y[i] = s / a[i][i];
    }
    for (int j = 0; j < ARM_JOINTS; ++j) {
        float s = 0.0f;
        for (int i = 0; i < ARM_IK_ROWS; ++i) {
            s += rows[i][j] * y[i];
        }
        dq[j] = s;
    }
    return 0;
}

static float clampf(float x, float low, float high) { return x < low ? low : (x > high ? high : x); }

int arm_ik_step(const float jacobian[6 * ARM_JOINTS], const float target_rotation[9], const float dp[3],
                const float dr[3], const float q[ARM_JOINTS], float dq[ARM_JOINTS])
{
    float rows[ARM_IK_ROWS][ARM_JOINTS], error[ARM_IK_ROWS];
    for (int r = 0; r < 3; ++r) {
        memcpy(rows[r], &jacobian[r * ARM_JOINTS], sizeof rows[r]);
        error[r] = dp[r];
    }
#if ARM_ORIENTATION_ROWS == 3
    for (int r = 0; r < 3; ++r) {
        for (int j = 0; j < ARM_JOINTS; ++j) {
            rows[3 + r][j] = ARM_ORIENTATION_WEIGHT * jacobian[(3 + r) * ARM_JOINTS + j];
        }
        error[3 + r] = ARM_ORIENTATION_WEIGHT * dr[r];
    }
#else
    /* about the target frame's x and y axes (its columns, in the world frame) only */
    for (int a = 0; a < ARM_ORIENTATION_ROWS; ++a) {
        const float c[3] = {target_rotation[a], target_rotation[3 + a], target_rotation[6 + a]};
        for (int j = 0; j < ARM_JOINTS; ++j) {
            rows[3 + a][j] = ARM_ORIENTATION_WEIGHT * (c[0] * jacobian[3 * ARM_JOINTS + j]
                             + c[1] * jacobian[4 * ARM_JOINTS + j] + c[2] * jacobian[5 * ARM_JOINTS + j]);
        }
        error[3 + a] = ARM_ORIENTATION_WEIGHT * (c[0] * dr[0] + c[1] * dr[1] + c[2] * dr[2]);
    }
#endif
    /* a joint the step takes past a limit stops there; the others solve again for what is left */
    uint8_t locked[ARM_JOINTS] = {0};
    float step[ARM_JOINTS] = {0};
    for (int pass = 0; pass < ARM_IK_PASSES; ++pass) {
        float columns[ARM_IK_ROWS][ARM_JOINTS], remaining[ARM_IK_ROWS], solved[ARM_JOINTS];
        for (int i = 0; i < ARM_IK_ROWS; ++i) {
            remaining[i] = error[i];
            for (int j = 0; j < ARM_JOINTS; ++j) {
                columns[i][j] = locked[j] ? 0.0f : rows[i][j];
                remaining[i] -= locked[j] ? rows[i][j] * step[j] : 0.0f;
            }
        }
        if (damped_least_squares(columns, remaining, solved) != 0) {
            return -1;
        }
        int over = 0;
        for (int j = 0; j < ARM_JOINTS; ++j) {
            if (!locked[j]) {
                step[j] = solved[j];
            }
        }
        for (int j = 0; j < ARM_JOINTS; ++j) {
            if (!locked[j] && (q[j] + step[j] < arm_joint_lower[j] || q[j] + step[j] > arm_joint_upper[j])) {
                step[j] = clampf(q[j] + step[j], arm_joint_lower[j], arm_joint_upper[j]) - q[j];
                locked[j] = 1;
                over = 1;
            }
        }
        if (!over) {
            break;
        }
    }
    for (int j = 0; j < ARM_JOINTS; ++j) {
        dq[j] = clampf(q[j] + step[j], arm_joint_lower[j], arm_joint_upper[j]) - q[j];
    }
    return 0;
}
