/* Instructions per stabilizer tick of the app while the policy flies, on the emulated STM32F405 (make pid-cost:
 * QEMU's netduinoplus2 under -icount, where SysTick counts executed instructions; CI has no firmware checkout).
 * A vehicle hovers at its target; after 100 ticks, the next 100 are timed: policy ticks (one policy step each)
 * and the others (the PID's restart on its even attitude-loop ticks, nothing on odd ones). Prints key=value
 * lines over semihosting. */
#include APP_SOURCE

#include "../../../cortex_m4/instruction_clock.h"

void semihost_print_uint(const char *key, uint64_t value); /* firmware/cortex_m4/semihost.c */

ControllerType controllerGetType(void) { return ControllerTypeOot; }
bool supervisorIsArmed(void) { return true; }
bool supervisorCanFly(void) { return true; }
bool supervisorIsFlying(void) { return true; }

int main(void)
{
    const uint32_t calibration = clock_start_and_calibrate();

    static control_t control;
    static state_t state;
    static sensorData_t sensors;
    static setpoint_t setpoint;
    setpoint.mode.x = setpoint.mode.y = setpoint.mode.z = setpoint.mode.yaw = modeAbs;
    setpoint.position.z = 1.0f;
    state.position.z = 1.0f;
    state.attitudeQuaternion.w = 1.0f;
    sensors.gyro.x = 3.0f;
    sensors.acc.z = 1.0f;
    controllerOutOfTreeInit();
    enable = 1;
    uint64_t policy_ticks = 0, other_even = 0, other_odd = 0;
    uint32_t policy_count = 0, even_count = 0, odd_count = 0;
    for (uint32_t tick = 1; tick <= 200u; ++tick) {
        ++heartbeat;
        const uint32_t due = next_policy_tick;
        const uint32_t start = clock_ticks();
        controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        const uint32_t spent = clock_elapsed(start);
        if (tick <= 100u) {
            continue;
        }
        if (tick == due) {
            policy_ticks += spent, ++policy_count;
        } else if (tick % 2u == 0u) {
            other_even += spent, ++even_count;
        } else {
            other_odd += spent, ++odd_count;
        }
    }
    semihost_print_uint("policy_flying", active && fault == 0u);
    semihost_print_uint("policy_tick_instructions", clock_instructions(policy_ticks, calibration) / policy_count);
    semihost_print_uint("even_tick_instructions", clock_instructions(other_even, calibration) / even_count);
    semihost_print_uint("odd_tick_instructions", clock_instructions(other_odd, calibration) / odd_count);
    return 0;
}
