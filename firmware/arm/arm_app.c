/* The arm app: an exported arm policy next to an SO-ARM100's Feetech servo bus (arm_app.h). */
#include "arm_app.h"

#include <math.h>
#include <string.h>

#include "arm_control.h"
#include "board.h"
#include "host_link.h"
#include "policy.h"
#include "servo_bus.h"

_Static_assert(ARM_JOINTS + 1 <= HOST_JOINT_SLOTS, "TELEMETRY carries HOST_JOINT_SLOTS joint commands");

#define READ_SIZE 4u /* present position and present speed, consecutive registers */
#define READ_REPLY_SIZE (READ_SIZE + FEETECH_PACKET_OVERHEAD)

static feetech_parser_t bus_parser;
static host_parser_t host_parser;
static uint32_t bus_ticks; /* SysTick ticks spent building and parsing packets this tick */
static arm_controller_t controller;
static arm_tick_input_t tick_input; /* what the board knows, kept between ticks */
static int torque_on;
static uint32_t ticks_run;
static int32_t previous_reading[ARM_SERVOS]; /* the last tick's present positions [steps], confirmed or not */
static int have_previous_reading;

/* Send a request and collect the answers' bytes until every servo of ids[0..count) answered or the bus timeout
 * passed; then parse them, past the request's own echo if the adapter returned one (single-wire adapters
 * may). Each answer must come from the next id in order with `size` parameter bytes; answered[] gets their
 * parameters and errors[] their error bytes. Returns how many servos answered before the first that did not. */
static unsigned transact(const uint8_t *request, size_t request_size, const uint8_t *ids, unsigned count,
                         uint8_t size, uint8_t answered[][READ_SIZE], uint8_t *errors)
{
    uint8_t received[ARM_SERVOS * READ_REPLY_SIZE + 32u];
    size_t n = 0;
    bus_flush_input();
    bus_write(request, request_size);
    const uint32_t start = board_ticks();
    const uint32_t limit = ARM_BUS_TIMEOUT_US * (BOARD_SYSCLK_HZ / 1000000u);
    const size_t expected = (size_t)count * ((size_t)size + FEETECH_PACKET_OVERHEAD);
    int echoed = 0;
    while (n < sizeof received && board_ticks() - start < limit) {
        uint8_t byte;
        if (bus_read_byte(&byte)) {
            received[n++] = byte;
            echoed = n >= request_size && memcmp(received, request, request_size) == 0;
            if (n >= expected + (echoed ? request_size : 0u)) {
                break;
            }
        }
    }
    const uint32_t parse_start = board_ticks();
    unsigned got = 0;
    feetech_parser_reset(&bus_parser);
    for (size_t i = echoed ? request_size : 0u; i < n && got < count; ++i) {
        if (feetech_parser_push(&bus_parser, received[i])) {
            if (bus_parser.id != ids[got] || bus_parser.count != size) {
                break;
            }
            memcpy(answered[got], bus_parser.parameters, size);
            errors[got++] = bus_parser.error;
        }
    }
    bus_ticks += board_ticks() - parse_start;
    return got;
}

/* One SYNC_READ of every servo's present position and speed; how many answered, in order. */
static unsigned sync_read_servos(uint8_t answered[][READ_SIZE], uint8_t *errors)
{
    uint8_t ids[ARM_SERVOS], request[ARM_SERVOS + 2u + FEETECH_PACKET_OVERHEAD];
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        ids[s] = arm_servos[s].id;
    }
    const uint32_t build_start = board_ticks();
    const size_t n = feetech_sync_read(request, FEETECH_REG_PRESENT_POSITION, READ_SIZE, ids, ARM_SERVOS);
    bus_ticks += board_ticks() - build_start;
    return transact(request, n, ids, ARM_SERVOS, READ_SIZE, answered, errors);
}

/* Every servo's position and speed into the tick's input, or a reason and the input left as it was: a servo
 * that does not answer, a position outside the calibrated travel, or an arm joint's that the previous tick's
 * reading does not confirm (farther from it than a servo turns in a tick, or no reading then): an 8-bit
 * checksum passes one corrupted packet in 256, two readings agreeing by chance never. The gripper's reading
 * only enters the observation, so it is not checked that way. A new episode (a simulated scene put back)
 * waives the check once. */
