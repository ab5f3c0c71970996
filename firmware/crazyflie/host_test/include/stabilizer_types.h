/* STAND-IN for crazyflie-firmware's src/modules/interface/stabilizer_types.h, host tests only: the
 * types and fields robo_rl_controller.c uses, with the firmware's names and units (gyro in deg/s). */
#ifndef STABILIZER_TYPES_H
#define STABILIZER_TYPES_H
#include <stdbool.h>
#include <stdint.h>

typedef uint32_t stabilizerStep_t;
typedef struct { float x, y, z; } Axis3f;
typedef struct { uint32_t timestamp; float x, y, z; } point_t;
typedef point_t velocity_t;
typedef struct { uint32_t timestamp; float x, y, z, w; } quaternion_t;
typedef struct { uint32_t timestamp; float roll, pitch, yaw; } attitude_t; /* degrees, legacy pitch sign */
typedef struct { Axis3f acc; Axis3f gyro; } sensorData_t;
typedef struct {
    attitude_t attitude;
    quaternion_t attitudeQuaternion;
    point_t position;
    velocity_t velocity;
} state_t;
typedef enum { modeDisable = 0, modeAbs, modeVelocity } stab_mode_t;
typedef struct { stab_mode_t x, y, z, roll, pitch, yaw, quat; } setpoint_mode_t;
typedef struct {
    uint32_t timestamp;
    attitude_t attitude;      /* deg */
    attitude_t attitudeRate;  /* deg/s */
    quaternion_t attitudeQuaternion;
    float thrust;             /* legacy thrust units, used where mode.z is modeDisable */
    point_t position;
    velocity_t velocity;
    setpoint_mode_t mode;
} setpoint_t;
typedef enum { controlModeLegacy = 0, controlModeForceTorque = 1, controlModeForce = 2 } control_mode_t;
typedef struct {
    union {
        struct { int16_t roll, pitch, yaw; float thrust; };
        float normalizedForces[4];
    };
    control_mode_t controlMode;
} control_t;

#define RATE_MAIN_LOOP 1000
#define ATTITUDE_RATE 500
#define POSITION_RATE 100
#define RATE_DO_EXECUTE(RATE_HZ, TICK) ((TICK % (RATE_MAIN_LOOP / RATE_HZ)) == 0)
#endif
