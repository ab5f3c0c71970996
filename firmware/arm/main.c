/* The arm app: an exported arm policy next to an SO-ARM100's Feetech servo bus.
 *
 * Boot: self-test (the policy's recorded pairs and the chain constants), servos found, goals set to where
 * the servos are, torque on (never with a failed self-test), a BOOT frame to the host. Then per control
 * tick, clocked by the host's INPUTS frames (or by the host timeout when they stop): read every servo's
 * position and speed, decide (arm_control.c), write the goals in one SYNC_WRITE, send TELEMETRY. */
#include <math.h>
#include <string.h>

#include "arm_control.h"
#include "board.h"
#include "host_link.h"
#include "policy.h"
#include "servo_bus.h"

#define READ_SIZE 4u /* present position and present speed, consecutive registers */
#define READ_REPLY_SIZE (READ_SIZE + FEETECH_PACKET_OVERHEAD)

static feetech_parser_t bus_parser;
static host_parser_t host_parser;
static uint32_t bus_ticks; /* SysTick ticks spent building and parsing packets this tick */

/* Send a request and collect the reply's bytes until `expected` arrived or the bus timeout passed; then
 * parse them (the request's own echo, which single-wire adapters may return, is skipped). 1 if servo `id`
 * answered with `size` parameter bytes. */
static int transact(const uint8_t *request, size_t request_size, uint8_t id, uint8_t size)
{
    uint8_t received[2u * (READ_REPLY_SIZE + 16u) + 16u];
    size_t count = 0;
    bus_flush_input();
    bus_write(request, request_size);
    const uint32_t start = board_ticks();
    const uint32_t limit = ARM_BUS_TIMEOUT_US * (BOARD_SYSCLK_HZ / 1000000u);
    const size_t expected = (size_t)size + FEETECH_PACKET_OVERHEAD;
    while (count < sizeof received && board_ticks() - start < limit) {
        uint8_t byte;
        if (bus_read_byte(&byte)) {
            received[count++] = byte;
            const int echoed = count >= request_size && memcmp(received, request, request_size) == 0;
            if (count >= expected + (echoed ? request_size : 0u)) {
                break;
            }
        }
    }
    const uint32_t parse_start = board_ticks();
    int ok = 0;
    feetech_parser_reset(&bus_parser);
    for (size_t i = 0; i < count && !ok; ++i) {
        if (feetech_parser_push(&bus_parser, received[i])) {
            const int echo = bus_parser.error == request[4] && bus_parser.count == request_size - FEETECH_PACKET_OVERHEAD;
            ok = !echo && bus_parser.id == id && bus_parser.count == size;
        }
    }
    bus_ticks += board_ticks() - parse_start;
    return ok;
}

/* Every servo's position and speed into the tick's input; the reason if one failed. */
static uint8_t read_servos(arm_tick_input_t *in)
{
    uint8_t reason = ARM_REASON_OK;
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        const arm_servo_t *servo = &arm_servos[s];
        uint8_t request[8];
        const uint32_t build_start = board_ticks();
        const size_t n = feetech_read(request, servo->id, FEETECH_REG_PRESENT_POSITION, READ_SIZE);
        bus_ticks += board_ticks() - build_start;
        if (!transact(request, n, servo->id, READ_SIZE)) {
            return ARM_REASON_SERVO_TIMEOUT;
        }
        if (bus_parser.error != 0u) {
            reason = ARM_REASON_SERVO_ERROR;
        }
        const uint8_t *p = bus_parser.parameters;
        const int32_t position = feetech_decode_signed((uint16_t)(p[0] | (p[1] << 8)), FEETECH_REG_PRESENT_POSITION_SIGN_BIT);
        const int32_t speed = feetech_decode_signed((uint16_t)(p[2] | (p[3] << 8)), FEETECH_REG_PRESENT_SPEED_SIGN_BIT);
        if (position < (int32_t)servo->min_steps - ARM_SERVO_MARGIN_STEPS
            || position > (int32_t)servo->max_steps + ARM_SERVO_MARGIN_STEPS) {
            return ARM_REASON_BAD_SERVO_DATA;
        }
        const float value = arm_from_steps(servo, (float)position);
        if (s < ARM_JOINTS) {
            in->q[s] = value;
            in->qdot[s] = (float)speed / servo->steps_per_unit;
        } else {
            in->opening = value;
        }
    }
    return reason;
}

static void write_goals(const float command[ARM_JOINTS], float gripper)
{
    const uint32_t start = board_ticks();
    uint8_t ids[ARM_SERVOS], data[2u * ARM_SERVOS], packet[FEETECH_MAX_PARAMETERS + FEETECH_PACKET_OVERHEAD];
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        const uint16_t steps = arm_to_steps(&arm_servos[s], s < ARM_JOINTS ? command[s] : gripper);
        ids[s] = arm_servos[s].id;
        data[2u * s] = (uint8_t)(steps & 0xFFu);
        data[2u * s + 1u] = (uint8_t)(steps >> 8);
    }
    const size_t n = feetech_sync_write(packet, FEETECH_REG_GOAL_POSITION, 2u, ids, data, ARM_SERVOS);
    bus_ticks += board_ticks() - start;
    bus_write(packet, n);
}

static void write_torque(int enabled)
{
    uint8_t ids[ARM_SERVOS], data[ARM_SERVOS], packet[3u * ARM_SERVOS + 2u + FEETECH_PACKET_OVERHEAD];
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        ids[s] = arm_servos[s].id;
        data[s] = (uint8_t)(enabled != 0);
    }
    bus_write(packet, feetech_sync_write(packet, FEETECH_REG_TORQUE_ENABLE, 1u, ids, data, ARM_SERVOS));
}

