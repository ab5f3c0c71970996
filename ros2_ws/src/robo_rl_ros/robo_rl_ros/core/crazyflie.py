"""From the policy's four motor thrusts to the setpoints crazyswarm2 accepts.

The policy commands normalized motor thrusts (Crazyflie `controlModeForce`: `action[i]` is rotor i's
thrust as a fraction of the vehicle's `thrust_max`, motors M1..M4 in the firmware's order). crazyswarm2
has no motor-level topic, so the node turns the thrusts into an attitude-and-thrust setpoint through the
vehicle model recorded in policy.json:

1. Mixer: rotor forces F_i = a_i thrust_max give the collective thrust T = sum F_i and the body torques
   tau = sum r_i x (0, 0, F_i) + (0, 0, sum k_i F_i) (rotor positions r_i, signed yaw-torque
   coefficients k_i).
2. One control period dt ahead with the vehicle's inertia I: w' = w + dt I^-1 (tau - w x I w), and the
   attitude R' = R exp(dt (w + w') / 2).
3. The setpoint is R' and w' with T, in the form the chosen command takes:
   - `cmd_vel_legacy` (geometry_msgs/Twist, crazyswarm2 -> cflib `send_setpoint` -> the firmware's legacy
     RPYT commander and controller_pid): linear.y = roll [deg], linear.x = the firmware's legacy pitch
     [deg] (positive nose up, the negated right-handed pitch), angular.z = the firmware's legacy yaw rate
     [deg/s] (negated right-handed yaw rate), linear.z = thrust in 0..65535, here T / (4 thrust_max)
     65535 (a linear map from PWM to force, the same the simulated onboard controller assumes). The
     firmware's attitude loop turns an angle error into a rate setpoint with gain `attitude_kp` (deg/s
     per deg, controller_pid's 6); roll and pitch are sent as R' plus rate_lead w' / attitude_kp so that
     this loop asks for (a fraction of) the body rates the policy's torques would produce (attitude_kp = 0
     or rate_lead = 0 sends R' alone). With the full lead (rate_lead = 1) the loop through the onboard rate
     controller is at the edge of stability: when commands reach the vehicle 4-6 ms after the state they
     were computed from (what DDS and the bridge add), roll and pitch commands fall into a period-2
     oscillation of about +-9 deg while the vehicle stays level. rate_lead = 0.75 removes it for 0-10 ms of
     delay at the price of up to 1 deg of tilt (tests/ros2/test_core_closed_loop.py).
   - `cmd_full_state` (crazyflie_interfaces/FullState): the quaternion of R', the body rates w', and the
     position/velocity/acceleration of the reference (acceleration from T along R''s z axis minus gravity).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.rotations import (floats, matmul3, matrix_to_euler_zyx, matrix_to_quat, rotation_entries,
                                        rotation_exp_entries)

PWM_MAX = 65535.0


@dataclasses.dataclass(frozen=True)
class VehicleModel:
    """The rigid-body and rotor numbers of the vehicle the policy was trained on (policy.json)."""

    mass: float
    inertia: np.ndarray  # (3,) principal moments, body frame [kg m^2]
    rotor_positions: np.ndarray  # (4, 3) [m]
    yaw_torque_coefficients: np.ndarray  # (4,) [N m / N]
    thrust_max: float  # one rotor [N]
    gravity: float  # [m/s^2]

    @classmethod
    def from_bundle(cls, bundle: PolicyBundle) -> "VehicleModel":
        """The vehicle recorded under training.vehicle_parameters; BundleError if incomplete."""
        p = bundle.vehicle_parameters
        try:
            model = cls(mass=float(p["mass"]), inertia=np.asarray(p["inertia"], dtype=np.float64).reshape(3),
                        rotor_positions=np.asarray(p["rotor_positions"], dtype=np.float64).reshape(4, 3),
                        yaw_torque_coefficients=np.asarray(p["yaw_torque_coefficients"], dtype=np.float64).reshape(4),
                        thrust_max=float(p["thrust_max"]), gravity=float(p["gravity"]))
        except (KeyError, TypeError, ValueError) as error:
            raise BundleError(f"policy.json training.vehicle_parameters is incomplete: {error!r}") from error
        if model.mass <= 0 or np.any(model.inertia <= 0) or model.thrust_max <= 0:
            raise BundleError("policy.json vehicle parameters must have positive mass, inertia and thrust_max")
        return model

    @functools.cached_property
    def mixer(self) -> np.ndarray:
        """(3, 4): body torque [N m] per rotor force [N] (roll, pitch from the rotor positions, yaw from the
        signed yaw-torque coefficients)."""
        r = self.rotor_positions
        return np.stack([r[:, 1], -r[:, 0], self.yaw_torque_coefficients])

    @property
    def hover_fraction(self) -> float:
        """The motor command (fraction of thrust_max) at which four rotors carry the weight."""
        return self.mass * self.gravity / (4.0 * self.thrust_max)


class AttitudeSetpoint(NamedTuple):
    """Attitude, body rates and collective thrust one control period ahead."""

    rotation: np.ndarray  # (3, 3) body to world
    body_rates: np.ndarray  # (3,) rad/s, body frame
    thrust: float  # collective [N]

    @property
    def euler(self) -> tuple[float, float, float]:
        """Right-handed (roll, pitch, yaw) [rad], ZYX."""
        return matrix_to_euler_zyx(self.rotation)

    @property
    def quaternion(self) -> np.ndarray:
        """Unit quaternion (w, x, y, z) of the attitude."""
        return matrix_to_quat(self.rotation)


def motor_wrench(vehicle: VehicleModel, thrust_fractions: np.ndarray) -> tuple[float, np.ndarray]:
    """Collective thrust [N] and body torque [N m] of normalized motor thrusts (the mixer)."""
    forces = [a * vehicle.thrust_max for a in floats(thrust_fractions)]
    return sum(forces), np.array([sum(m * f for m, f in zip(row, forces)) for row in vehicle.mixer.tolist()])


def attitude_setpoint(vehicle: VehicleModel, quaternion: np.ndarray, body_rates: np.ndarray,
                      thrust_fractions: np.ndarray, dt: float) -> AttitudeSetpoint:
    """The attitude and body rates the motor thrusts would produce one period `dt` ahead of the state."""
    # Python floats on 3-vectors: this runs every control tick, where numpy's per-call cost dominates
    thrust, torque = motor_wrench(vehicle, thrust_fractions)
    tx, ty, tz = torque.tolist()
    wx, wy, wz = floats(body_rates)
    jx, jy, jz = vehicle.inertia.tolist()
    nx = wx + dt * (tx - (wy * jz * wz - wz * jy * wy)) / jx
    ny = wy + dt * (ty - (wz * jx * wx - wx * jz * wz)) / jy
    nz = wz + dt * (tz - (wx * jy * wy - wy * jx * wx)) / jz
    half = 0.5 * dt
    rotation = matmul3(rotation_entries(quaternion),
                       rotation_exp_entries(((wx + nx) * half, (wy + ny) * half, (wz + nz) * half)))
    return AttitudeSetpoint(np.array(rotation).reshape(3, 3), np.array([nx, ny, nz]), thrust)


class LegacyCommand(NamedTuple):
    """A crazyswarm2 `cmd_vel_legacy` Twist's four used fields."""

    roll_deg: float  # linear.y
    pitch_deg: float  # linear.x, the firmware's legacy pitch (positive nose up)
    yaw_rate_deg: float  # angular.z, the firmware's legacy yaw rate (positive clockwise from above)
    thrust_pwm: float  # linear.z, 0..65535


