"""A Crazyflie-firmware-like onboard attitude controller, so the simulator accepts what crazyswarm2 sends.

Structure and default gains of crazyflie-firmware's `controller_pid` for the setpoint its legacy RPYT
commander (`crtp_commander_rpyt`) writes: an attitude PID (angle error [deg] -> rate setpoint [deg/s]), a
rate PID (rate error -> roll/pitch/yaw commands in motor PWM units, saturated to int16), and the legacy
quad-X mixer (`power_distribution_quadrotor`, m1 = T - r/2 + p/2 + y, ...), all at `rate_hz` (the
firmware's 500 Hz). Angles use the firmware's legacy conventions: roll right-handed, pitch negated
(positive nose up), yaw and yaw rate right-handed; the gyro's pitch rate enters the rate PID negated, the
yaw output is negated before the mixer. How a crazyswarm2 Twist becomes that setpoint (server, library,
commander) is emulated in ros2_ws's `robo_rl_ros.crazyswarm2_chain`. Motor PWM maps linearly to the rotor's
thrust fraction (PWM / 65535 = fraction of `thrust_max`), a simplification of the firmware's
battery-compensated PWM. `torque_scale` (per axis) scales the roll/pitch/yaw commands for a vehicle whose
inertia differs from the Crazyflie 2.0's that the gains were tuned on (`inertia_torque_scale`): the
learning-to-fly vehicle's inertia is a quarter of it, and with the unscaled gains its attitude rings.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

PWM_MAX = 65535.0
INT16_MAX = 32767.0


@dataclasses.dataclass(frozen=True)
class PidGains:
    """One firmware PID: gains and the integral's limit (firmware units)."""

    kp: float
    ki: float
    kd: float
    integration_limit: float


# crazyflie-firmware platform_defaults_cf2.h (PID_ROLL_*, PID_PITCH_*, PID_YAW_*, *_RATE_*)
FIRMWARE_ATTITUDE_GAINS = (PidGains(6.0, 3.0, 0.0, 20.0), PidGains(6.0, 3.0, 0.0, 20.0), PidGains(6.0, 1.0, 0.35, 360.0))
FIRMWARE_RATE_GAINS = (PidGains(250.0, 500.0, 2.5, 33.3), PidGains(250.0, 500.0, 2.5, 33.3), PidGains(120.0, 16.7, 0.0, 166.7))
RATE_D_FILTER_HZ = 30.0  # the firmware low-passes the rate PIDs' derivative
# Crazyflie 2.0 principal inertia identified by Foerster (ETH 2015), the vehicle the gains were tuned on
CRAZYFLIE_INERTIA = (1.395e-5, 1.436e-5, 2.173e-5)


def inertia_torque_scale(inertia: np.ndarray | tuple[float, float, float]) -> tuple[float, float, float]:
    """Per-axis scale of the firmware's torque commands for a vehicle of principal inertia `inertia`."""
    return tuple(float(i / ref) for i, ref in zip(inertia, CRAZYFLIE_INERTIA))


class _Pid:
    def __init__(self, gains: PidGains, dt: float, d_filter_hz: float = 0.0):
        self.gains, self.dt = gains, dt
        self._alpha = 1.0 if d_filter_hz <= 0 else 1.0 - math.exp(-2.0 * math.pi * d_filter_hz * dt)
        self.reset()

    def reset(self) -> None:
        self.integral, self.previous_error, self.derivative = 0.0, 0.0, 0.0

    def update(self, error: float) -> float:
        g = self.gains
        self.integral = float(np.clip(self.integral + error * self.dt, -g.integration_limit, g.integration_limit))
        raw = (error - self.previous_error) / self.dt
        self.derivative += self._alpha * (raw - self.derivative)
        self.previous_error = error
        return g.kp * error + g.ki * self.integral + g.kd * self.derivative


def _wrap_degrees(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


class OnboardAttitudeController:
    """The firmware's legacy attitude controller for one vehicle; `motor_commands` runs one update."""

    def __init__(self, rate_hz: float = 500.0, torque_scale: tuple[float, float, float] = (1.0, 1.0, 1.0),
                 attitude_gains: tuple[PidGains, ...] = FIRMWARE_ATTITUDE_GAINS,
                 rate_gains: tuple[PidGains, ...] = FIRMWARE_RATE_GAINS):
        self.dt = 1.0 / rate_hz
        self.torque_scale = tuple(float(v) for v in torque_scale)
        self._attitude = [_Pid(g, self.dt) for g in attitude_gains]
        self._rate = [_Pid(g, self.dt, RATE_D_FILTER_HZ if i < 2 else 0.0) for i, g in enumerate(rate_gains)]
        self.setpoint = (0.0, 0.0, 0.0, 0.0)
        self._yaw_desired: float | None = None

    def set_setpoint(self, roll_deg: float, pitch_deg: float, yaw_rate_deg: float, thrust_pwm: float) -> None:
        """Take the firmware's setpoint: attitude.roll, attitude.pitch (legacy, nose up positive),
        attitudeRate.yaw (right-handed) [deg, deg/s] and thrust (PWM units)."""
        values = (roll_deg, pitch_deg, yaw_rate_deg, thrust_pwm)
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"setpoint must be finite, got {values}")
        self.setpoint = (float(roll_deg), float(pitch_deg), float(yaw_rate_deg),
                         float(np.clip(thrust_pwm, 0.0, PWM_MAX)))

    def reset(self) -> None:
        """Forget integrals and the desired yaw (the firmware does this whenever thrust is zero)."""
        for pid in (*self._attitude, *self._rate):
            pid.reset()
        self._yaw_desired = None

    def motor_commands(self, quaternion: np.ndarray, body_rates: np.ndarray) -> np.ndarray:
        """Normalized motor thrusts M1..M4 in [0, 1] for the state (quaternion (w, x, y, z) body to world,
        body rates [rad/s])."""
        roll_sp, pitch_sp, yaw_rate_sp, thrust = self.setpoint
        roll, pitch, yaw = _firmware_euler_degrees(quaternion)
        if thrust <= 0.0:
            self.reset()
            return np.zeros(4)
        if self._yaw_desired is None:
            self._yaw_desired = yaw
        self._yaw_desired = _wrap_degrees(self._yaw_desired + yaw_rate_sp * self.dt)  # controller_pid.c:88
        rate_sp = (self._attitude[0].update(roll_sp - roll), self._attitude[1].update(pitch_sp - pitch),
                   self._attitude[2].update(_wrap_degrees(self._yaw_desired - yaw)))
        gyro = np.degrees(np.asarray(body_rates, dtype=np.float64))
        measured = (gyro[0], -gyro[1], gyro[2])
        out = [float(np.clip(pid.update(sp - m), -INT16_MAX, INT16_MAX))
               for pid, sp, m in zip(self._rate, rate_sp, measured)]
        sx, sy, sz = self.torque_scale
        r, p, y = 0.5 * out[0] * sx, 0.5 * out[1] * sy, -out[2] * sz
        motors = np.array([thrust - r + p + y, thrust - r - p - y, thrust + r - p + y, thrust + r + p - y])
        return np.clip(motors, 0.0, PWM_MAX) / PWM_MAX


def _firmware_euler_degrees(quaternion: np.ndarray) -> tuple[float, float, float]:
    """(roll, legacy pitch, yaw) [deg] as the firmware's estimator reports them (pitch negated)."""
    w, x, y, z = quaternion
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return math.degrees(roll), -math.degrees(pitch), math.degrees(yaw)