static uint8_t read_servos(arm_tick_input_t *in, int new_episode)
{
    int32_t position[ARM_SERVOS], speed[ARM_SERVOS];
    uint8_t reason = ARM_REASON_OK;
    const int confirmable = have_previous_reading;
    have_previous_reading = 0;
    uint8_t answered[ARM_SERVOS][READ_SIZE], errors[ARM_SERVOS];
    if (sync_read_servos(answered, errors) != ARM_SERVOS) {
        return ARM_REASON_SERVO_TIMEOUT;
    }
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        const arm_servo_t *servo = &arm_servos[s];
        if (errors[s] != 0u) {
            reason = ARM_REASON_SERVO_ERROR;
        }
        const uint8_t *p = answered[s];
        position[s] = feetech_decode_signed((uint16_t)(p[0] | (p[1] << 8)), FEETECH_REG_PRESENT_POSITION_SIGN_BIT);
        speed[s] = feetech_decode_signed((uint16_t)(p[2] | (p[3] << 8)), FEETECH_REG_PRESENT_SPEED_SIGN_BIT);
        /* the fingers may open past their range under contact: a quarter of their travel is allowed them */
        const int32_t margin = s < ARM_JOINTS ? ARM_SERVO_MARGIN_STEPS
                                              : (int32_t)(servo->max_steps - servo->min_steps) / 4;
        if (position[s] < (int32_t)servo->min_steps - margin || position[s] > (int32_t)servo->max_steps + margin) {
            return ARM_REASON_BAD_SERVO_DATA;
        }
    }
    int confirmed = confirmable || new_episode;
    for (unsigned s = 0; s < ARM_JOINTS && confirmable && !new_episode; ++s) {
        const int32_t moved = position[s] - previous_reading[s];
        confirmed &= moved <= (int32_t)ARM_SERVO_MAX_STEPS_PER_TICK && moved >= -(int32_t)ARM_SERVO_MAX_STEPS_PER_TICK;
    }
    memcpy(previous_reading, position, sizeof previous_reading);
    have_previous_reading = 1;
    if (!confirmed) {
        return ARM_REASON_BAD_SERVO_DATA;
    }
    for (unsigned s = 0; s < ARM_SERVOS; ++s) {
        const float value = arm_from_steps(&arm_servos[s], (float)position[s]);
        if (s < ARM_JOINTS) {
            in->q[s] = value;
            in->qdot[s] = (float)speed[s] / arm_servos[s].steps_per_unit;
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
    put_u32(&payload[HOST_TELEMETRY_STACK_BYTES], board_stack_high_water());
    host_write(frame, host_frame(frame, HOST_MSG_TELEMETRY, sequence++, payload, HOST_TELEMETRY_SIZE));
}

static void send_boot(int self_test_failures, unsigned servos_found, float worst)
{
    uint8_t payload[HOST_BOOT_SIZE], frame[HOST_BOOT_SIZE + HOST_FRAME_OVERHEAD];
    payload[HOST_BOOT_SELF_TEST_FAILURES] = (uint8_t)(self_test_failures > 255 ? 255 : self_test_failures);
    payload[HOST_BOOT_SERVOS_FOUND] = (uint8_t)servos_found;
    put_u32(&payload[HOST_BOOT_SELF_TEST_MAX_ERROR_E9], (uint32_t)fminf(worst * 1e9f, 4e9f));
    put_u32(&payload[HOST_BOOT_CALIBRATION_TICKS], board_calibration_ticks(HOST_CALIBRATION_LOOPS));
    host_write(frame, host_frame(frame, HOST_MSG_BOOT, 0u, payload, HOST_BOOT_SIZE));
}

static void take_inputs(arm_tick_input_t *in, uint8_t new_episode)
{
    memcpy(in->object, &host_parser.payload[HOST_INPUTS_OBJECT_POSITION], sizeof in->object);
    memcpy(in->goal, &host_parser.payload[HOST_INPUTS_GOAL], sizeof in->goal);
    /* a NEW_EPISODE in a frame passed over still starts the episode */
    in->flags = (uint8_t)(host_parser.payload[HOST_INPUTS_FLAGS] | new_episode);
}

static int inputs_completed(uint8_t byte)
{
    return host_parser_push(&host_parser, byte) && host_parser.type == HOST_MSG_INPUTS
        && host_parser.length == HOST_INPUTS_SIZE;
}

/* Wait for an INPUTS frame, up to the host timeout; 1 and the inputs if one came. Frames that queued up
 * (a late or repeated one) are passed over for the newest: the tick acts on the latest data, never a tick
 * behind. */
static int wait_for_inputs(arm_tick_input_t *in)
{
    const uint32_t start = board_millis();
    uint8_t byte;
    while (board_millis() - start < ARM_HOST_TIMEOUT_MS) {
        if (host_read_byte(&byte) && inputs_completed(byte)) {
            take_inputs(in, 0u);
            while (host_read_byte(&byte)) { /* only what has already arrived: no waiting */
                if (inputs_completed(byte)) {
                    take_inputs(in, in->flags & HOST_FLAG_NEW_EPISODE);
                }
            }
            return 1;
        }
    }
    return 0;
}

void arm_app_boot(void)
{
    float worst_policy = 0.0f, worst_chain = 0.0f;
    const int failures = policy_self_test(&worst_policy) + arm_kinematics_self_test(&worst_chain);
    arm_controller_init(&controller, failures == 0);
    host_parser_reset(&host_parser);
    memset(&tick_input, 0, sizeof tick_input);
    ticks_run = 0;
    have_previous_reading = 0;
    uint8_t answered[ARM_SERVOS][READ_SIZE], errors[ARM_SERVOS];
    const unsigned found = sync_read_servos(answered, errors); /* in order: the first missing is the next id */
    torque_on = 0;
    if (failures == 0 && found == ARM_SERVOS && read_servos(&tick_input, 1) == ARM_REASON_OK) {
        write_goals(tick_input.q, tick_input.opening); /* torque on holds the arm where it is, no jump to a stale goal */
        write_torque(1);
        torque_on = 1;
    }
    send_boot(failures, found, fmaxf(worst_policy, worst_chain));
}

void arm_app_tick(void)
{
    tick_input.host_fresh = (uint8_t)wait_for_inputs(&tick_input);
    tick_input.host_seen |= tick_input.host_fresh;
    bus_ticks = 0;
    tick_input.servo_reason = read_servos(&tick_input, tick_input.host_fresh
                                                       && (tick_input.flags & HOST_FLAG_NEW_EPISODE));
    arm_tick_output_t out;
    const uint32_t control_start = board_ticks();
    arm_controller_tick(&controller, &tick_input, &out);
    const uint32_t control_ticks = board_ticks() - control_start;
    if (out.write_goals) {
        write_goals(out.command, out.gripper);
    }
    if (out.torque != torque_on) {
        write_torque(out.torque);
        torque_on = out.torque;
    }
    send_telemetry(ticks_run++, &out, control_ticks);
}