STOP_COMMAND = LegacyCommand(0.0, 0.0, 0.0, 0.0)


def legacy_command(setpoint: AttitudeSetpoint, vehicle: VehicleModel, attitude_kp: float = 6.0,
                   max_tilt_deg: float = 60.0, rate_lead: float = 0.75) -> LegacyCommand:
    """The `cmd_vel_legacy` fields for a setpoint (conventions in the module docstring)."""
    roll, pitch, _ = setpoint.euler
    rates = setpoint.body_rates.tolist()
    gain = rate_lead / attitude_kp if attitude_kp > 0 else 0.0
    lead_roll, lead_pitch = rates[0] * gain, rates[1] * gain
    # body rates ~ Euler-angle rates near level flight, which is where an attitude loop operates
    roll_deg = math.degrees(roll + lead_roll)
    pitch_deg = math.degrees(pitch + lead_pitch)
    roll_deg = min(max(roll_deg, -max_tilt_deg), max_tilt_deg)
    pitch_deg = min(max(pitch_deg, -max_tilt_deg), max_tilt_deg)
    pwm = min(max(setpoint.thrust / (4.0 * vehicle.thrust_max) * PWM_MAX, 0.0), PWM_MAX)
    return LegacyCommand(roll_deg, -pitch_deg, -math.degrees(rates[2]), pwm)


def descent_command(vehicle: VehicleModel, seconds_since_stop: float, descent_seconds: float,
                    start_fraction_of_hover: float = 0.9) -> LegacyCommand:
    """A level, open-loop descent for when the state is lost: thrust ramps from a fraction of hover thrust
    to zero over `descent_seconds`, then stays zero (motors off)."""
    if descent_seconds <= 0 or seconds_since_stop >= descent_seconds:
        return STOP_COMMAND
    hover_pwm = vehicle.hover_fraction * PWM_MAX
    remaining = 1.0 - seconds_since_stop / descent_seconds
    return LegacyCommand(0.0, 0.0, 0.0, float(start_fraction_of_hover * hover_pwm * remaining))

