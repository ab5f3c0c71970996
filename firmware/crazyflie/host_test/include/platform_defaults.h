/* STAND-IN for crazyflie-firmware's platform_defaults.h: the CF2's per-motor THRUST_MIN and THRUST_MAX [N]
 * with battery compensation and the default 2.1+ propellers (platform_defaults_cf2.h); a test may give
 * others with -D. */
#ifndef PLATFORM_DEFAULTS_H
#define PLATFORM_DEFAULTS_H
#ifndef THRUST_MIN
#define THRUST_MIN 0.012817578393224994f
#endif
#ifndef THRUST_MAX
#define THRUST_MAX 0.12f
#endif
#endif
