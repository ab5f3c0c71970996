/* host_protocol.h: the arm firmware's host link (frames, message layouts, safety states). Generated from
 * robo_rl/export/host_link.py by `python -m robo_rl.export.host_link`; do not edit (a test holds the two equal). */
#ifndef HOST_PROTOCOL_H
#define HOST_PROTOCOL_H

#define HOST_SYNC0 0xA5u
#define HOST_SYNC1 0x5Au
#define HOST_MAX_PAYLOAD 64u
#define HOST_CRC_POLY 0x1021u
#define HOST_CRC_INIT 0xFFFFu
#define HOST_JOINT_SLOTS 7u
#define HOST_CALIBRATION_LOOPS 200000u

#define HOST_MSG_INPUTS 0x01u
#define HOST_MSG_BOOT 0x80u
#define HOST_MSG_TELEMETRY 0x81u
#define HOST_FLAG_NEW_EPISODE 0x01u
#define HOST_FLAG_ENABLE 0x02u
#define ARM_STATE_RUN 0u
#define ARM_STATE_HOLD 1u
#define ARM_STATE_TORQUE_OFF 2u
#define ARM_REASON_OK 0u
#define ARM_REASON_BOOT 1u
#define ARM_REASON_HOST_TIMEOUT 2u
#define ARM_REASON_HOST_DISABLED 3u
#define ARM_REASON_BAD_HOST_DATA 4u
#define ARM_REASON_SERVO_TIMEOUT 5u
#define ARM_REASON_SERVO_ERROR 6u
#define ARM_REASON_BAD_SERVO_DATA 7u
#define ARM_REASON_POLICY_FAULT 8u
#define ARM_REASON_SELF_TEST_FAILED 9u

#define HOST_INPUTS_OBJECT_POSITION 0u /* float[3] */
#define HOST_INPUTS_GOAL 12u /* float[3] */
#define HOST_INPUTS_FLAGS 24u /* uint8_t[1] */
#define HOST_INPUTS_SIZE 25u

#define HOST_BOOT_SELF_TEST_FAILURES 0u /* uint8_t[1] */
#define HOST_BOOT_SERVOS_FOUND 1u /* uint8_t[1] */
#define HOST_BOOT_SELF_TEST_MAX_ERROR_E9 2u /* uint32_t[1] */
#define HOST_BOOT_CALIBRATION_TICKS 6u /* uint32_t[1] */
#define HOST_BOOT_SIZE 10u

#define HOST_TELEMETRY_TICK 0u /* uint32_t[1] */
#define HOST_TELEMETRY_STATE 4u /* uint8_t[1] */
#define HOST_TELEMETRY_REASON 5u /* uint8_t[1] */
#define HOST_TELEMETRY_POLICY_STATUS 6u /* uint8_t[1] */
#define HOST_TELEMETRY_ACTION 8u /* float[4] */
#define HOST_TELEMETRY_JOINT_COMMAND 24u /* float[7] */
#define HOST_TELEMETRY_CONTROL_TICKS 52u /* uint32_t[1] */
#define HOST_TELEMETRY_BUS_TICKS 56u /* uint32_t[1] */
#define HOST_TELEMETRY_STACK_BYTES 60u /* uint32_t[1] */
#define HOST_TELEMETRY_SIZE 64u

#endif
