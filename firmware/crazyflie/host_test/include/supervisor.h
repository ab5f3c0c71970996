/* STAND-IN for crazyflie-firmware's supervisor.h: the queries robo_rl_controller.c makes;
 * host_test/stock_controller.c answers them from what the test driver sets. */
#ifndef SUPERVISOR_H
#define SUPERVISOR_H
#include <stdbool.h>
bool supervisorCanFly(void);
bool supervisorIsFlying(void);
bool supervisorIsArmed(void);
#endif
