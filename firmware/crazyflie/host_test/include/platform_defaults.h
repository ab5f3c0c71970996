/* STAND-IN for crazyflie-firmware's platform_defaults.h: the CF2's per-motor THRUST_MAX [N]
 * (platform_defaults_cf2.h). */
#ifndef PLATFORM_DEFAULTS_H
#define PLATFORM_DEFAULTS_H
#define THRUST_MAX 0.12f
#endif
