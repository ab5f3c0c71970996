/* Host test driver: feeds the out-of-tree controller firmware-typed states read from stdin, one line per
 * stabilizer tick, and prints what it commanded. The control struct persists between ticks, as the
 * stabilizer's static one does. Lines in:
 *   tick <n> <enable> <heartbeat> <px py pz> <vx vy vz> <qw qx qy qz> <gyro x y z deg/s> <sp x y z> <mode> <sp thrust>
 *     (mode 1: x, y, z in modeAbs (a target position); 0: every mode disabled, the thrust as given (0 is the stop
 *     setpoint; else attitude and thrust); 2: x, y modeVelocity (sp x y as velocities), z modeAbs (cmd_hover,
 *     cflib's MotionCommander); 3: the supervisor's level-out (x, y disabled, roll and pitch modeAbs at 0, yaw
 *     modeVelocity at 0, z modeAbs); 4: x, y, z modeVelocity)
 *   param <name> <value>                      set a robo_rl parameter
 *   supervisor <canFly 0|1> <armed 0|1> <flying 0|1>
 *   init                                      controllerOutOfTreeInit (the firmware switching to it)
 *   controller <oot|pid>                      stabilizer.controller set in flight: as stabilizer.c, the new
 *                                             controller's init, then its update each tick (oot = init)
 *   selftest
 * Lines out: "<tick> <active> <fault> <controlMode> <v1> <v2> <v3> <v4> <stock calls>" (calls of the stock PID
 * into the stabilizer's control struct, not the app's restarts of it into its own), v = the four
 * normalizedForces in force mode, roll pitch yaw thrust in legacy mode, active as log robo_rl.active reads;
 * or "selftest <0|1>". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoconf.h"
#include "controller.h"
#include "controller_pid.h"
#include "host_registry.h"
#include "log.h"
#include "param.h"

extern const host_entry_t *host_params;
extern const host_entry_t *host_logs;
extern unsigned long stock_controller_calls;
extern const control_t *host_stabilizer_control;
extern bool host_supervisor_can_fly, host_supervisor_armed, host_supervisor_flying;

static const host_entry_t *entry(const host_entry_t *table, const char *name)
{
    for (; table->name != 0; ++table) {
        if (strcmp(table->name, name) == 0) {
            return table;
        }
    }
    fprintf(stderr, "no such variable: %s\n", name);
    exit(2);
}

static void set_param(const char *name, double value)
{
    const host_entry_t *param = entry(host_params, name);
    if (param->size == PARAM_UINT8) {
        *(uint8_t *)param->address = (uint8_t)value;
    } else if (param->size == PARAM_UINT32) {
        *(uint32_t *)param->address = (uint32_t)value;
    } else {
        *(float *)param->address = (float)value;
    }
}

static ControllerType selected = ControllerTypeOot;

ControllerType controllerGetType(void) { return selected; }

/* A log variable's value, read as the log subsystem does (through its getter where it is logged by function). */
static uint8_t log_uint8(const host_entry_t *log, uint32_t tick)
{
    if (log->size & LOG_BY_FUNCTION) {
        const logByFunction_t *by = log->address;
        return by->acquireUInt8(tick, by->data);
    }
    return *(const uint8_t *)log->address;
}

/* The estimator's Euler angles [deg] from the quaternion; pitch in the firmware's legacy sign (nose up). */
static attitude_t euler_degrees(const quaternion_t q)
{
    const double deg = 180.0 / 3.14159265358979323846;
    attitude_t a = {0};
    a.roll = (float)(deg * atan2(2.0 * (q.w * q.x + q.y * q.z), 1.0 - 2.0 * (q.x * q.x + q.y * q.y)));
    double s = 2.0 * (q.w * q.y - q.z * q.x);
    s = s > 1.0 ? 1.0 : (s < -1.0 ? -1.0 : s);
    a.pitch = (float)(-deg * asin(s));
    a.yaw = (float)(deg * atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z)));
    return a;
}

