/* Host test driver: feeds the out-of-tree controller firmware-typed states read from stdin, one line per
 * stabilizer tick, and prints what it commanded. Lines in:
 *   tick <n> <enable> <heartbeat> <px py pz> <vx vy vz> <qw qx qy qz> <gyro x y z deg/s> <sp x y z> <abs 0|1>
 *   selftest
 * Lines out: "<tick> <active> <fault> <controlMode> <f1> <f2> <f3> <f4> <stock calls>" or "selftest <0|1>". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "controller.h"
#include "host_registry.h"

extern const host_entry_t *host_params;
extern const host_entry_t *host_logs;
extern unsigned long stock_controller_calls;

static void *entry(const host_entry_t *table, const char *name)
{
    for (; table->name != 0; ++table) {
        if (strcmp(table->name, name) == 0) {
            return table->address;
        }
    }
    return 0;
}

int main(void)
{
    controllerOutOfTreeInit();
    uint8_t *enable = entry(host_params, "enable");
    uint32_t *heartbeat = entry(host_params, "heartbeat");
    const uint8_t *active = entry(host_logs, "active");
    const uint8_t *fault = entry(host_logs, "fault");
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "selftest", 8) == 0) {
            printf("selftest %d\n", controllerOutOfTreeTest() ? 1 : 0);
            continue;
        }
        unsigned tick, en, beat, absolute;
        state_t state = {0};
        sensorData_t sensors = {0};
        setpoint_t setpoint = {0};
        control_t control = {0};
        int n = sscanf(line, "tick %u %u %u %f %f %f %f %f %f %f %f %f %f %f %f %f %f %f %f %u", &tick, &en, &beat,
                       &state.position.x, &state.position.y, &state.position.z, &state.velocity.x, &state.velocity.y,
                       &state.velocity.z, &state.attitudeQuaternion.w, &state.attitudeQuaternion.x,
                       &state.attitudeQuaternion.y, &state.attitudeQuaternion.z, &sensors.gyro.x, &sensors.gyro.y,
                       &sensors.gyro.z, &setpoint.position.x, &setpoint.position.y, &setpoint.position.z, &absolute);
        if (n != 20) {
            fprintf(stderr, "bad line: %s", line);
            return 2;
        }
        *enable = (uint8_t)en;
        *heartbeat = beat;
        const stab_mode_t mode = absolute ? modeAbs : modeDisable;
        setpoint.mode.x = setpoint.mode.y = setpoint.mode.z = mode;
        controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        printf("%u %u %u %d %.9g %.9g %.9g %.9g %lu\n", tick, *active, *fault, (int)control.controlMode,
               control.normalizedForces[0], control.normalizedForces[1], control.normalizedForces[2],
               control.normalizedForces[3], stock_controller_calls);
        fflush(stdout);
    }
    return 0;
}