static void put_u32(uint8_t *out, uint32_t v)
{
    memcpy(out, &v, sizeof v); /* Cortex-M4 is little-endian, as the link */
}

static void send_telemetry(uint32_t tick, const arm_tick_output_t *out, uint32_t control_ticks)
{
    static uint8_t sequence;
    uint8_t payload[HOST_TELEMETRY_SIZE], frame[HOST_TELEMETRY_SIZE + HOST_FRAME_OVERHEAD];
    float joints[HOST_JOINT_SLOTS] = {0};
    memset(payload, 0, sizeof payload);
    memcpy(joints, out->command, sizeof out->command);
    joints[ARM_JOINTS] = out->gripper;
    put_u32(&payload[HOST_TELEMETRY_TICK], tick);
    payload[HOST_TELEMETRY_STATE] = out->state;
    payload[HOST_TELEMETRY_REASON] = out->reason;
    payload[HOST_TELEMETRY_POLICY_STATUS] = out->policy_status;
    memcpy(&payload[HOST_TELEMETRY_ACTION], out->action, sizeof out->action);
    memcpy(&payload[HOST_TELEMETRY_JOINT_COMMAND], joints, sizeof joints);
    put_u32(&payload[HOST_TELEMETRY_CONTROL_TICKS], control_ticks);
    put_u32(&payload[HOST_TELEMETRY_BUS_TICKS], bus_ticks);
    host_write(frame, host_frame(frame, HOST_MSG_TELEMETRY, sequence++, payload, HOST_TELEMETRY_SIZE));
}

/* SysTick ticks of HOST_CALIBRATION_LOOPS two-instruction iterations: the host turns tick counts into
 * instructions with it (under QEMU -icount exactly; on silicon, cycles in instruction units). */
static uint32_t calibration_ticks(void)
{
    uint32_t loops = HOST_CALIBRATION_LOOPS;
    const uint32_t start = board_ticks();
    __asm volatile("1: subs %0, %0, #1\n bne 1b\n" : "+r"(loops));
    return board_ticks() - start;
}

static void send_boot(int self_test_failures, unsigned servos_found, float worst)
{
    uint8_t payload[HOST_BOOT_SIZE], frame[HOST_BOOT_SIZE + HOST_FRAME_OVERHEAD];
    payload[HOST_BOOT_SELF_TEST_FAILURES] = (uint8_t)(self_test_failures > 255 ? 255 : self_test_failures);
    payload[HOST_BOOT_SERVOS_FOUND] = (uint8_t)servos_found;
    put_u32(&payload[HOST_BOOT_SELF_TEST_MAX_ERROR_E9], (uint32_t)fminf(worst * 1e9f, 4e9f));
    put_u32(&payload[HOST_BOOT_CALIBRATION_TICKS], calibration_ticks());
    host_write(frame, host_frame(frame, HOST_MSG_BOOT, 0u, payload, HOST_BOOT_SIZE));
}

/* Wait for the next INPUTS frame, up to the host timeout; 1 and the inputs if one came. */
static int wait_for_inputs(arm_tick_input_t *in)
{
    const uint32_t start = board_millis();
    while (board_millis() - start < ARM_HOST_TIMEOUT_MS) {
        uint8_t byte;
        if (host_read_byte(&byte) && host_parser_push(&host_parser, byte)
            && host_parser.type == HOST_MSG_INPUTS && host_parser.length == HOST_INPUTS_SIZE) {
            memcpy(in->object, &host_parser.payload[HOST_INPUTS_OBJECT_POSITION], sizeof in->object);
            memcpy(in->goal, &host_parser.payload[HOST_INPUTS_GOAL], sizeof in->goal);
            in->flags = host_parser.payload[HOST_INPUTS_FLAGS];
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    board_init();
    float worst_policy = 0.0f, worst_chain = 0.0f;
    const int failures = policy_self_test(&worst_policy) + arm_kinematics_self_test(&worst_chain);
    arm_controller_t controller;
    arm_controller_init(&controller, failures == 0);
    host_parser_reset(&host_parser);

    arm_tick_input_t in;
    memset(&in, 0, sizeof in);
    unsigned found = 0;
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        uint8_t request[8];
        found += transact(request, feetech_read(request, arm_servos[s].id, FEETECH_REG_PRESENT_POSITION, READ_SIZE),
                          arm_servos[s].id, READ_SIZE);
    }
    int torque_on = 0;
    if (failures == 0 && found == ARM_SERVOS && read_servos(&in) == ARM_REASON_OK) {
        write_goals(in.q, in.opening); /* torque on holds the arm where it is, no jump to a stale goal */
        write_torque(1);
        torque_on = 1;
    }
    send_boot(failures, found, fmaxf(worst_policy, worst_chain));

    for (uint32_t tick = 0;; ++tick) {
        in.host_fresh = (uint8_t)wait_for_inputs(&in);
        in.host_seen |= in.host_fresh;
        bus_ticks = 0;
        in.servo_reason = read_servos(&in);
        arm_tick_output_t out;
        const uint32_t control_start = board_ticks();
        arm_controller_tick(&controller, &in, &out);
        const uint32_t control_ticks = board_ticks() - control_start;
        if (out.write_goals) {
            write_goals(out.command, out.gripper);
        }
        if (out.torque != torque_on) {
            write_torque(out.torque);
            torque_on = out.torque;
        }
        send_telemetry(tick, &out, control_ticks);
    }
}
