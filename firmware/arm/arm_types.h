/* Types of the generated arm configuration (arm_config.h, written per bundle by robo_rl.export.arm_firmware). */
#ifndef ARM_TYPES_H
#define ARM_TYPES_H
#include <stdint.h>

/* One body on the chain from the world to the tool: its pose in its parent and, if it moves, its hinge. */
typedef struct {
    float pos[3];
    float rot[9]; /* row-major rotation of the body frame in its parent's */
    uint8_t has_joint;
    float axis[3];   /* hinge axis in the body frame (unit) */
    float anchor[3]; /* hinge anchor in the body frame */
} arm_link_t;

/* One servo: steps = zero_steps + steps_per_unit * value (rad, or m of finger opening for the gripper). */
typedef struct {
    uint8_t id;
    float zero_steps;
    float steps_per_unit;
    uint16_t min_steps; /* goals are clipped to [min_steps, max_steps]; a present position outside */
    uint16_t max_steps; /* [min - margin, max + margin] is bad servo data */
} arm_servo_t;

#endif
