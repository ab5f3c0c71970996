/* The arm app: an exported arm policy next to an SO-ARM100's Feetech servo bus, on the board's two UARTs.
 *
 * Boot: self-test (the policy's recorded pairs and the chain constants), servos found, goals set to where the
 * servos are, torque on (never with a failed self-test), a BOOT frame to the host. Then each control tick,
 * clocked by the host's INPUTS frames (or by the host timeout when they stop): read every servo's position
 * and speed, decide (arm_control.c), write the goals in one SYNC_WRITE, send TELEMETRY. */
#ifndef ARM_APP_H
#define ARM_APP_H

void arm_app_boot(void);
void arm_app_tick(void);

#endif