int main(void)
{
    controllerOutOfTreeInit();
    const host_entry_t *active = entry(host_logs, "active");
    const uint8_t *fault = entry(host_logs, "fault")->address;
    static control_t control; /* stabilizer.c's is static too: fields not written keep their bits */
    host_stabilizer_control = &control;
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "selftest", 8) == 0) {
            printf("selftest %d\n", controllerOutOfTreeTest() ? 1 : 0);
            continue;
        }
        if (strncmp(line, "init", 4) == 0 || strncmp(line, "controller oot", 14) == 0) {
            selected = ControllerTypeOot;
            controllerOutOfTreeInit();
            continue;
        }
        if (strncmp(line, "controller pid", 14) == 0) {
            selected = ControllerTypePID;
            controllerPidInit();
            continue;
        }
        char name[64];
        double value;
        unsigned can_fly, armed, flying;
        if (sscanf(line, "param %63s %lf", name, &value) == 2) {
            set_param(name, value);
            continue;
        }
        if (sscanf(line, "supervisor %u %u %u", &can_fly, &armed, &flying) == 3) {
            host_supervisor_can_fly = can_fly, host_supervisor_armed = armed, host_supervisor_flying = flying;
            continue;
        }
        unsigned tick, en, beat, kind;
        state_t state = {0};
        sensorData_t sensors = {0};
        setpoint_t setpoint = {0};
        int n = sscanf(line, "tick %u %u %u %f %f %f %f %f %f %f %f %f %f %f %f %f %f %f %f %u %f", &tick, &en, &beat,
                       &state.position.x, &state.position.y, &state.position.z, &state.velocity.x, &state.velocity.y,
                       &state.velocity.z, &state.attitudeQuaternion.w, &state.attitudeQuaternion.x,
                       &state.attitudeQuaternion.y, &state.attitudeQuaternion.z, &sensors.gyro.x, &sensors.gyro.y,
                       &sensors.gyro.z, &setpoint.position.x, &setpoint.position.y, &setpoint.position.z, &kind,
                       &setpoint.thrust);
        if (n != 21) {
            fprintf(stderr, "bad line: %s", line);
            return 2;
        }
        state.attitude = euler_degrees(state.attitudeQuaternion);
        set_param("enable", en);
        set_param("heartbeat", beat);
        if (kind == 1) {
            setpoint.mode.x = setpoint.mode.y = setpoint.mode.z = modeAbs;
        } else if (kind == 2 || kind == 4) { /* velocities in the position fields' place, as the decoders give them */
            setpoint.velocity.x = setpoint.position.x, setpoint.velocity.y = setpoint.position.y;
            setpoint.mode.x = setpoint.mode.y = modeVelocity;
            setpoint.mode.z = kind == 2 ? modeAbs : modeVelocity;
            if (kind == 4) {
                setpoint.velocity.z = setpoint.position.z;
            }
        } else if (kind == 3) {
            setpoint.mode.z = modeAbs;
            setpoint.mode.roll = setpoint.mode.pitch = modeAbs;
            setpoint.mode.yaw = modeVelocity;
        } else if (kind != 0) {
            fprintf(stderr, "bad setpoint mode %u: %s", kind, line);
            return 2;
        }
        if (selected == ControllerTypeOot) {
            controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        } else {
            controllerPid(&control, &setpoint, &sensors, &state, tick);
        }
        if (control.controlMode == controlModeLegacy) {
            printf("%u %u %u %d %d %d %d %.9g %lu\n", tick, log_uint8(active, tick), *fault, (int)control.controlMode,
                   control.roll, control.pitch, control.yaw, control.thrust, stock_controller_calls);
        } else {
            printf("%u %u %u %d %.9g %.9g %.9g %.9g %lu\n", tick, log_uint8(active, tick), *fault, (int)control.controlMode,
                   control.normalizedForces[0], control.normalizedForces[1], control.normalizedForces[2],
                   control.normalizedForces[3], stock_controller_calls);
        }
        fflush(stdout);
    }
    return 0;
}
