#include "arm_control.h"

#include <math.h>
#include <string.h>

#include "arm_kinematics.h"
#include "host_protocol.h"
#include "policy.h"

static float clampf(float x, float low, float high) { return x < low ? low : (x > high ? high : x); }

static int finite_all(const float *x, int n, float limit)
{
    for (int i = 0; i < n; ++i) {
        if (!(fabsf(x[i]) <= limit)) { /* false for NaN */
            return 0;
        }
    }
    return 1;
}

void arm_controller_init(arm_controller_t *c, int self_test_ok)
{
    memset(c, 0, sizeof *c);
    c->self_test_ok = (uint8_t)(self_test_ok != 0);
}

void arm_observation(const float q[ARM_JOINTS], const float qdot[ARM_JOINTS], float opening, const float object[3],
                     const float goal[3], float obs[ARM_OBS_SIZE])
{
    float tool[3], rotation[9], jacobian[6 * ARM_JOINTS];
    arm_forward(q, tool, rotation, jacobian);
    for (int i = 0; i < 3; ++i) {
        float v = 0.0f;
        for (int j = 0; j < ARM_JOINTS; ++j) {
            v += jacobian[i * ARM_JOINTS + j] * qdot[j];
        }
        obs[ARM_OBS_TOOL_POSITION + i] = tool[i];
        obs[ARM_OBS_TOOL_VELOCITY + i] = v;
        obs[ARM_OBS_CUBE_POSITION + i] = object[i];
        obs[ARM_OBS_CUBE_MINUS_TOOL + i] = object[i] - tool[i];
        obs[ARM_OBS_GOAL_MINUS_TOOL + i] = goal[i] - tool[i];
    }
    obs[ARM_OBS_GRIPPER_OPENING] = opening;
}

static void hold(arm_controller_t *c, arm_tick_output_t *out, uint8_t reason)
{
    c->moving = 0;
    out->state = ARM_STATE_HOLD;
    out->reason = reason;
    out->write_goals = 0; /* the servos keep their last goals */
    out->torque = 1;
}

void arm_controller_tick(arm_controller_t *c, const arm_tick_input_t *in, arm_tick_output_t *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->command, c->command, sizeof out->command);
    out->gripper = c->gripper;
    if (!c->self_test_ok) {
        c->moving = 0;
        out->state = ARM_STATE_TORQUE_OFF;
        out->reason = ARM_REASON_SELF_TEST_FAILED;
        return;
    }
    /* a servo's error bits must persist: a single corrupted status byte is a hold, not a latch */
    if (in->servo_reason == ARM_REASON_SERVO_ERROR) {
        c->servo_error_ticks = (uint8_t)(c->servo_error_ticks < 255u ? c->servo_error_ticks + 1u : 255u);
    } else if (in->servo_reason == ARM_REASON_OK) {
        c->servo_error_ticks = 0;
    }
    if (c->servo_error_ticks >= ARM_SERVO_ERROR_TICKS) {
        c->torque_latched = 1;
    }
    if (c->torque_latched) {
        if (in->host_fresh && !(in->flags & HOST_FLAG_ENABLE)) {
            c->disable_seen = 1;
        }
        const int re_arm = c->disable_seen && in->host_fresh && (in->flags & HOST_FLAG_ENABLE)
                        && in->servo_reason == ARM_REASON_OK;
        if (!re_arm) {
            c->moving = 0;
            out->state = ARM_STATE_TORQUE_OFF;
            out->reason = ARM_REASON_SERVO_ERROR;
            return;
        }
        c->torque_latched = 0;
        c->disable_seen = 0;
        c->servo_error_ticks = 0;
    }
    if (in->host_fresh && (in->flags & HOST_FLAG_NEW_EPISODE)) {
        c->moving = 0;
        c->goal_set = 0;
    }
    if (in->servo_reason != ARM_REASON_OK) {
        hold(c, out, in->servo_reason);
        return;
    }
    if (!in->host_fresh) {
        hold(c, out, in->host_seen ? ARM_REASON_HOST_TIMEOUT : ARM_REASON_BOOT);
        return;
    }
    if (!finite_all(in->object, 3, ARM_INPUT_LIMIT) || !finite_all(in->goal, 3, ARM_INPUT_LIMIT)) {
        hold(c, out, ARM_REASON_BAD_HOST_DATA);
        return;
    }
    if (!(in->flags & HOST_FLAG_ENABLE)) {
        hold(c, out, ARM_REASON_HOST_DISABLED);
        return;
    }

    float tool[3], rotation[9], jacobian[6 * ARM_JOINTS];
    arm_forward(in->q, tool, rotation, jacobian);
    if (!c->moving || !c->have_command) { /* start (or resume) from where the arm is */
        memcpy(c->command, in->q, sizeof c->command);
        c->have_command = 1;
    }
    if (!c->have_orientation) {
        memcpy(c->orientation, rotation, sizeof c->orientation);
        c->have_orientation = 1;
    }
