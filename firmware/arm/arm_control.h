/* One control tick of the arm, independent of the hardware: the safety state machine, the observation as the
 * simulator builds it, the generated policy, and the action turned into joint goals (differential IK, joint
 * limits, a maximum step per tick, the gripper's range). The same decisions as robo_rl_ros.core.arm. */
#ifndef ARM_CONTROL_H
#define ARM_CONTROL_H
#include <stdint.h>

#include "arm_config.h"

/* What one tick knows. */
typedef struct {
    uint8_t servo_reason;       /* ARM_REASON_OK, or SERVO_TIMEOUT / SERVO_ERROR / BAD_SERVO_DATA */
    float q[ARM_JOINTS];        /* [rad], valid with servo_reason OK */
    float qdot[ARM_JOINTS];     /* [rad/s] */
    float opening;              /* gripper opening per finger [m] */
    uint8_t host_fresh;         /* a valid INPUTS frame arrived for this tick */
    uint8_t host_seen;          /* any valid INPUTS ever */
    float object[3];            /* [m] world */
    float goal[3];              /* [m] world: the reach target */
    uint8_t flags;              /* HOST_FLAG_* */
} arm_tick_input_t;

/* What one tick decided. */
typedef struct {
    uint8_t state;              /* ARM_STATE_* */
    uint8_t reason;             /* ARM_REASON_* */
    uint8_t policy_status;      /* policy_step's status (0 when it did not run) */
    uint8_t write_goals;        /* send command and gripper as goal positions */
    uint8_t torque;             /* the torque the servos should have: 1 on, 0 off */
    float action[4];
    float command[ARM_JOINTS];  /* [rad] */
    float gripper;              /* [m] */
} arm_tick_output_t;

typedef struct {
    uint8_t self_test_ok;
    uint8_t moving;             /* running since the last hold (0: the next run starts from the present positions) */
    uint8_t have_command, have_orientation, goal_set;
    uint8_t torque_latched;     /* a persistent servo fault switched torque off */
    uint8_t disable_seen;       /* the host sent INPUTS without ENABLE since the latch: its next ENABLE re-arms */
    uint8_t servo_error_ticks;  /* consecutive ticks with a servo's error bits */
    float orientation[9];       /* the tool orientation held (latched at the first run) */
    float goal[3];
    float command[ARM_JOINTS];
    float gripper;
} arm_controller_t;

void arm_controller_init(arm_controller_t *c, int self_test_ok);

/* Decide this tick (see arm_tick_output_t). */
void arm_controller_tick(arm_controller_t *c, const arm_tick_input_t *in, arm_tick_output_t *out);

/* The observation vector for joint positions, velocities, the gripper opening, the object and the goal. */
void arm_observation(const float q[ARM_JOINTS], const float qdot[ARM_JOINTS], float opening, const float object[3],
                     const float goal[3], float obs[ARM_OBS_SIZE]);

/* A finite joint value (rad, or m for the gripper) as servo steps, rounded and clipped to the servo's bounds. */
uint16_t arm_to_steps(const arm_servo_t *servo, float value);

/* Servo steps as a joint value. */
float arm_from_steps(const arm_servo_t *servo, float steps);

/* The boot self-test of the chain constants: forward kinematics at the recorded joint angles against the
 * tool positions recorded at export. Returns the number of failures; *worst the largest error [m]. */
int arm_kinematics_self_test(float *worst);

#endif
