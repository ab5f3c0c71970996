/* Instructions per stabilizer tick of the app while the policy flies, on the emulated STM32F405 (make pid-cost:
 * QEMU's netduinoplus2 under -icount, where SysTick counts executed instructions; CI has no firmware checkout).
 * A vehicle hovers at its target; after 100 ticks, the next 100 are timed: policy ticks (one policy step each)
 * and the others (the PID's restart on its even attitude-loop ticks, nothing on odd ones). Prints key=value
 * lines over semihosting. */
#include APP_SOURCE

void semihost_write(const char *text);

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define CALIBRATION_LOOPS 200000u

ControllerType controllerGetType(void) { return ControllerTypeOot; }
bool supervisorIsArmed(void) { return true; }
bool supervisorCanFly(void) { return true; }
bool supervisorIsFlying(void) { return true; }

static void print_uint(const char *key, uint32_t value)
{
    char text[64];
    int n = 0;
    while (key[n] != '\0' && n < 40) {
        text[n] = key[n];
        ++n;
    }
    text[n++] = '=';
    char digits[12];
    int d = 0;
    do {
        digits[d++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value != 0u);
    while (d > 0) {
        text[n++] = digits[--d];
    }
    text[n++] = '\n';
    text[n] = '\0';
    semihost_write(text);
}

static uint32_t now(void) { return SYST_CVR; }
static uint32_t since(uint32_t start) { return (start - now()) & 0xFFFFFFu; } /* SysTick counts down */

int main(void)
{
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0u;
    SYST_CSR = 5u; /* processor clock, enabled, no interrupt */
    uint32_t loops = CALIBRATION_LOOPS;
    uint32_t start = now();
    __asm volatile("1: subs %0, %0, #1\n bne 1b\n" : "+r"(loops)); /* two instructions a loop */
    const uint64_t calibration = since(start);

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
        start = now();
        controllerOutOfTree(&control, &setpoint, &sensors, &state, tick);
        const uint32_t spent = since(start);
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
    const uint64_t scale = 2u * CALIBRATION_LOOPS;
    print_uint("policy_flying", active && fault == 0u);
    print_uint("policy_tick_instructions", (uint32_t)(policy_ticks * scale / calibration / policy_count));
    print_uint("even_tick_instructions", (uint32_t)(other_even * scale / calibration / even_count));
    print_uint("odd_tick_instructions", (uint32_t)(other_odd * scale / calibration / odd_count));
    return 0;
}