#if ARM_TASK_PICK_CUBE
    if (!c->goal_set) { /* the lift goal above where the cube was when the episode's policy started */
        c->goal[0] = in->object[0];
        c->goal[1] = in->object[1];
        c->goal[2] = in->object[2] + ARM_LIFT_HEIGHT;
        c->goal_set = 1;
    }
#else
    memcpy(c->goal, in->goal, sizeof c->goal);
#endif
    float obs[ARM_OBS_SIZE];
    arm_observation(in->q, in->qdot, in->opening, in->object, c->goal, obs);
    const policy_status_t status = policy_step(obs, out->action);
    out->policy_status = (uint8_t)status;
    if (status != POLICY_OK) {
        hold(c, out, ARM_REASON_POLICY_FAULT);
        return;
    }
    float dp[3], dr[3], orientation_error[3], dq[ARM_JOINTS];
    for (int i = 0; i < 3; ++i) {
        const float target = clampf(tool[i] + ARM_ACTION_SCALE * out->action[i], arm_workspace_low[i],
                                    arm_workspace_high[i]);
        dp[i] = target - tool[i];
    }
    arm_rotation_error(c->orientation, rotation, orientation_error);
    for (int i = 0; i < 3; ++i) {
        dr[i] = ARM_ORIENTATION_GAIN * orientation_error[i];
    }
    if (arm_ik_step(jacobian, c->orientation, dp, dr, in->q, dq) != 0 || !finite_all(dq, ARM_JOINTS, 1e3f)) {
        hold(c, out, ARM_REASON_POLICY_FAULT);
        return;
    }
    for (int j = 0; j < ARM_JOINTS; ++j) {
        const float desired = in->q[j] + dq[j]; /* inside the limits */
        c->command[j] = clampf(desired, c->command[j] - ARM_MAX_JOINT_STEP, c->command[j] + ARM_MAX_JOINT_STEP);
    }
    const float a = clampf(out->action[3], -1.0f, 1.0f);
    c->gripper = ARM_GRIPPER_HIGH + (ARM_GRIPPER_LOW - ARM_GRIPPER_HIGH) * 0.5f * (a + 1.0f);
    c->moving = 1;
    out->state = ARM_STATE_RUN;
    out->reason = ARM_REASON_OK;
    out->write_goals = 1;
    out->torque = 1;
    memcpy(out->command, c->command, sizeof out->command);
    out->gripper = c->gripper;
}

uint16_t arm_to_steps(const arm_servo_t *servo, float value)
{
    const float steps = servo->zero_steps + servo->steps_per_unit * value;
    return (uint16_t)lrintf(clampf(steps, (float)servo->min_steps, (float)servo->max_steps));
}

float arm_from_steps(const arm_servo_t *servo, float steps)
{
    return (steps - servo->zero_steps) / servo->steps_per_unit;
}

int arm_kinematics_self_test(float *worst)
{
    int failures = 0;
    *worst = 0.0f;
    for (int p = 0; p < ARM_KINEMATICS_PAIRS; ++p) {
        float tool[3], rotation[9], jacobian[6 * ARM_JOINTS];
        arm_forward(arm_kinematics_q[p], tool, rotation, jacobian);
        float e = 0.0f;
        for (int i = 0; i < 3; ++i) {
            const float d = fabsf(tool[i] - arm_kinematics_tool[p][i]);
            e = d > e ? d : e;
        }
        *worst = e > *worst ? e : *worst;
        failures += !(e <= ARM_KINEMATICS_TOLERANCE);
    }
    return failures;
}
