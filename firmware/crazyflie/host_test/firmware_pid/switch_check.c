/* The app linked on the host with crazyflie-firmware's own stock PID (make pid-check; CI has no firmware
 * checkout): stabilizer.controller switched to the PID while the policy flies.
 *
 * Scenario: the PID climbs for 1 s from 0.5 m below its target with a 4-degree roll and body rates of
 * 20 / -15 / 10 deg/s (its integrators wind up), the policy takes over at the target and flies 0.5 s, then
 * the controller switches to the PID as stabilizer.c does (controllerInit: the PID's init, then controllerPid
 * every tick), before an odd tick. Reference: a PID that never flew (a child process forked before anything
 * ran), restarted on the same state as a hand-over does, then run on the same ticks. Prints both for the first
 * ticks and exits 0 when every tick's roll, pitch, yaw and thrust agree, the first tick's roll, pitch and yaw
 * aside (control_t is the stabilizer's: on an odd tick the PID writes only its mode and thrust). */
#include APP_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SWITCH_TICK 1501u
#define TICKS_AFTER 300

static ControllerType selected = ControllerTypeOot;
ControllerType controllerGetType(void) { return selected; }
bool supervisorIsArmed(void) { return true; }
bool supervisorCanFly(void) { return true; }
bool supervisorIsFlying(void) { return true; }

typedef struct { uint8_t active; int16_t roll, pitch, yaw; float thrust; } row_t;

/* A level vehicle at height z, rolled by roll_deg, with body rates gyro [deg/s] */
static void vehicle(state_t *state, sensorData_t *sensors, float z, float roll_deg, const float gyro[3])
{
    memset(state, 0, sizeof *state);
    memset(sensors, 0, sizeof *sensors);
    state->position.z = z;
    const float half = 0.5f * roll_deg * RR_DEG_TO_RAD;
    state->attitudeQuaternion.w = cosf(half);
    state->attitudeQuaternion.x = sinf(half);
    state->attitude.roll = roll_deg;
    sensors->gyro.x = gyro[0], sensors->gyro.y = gyro[1], sensors->gyro.z = gyro[2];
    sensors->acc.z = 1.0f;
}

static void fly(bool switched, row_t rows[TICKS_AFTER])
{
    static control_t control; /* the stabilizer's: static, fields not written keep their bits */
    static const float climb_rates[3] = {20.0f, -15.0f, 10.0f}, hover_rates[3] = {3.0f, -2.0f, 1.0f};
    state_t state;
    sensorData_t sensors;
    setpoint_t setpoint = {0};
    setpoint.mode.x = setpoint.mode.y = setpoint.mode.z = setpoint.mode.yaw = modeAbs;
    setpoint.position.z = 1.0f;
    controllerOutOfTreeInit();
    if (switched) {
        for (uint32_t tick = 1; tick < 1001u; ++tick) { /* not enabled: the PID climbs */
            vehicle(&state, &sensors, 0.5f, 4.0f, climb_rates);
            controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        }
        enable = 1;
        for (uint32_t tick = 1001u; tick < SWITCH_TICK; ++tick) { /* the policy flies at the target */
            ++heartbeat;
            vehicle(&state, &sensors, 1.0f, 1.0f, hover_rates);
            controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        }
        if (!(active && control.controlMode == controlModeForce)) {
            fprintf(stderr, "the policy did not fly before the switch (fault %u)\n", fault);
            exit(2);
        }
    } else {
        vehicle(&state, &sensors, 1.0f, 1.0f, hover_rates);
        static control_t scratch;
        pid_restart(&scratch, &setpoint, &sensors, &state);
    }
    selected = ControllerTypePID; /* stabilizer.c, updateStateEstimatorAndControllerTypes */
    controllerPidInit();
    for (int k = 0; k < TICKS_AFTER; ++k) {
        vehicle(&state, &sensors, 1.0f, 1.0f, hover_rates);
        controllerPid(&control, &setpoint, &sensors, &state, SWITCH_TICK + (uint32_t)k);
        rows[k] = (row_t){active_now(SWITCH_TICK + (uint32_t)k, 0), control.roll, control.pitch, control.yaw,
                          control.thrust};
    }
}

int main(void)
{
    static row_t switched[TICKS_AFTER], fresh[TICKS_AFTER];
    int pipe_ends[2];
    if (pipe(pipe_ends) != 0) {
        return 2;
    }
    const pid_t child = fork();
    if (child == 0) { /* the PID's static state as at boot */
        fly(false, fresh);
        return write(pipe_ends[1], fresh, sizeof fresh) == (ssize_t)sizeof fresh ? 0 : 2;
    }
    fly(true, switched);
    int status = 0;
    if (child < 0 || read(pipe_ends[0], fresh, sizeof fresh) != (ssize_t)sizeof fresh || waitpid(child, &status, 0) < 0) {
        return 2;
    }
    printf("tick  | after the switch: active roll pitch yaw thrust | a PID that never flew: roll pitch yaw thrust\n");
    int differing = 0;
    for (int k = 0; k < TICKS_AFTER; ++k) {
        const row_t *a = &switched[k], *b = &fresh[k];
        const bool same = a->thrust == b->thrust && a->active == 0 &&
                          (k == 0 || (a->roll == b->roll && a->pitch == b->pitch && a->yaw == b->yaw));
        differing += !same;
        if (k < 12 || !same) {
            printf("%5u | %u %6d %6d %6d %8.1f | %6d %6d %6d %8.1f%s\n", SWITCH_TICK + (unsigned)k, a->active, a->roll,
                   a->pitch, a->yaw, a->thrust, b->roll, b->pitch, b->yaw, b->thrust, same ? "" : "  DIFFERS");
        }
    }
    printf("%d of %d ticks differ from a PID that never flew\n", differing, TICKS_AFTER);
    return differing == 0 ? 0 : 1;
}
