"""From the policy's four motor thrusts to the setpoints crazyswarm2 accepts.

The policy commands normalized motor thrusts (Crazyflie `controlModeForce`: `action[i]` is rotor i's
thrust as a fraction of the vehicle's `thrust_max`, motors M1..M4 in the firmware's order). crazyswarm2
has no motor-level topic, so the node turns the thrusts into an attitude-and-thrust setpoint through the
model of the flown vehicle recorded in policy.json (`deployment.vehicle_parameters`, the vehicle the bundle
was exported for: the policy's actions are fractions of that vehicle's own maximum thrust; bundles from
before it was recorded give `training.vehicle_parameters`):

1. Mixer: rotor forces F_i = a_i thrust_max give the collective thrust T = sum F_i and the body torques
   tau = sum r_i x (0, 0, F_i) + (0, 0, sum k_i F_i) (rotor positions r_i, signed yaw-torque
   coefficients k_i).
2. One control period dt ahead with the vehicle's inertia I: w' = w + dt I^-1 (tau - w x I w), and the
   attitude R' = R exp(dt (w + w') / 2).
3. The setpoint is R' and w' with T, in the form the chosen command takes:
   - `cmd_vel_legacy` (geometry_msgs/Twist, crazyswarm2's server -> crazyflie_cpp or cflib -> the
     firmware's legacy RPYT commander and controller_pid; every link with its source line in
     robo_rl_ros.crazyswarm2_chain): linear.y = roll [deg] (right-handed); linear.x = the pitch [deg] as
     crazyswarm2's backend needs it: with 'cpp' (crazyswarm2's default) the right-handed pitch (nose down
     positive), because the C++ server sends -linear.x and crazyflie_cpp packs it unchanged, while the
     firmware wants the legacy pitch (nose up positive); with 'cflib' the legacy pitch, because cflib's
     `send_setpoint` packs the server's -linear.x negated once more; angular.z = the negated
     right-handed yaw rate [deg/s] (the firmware negates the legacy yaw rate), bounded by
     `max_yaw_rate_deg` (controller_pid's capAngle subtracts 360 deg per loop pass: a huge rate would spin
     the stabilizer); linear.z = thrust, here T / (4 thrust_max) 65535 (a linear map from PWM to force,
     the same the simulated onboard controller assumes) bounded by 60000, where both servers and the
     firmware clamp it. The firmware keeps thrust at 0 from boot until a setpoint with thrust 0 arrives
     (`ThrustLock`). The
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

PWM_MAX = 65535.0  # the legacy thrust's full scale (motor PWM)
THRUST_COMMAND_MAX = 60000.0  # crazyswarm2's servers and crtp_commander_rpyt.c (MAX_THRUST) clamp linear.z here
MAX_YAW_RATE_DEG = 360.0  # default bound of angular.z [deg/s]
# crazyswarm2's backends (robo_rl_ros.crazyswarm2_chain has the sources); the default is crazyswarm2's own:
# crazyflie/launch/launch.py:127 DeclareLaunchArgument('backend', default_value='cpp') (commit f6154e2)
BACKENDS = ("cpp", "cflib")
DEFAULT_BACKEND = "cpp"
# What a real multirotor's numbers can be (low, high, unit), the ranges the simulator accepts for a vehicle
# (sim.quadrotor.config.VEHICLE_RANGES, not importable on the robot) where it has one: the Crazyflie is 27 g
# with 4e-6 kg m^2, 28 mm and 0.15 N per rotor. Signed fields are bounded in magnitude.
VEHICLE_RANGES: dict[str, tuple[float, float, str]] = {
    "mass": (0.001, 100.0, "kg"),
    "inertia": (1e-9, 100.0, "kg m^2"),
    "rotor_positions": (0.0, 10.0, "m"),
    "yaw_torque_coefficients": (0.0, 1.0, "N m / N"),
    "thrust_max": (1e-4, 1000.0, "N"),  # sim: thrust_curve in [-1000, 1000] N
    "gravity": (0.1, 100.0, "m/s^2"),
}
SIGNED_FIELDS = ("rotor_positions", "yaw_torque_coefficients")
TRAINING_PARAMETERS = "training.vehicle_parameters"
DEPLOYMENT_PARAMETERS = "deployment.vehicle_parameters"
MIN_ROTOR_OFFSET = 0.001  # [m] from the centre in x-y (sim: rotor_offset >= 0.001 m)


def flown_vehicle_parameters(bundle: PolicyBundle) -> tuple[dict, str]:
    """The parameters of the vehicle the bundle flies and where policy.json holds them: its deployment
    vehicle's, or for a bundle without a `deployment` block the training vehicle's. BundleError where the
    deployment block's thrust_max_newton or hover_command disagree with its vehicle_parameters."""
    if not bundle.deployment:
        return bundle.vehicle_parameters, TRAINING_PARAMETERS
    parameters = bundle.deployment.get("vehicle_parameters")
    if not isinstance(parameters, dict):
        raise BundleError(f"policy.json {DEPLOYMENT_PARAMETERS} must be a JSON object, got "
                          f"{type(parameters).__name__}; export the bundle again")
    for key, field in (("thrust_max_newton", "thrust_max"), ("hover_command", "hover_command")):
        value, recorded = bundle.deployment.get(key), parameters.get(field)
        same = isinstance(value, (int, float)) and isinstance(recorded, (int, float)) \
            and abs(value - recorded) <= 1e-9 * abs(recorded)
        if not same:
            raise BundleError(f"policy.json deployment.{key} is {value!r} but {DEPLOYMENT_PARAMETERS}.{field} is "
                              f"{recorded!r}; they must be the same number (export the bundle again)")
    return parameters, DEPLOYMENT_PARAMETERS


@dataclasses.dataclass(frozen=True)
class VehicleModel:
    """The rigid-body and rotor numbers of the vehicle the policy flies (policy.json: the deployment vehicle,
    else the training vehicle)."""

    mass: float
    inertia: np.ndarray  # (3,) principal moments, body frame [kg m^2]
    rotor_positions: np.ndarray  # (4, 3) [m]
    yaw_torque_coefficients: np.ndarray  # (4,) [N m / N]
    thrust_max: float  # one rotor [N]
    gravity: float  # [m/s^2]

    @classmethod
    def from_bundle(cls, bundle: PolicyBundle) -> "VehicleModel":
        """The vehicle the bundle flies (`flown_vehicle_parameters`); BundleError if incomplete or unphysical."""
        p, where = flown_vehicle_parameters(bundle)
        try:
            model = cls(mass=float(p["mass"]), inertia=np.asarray(p["inertia"], dtype=np.float64).reshape(3),
                        rotor_positions=np.asarray(p["rotor_positions"], dtype=np.float64).reshape(4, 3),
                        yaw_torque_coefficients=np.asarray(p["yaw_torque_coefficients"], dtype=np.float64).reshape(4),
                        thrust_max=float(p["thrust_max"]), gravity=float(p["gravity"]))
        except (KeyError, TypeError, ValueError) as error:
            raise BundleError(f"policy.json {where} is incomplete: {error!r}") from error
        model.check(where)
        hover_command(bundle, model)
        return model

    def check(self, where: str = TRAINING_PARAMETERS) -> None:
        """Raise one BundleError naming the first number that no real multirotor has (VEHICLE_RANGES, positive
        principal moments that satisfy the triangle inequality, thrust-to-weight above 1); `where` names the
        numbers' place in policy.json. Past these, the one-period prediction of `attitude_setpoint` overflows
        (1e308 in a rotor position was a 'math domain error' out of the first tick)."""
        prefix = f"policy.json {where}."
        # (NaN compares False: each check is written so that NaN fails it)
        for name in VEHICLE_RANGES:
            low, high, unit = VEHICLE_RANGES[name]
            values = np.asarray(getattr(self, name), dtype=np.float64)
            bad = ~((np.abs(values) if name in SIGNED_FIELDS else values) <= high)
            if name not in SIGNED_FIELDS:
                bad |= ~(values >= low)
            if np.any(bad):
                index = "".join(f"[{i}]" for i in np.argwhere(bad)[0]) if values.ndim else ""
                value = values[tuple(np.argwhere(bad)[0])] if values.ndim else values
                span = f"[-{high:g}, {high:g}]" if name in SIGNED_FIELDS else f"[{low:g}, {high:g}]"
                raise BundleError(f"{prefix}{name}{index} is {float(value)}; allowed: a finite number in {span} "
                                  f"{unit}")
        offsets = np.hypot(self.rotor_positions[:, 0], self.rotor_positions[:, 1])
        if not np.all(offsets >= MIN_ROTOR_OFFSET):
            rotor = int(np.argmin(offsets))
            raise BundleError(f"{prefix}rotor_positions[{rotor}] lies {offsets[rotor]:g} m from the centre in x-y; "
                              f"allowed: at least {MIN_ROTOR_OFFSET:g} m (a rotor on the axis gives no roll or pitch)")
        largest = float(np.max(self.inertia))
        if not float(np.sum(self.inertia)) - largest >= largest * (1.0 - 1e-6):
            raise BundleError(f"{prefix}inertia is {self.inertia.tolist()}; allowed: principal moments of a rigid body "
                              "(each at most the sum of the other two)")
        thrust_to_weight = 4.0 * self.thrust_max / (self.mass * self.gravity)
        if not thrust_to_weight > 1.0:
            raise BundleError(f"{prefix}thrust_max {self.thrust_max:g} N with mass {self.mass:g} kg and gravity "
                              f"{self.gravity:g} m/s^2 gives a thrust-to-weight ratio of {thrust_to_weight:.3g}; "
                              "allowed: above 1 (four rotors must lift the vehicle)")

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


def hover_command(bundle: PolicyBundle, vehicle: VehicleModel) -> float:
    """The motor command that carries the flown vehicle (its recorded hover_command, else computed from
    `vehicle`): what the action history starts from. BundleError unless it lies in (0, 1)."""
    p, where = flown_vehicle_parameters(bundle)
    hover = p.get("hover_command", vehicle.hover_fraction)
    if isinstance(hover, bool) or not (isinstance(hover, (int, float)) and 0.0 < hover < 1.0):
        raise BundleError(f"policy.json {where}.hover_command is {hover!r}; allowed: a number in (0, 1) "
                          "(fraction of thrust_max that carries the vehicle)")
    return float(hover)


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

    roll_deg: float  # linear.y, right-handed roll
    pitch_deg: float  # linear.x: right-handed pitch (backend 'cpp') or legacy pitch (positive nose up, 'cflib')
    yaw_rate_deg: float  # angular.z, the firmware's legacy yaw rate (positive clockwise from above)
    thrust_pwm: float  # linear.z, 0..60000

    def is_finite(self) -> bool:
        """Whether every field is a finite number (the chain passes NaN through to the vehicle)."""
        return all(math.isfinite(v) for v in self)


STOP_COMMAND = LegacyCommand(0.0, 0.0, 0.0, 0.0)


class ThrustLock:
    """The firmware's thrust lock, seen from the sender: crtp_commander_rpyt.c keeps the thrust at 0 from boot
    until a legacy setpoint with thrust 0 arrives (crazyswarm2's Python server sends one before a vehicle's
    first Twist, its C++ server does not). `command` returns the stop command (thrust 0) in place of the
    commands it is given until it has done so on `zero_ticks` ticks while the crazyswarm2 server listened
    (its subscription known to the ROS graph); from then on it passes them. Two ticks: the graph can learn
    of the server's subscription a moment before the publisher's own match with it, which then misses a
    zero sent in that moment.
    """

    def __init__(self, zero_ticks: int = 2) -> None:
        self.zero_ticks = zero_ticks
        self._zeros_heard = 0

    @property
    def released(self) -> bool:
        """Whether the zeros have gone out (commands pass from now on)."""
        return self._zeros_heard >= self.zero_ticks

    def command(self, command: LegacyCommand, server_listening: bool) -> LegacyCommand:
        """The command to publish this tick in place of `command`."""
        if self.released:
            return command
        self._zeros_heard += bool(server_listening)
        return STOP_COMMAND


def legacy_command(setpoint: AttitudeSetpoint, vehicle: VehicleModel, attitude_kp: float = 6.0,
                   max_tilt_deg: float = 60.0, rate_lead: float = 0.75, backend: str = DEFAULT_BACKEND,
                   max_yaw_rate_deg: float = MAX_YAW_RATE_DEG) -> LegacyCommand:
    """The `cmd_vel_legacy` fields for a setpoint through crazyswarm2's `backend` (conventions in the module
    docstring)."""
    roll, pitch, _ = setpoint.euler
    rates = setpoint.body_rates.tolist()
    gain = rate_lead / attitude_kp if attitude_kp > 0 else 0.0
    lead_roll, lead_pitch = rates[0] * gain, rates[1] * gain
    # body rates ~ Euler-angle rates near level flight, which is where an attitude loop operates
    roll_deg = math.degrees(roll + lead_roll)
    pitch_deg = math.degrees(pitch + lead_pitch)
    roll_deg = min(max(roll_deg, -max_tilt_deg), max_tilt_deg)
    pitch_deg = min(max(pitch_deg, -max_tilt_deg), max_tilt_deg)
    pwm = min(max(setpoint.thrust / (4.0 * vehicle.thrust_max) * PWM_MAX, 0.0), THRUST_COMMAND_MAX)
    yaw_rate_deg = min(max(-math.degrees(rates[2]), -max_yaw_rate_deg), max_yaw_rate_deg)
    if backend == "cpp":  # the C++ server negates linear.x and crazyflie_cpp packs it as it is
        return LegacyCommand(roll_deg, pitch_deg, yaw_rate_deg, pwm)
    if backend == "cflib":  # the Python server negates linear.x and cflib negates it again
        return LegacyCommand(roll_deg, -pitch_deg, yaw_rate_deg, pwm)
    raise ValueError(f"crazyswarm2 backend must be one of {BACKENDS}, got {backend!r}")


DESCENT_START = 0.9  # of hover thrust: where a descent starts after flight (lower if the last command was)


def descent_command(vehicle: VehicleModel, seconds_since_stop: float, descent_seconds: float,
                    start_fraction_of_hover: float = DESCENT_START) -> LegacyCommand:
    """A level, open-loop descent for when the state is lost: thrust ramps from a fraction of hover thrust
    to zero over `descent_seconds`, then stays zero (motors off)."""
    if descent_seconds <= 0 or seconds_since_stop >= descent_seconds:
        return STOP_COMMAND
    hover_pwm = vehicle.hover_fraction * PWM_MAX
    remaining = 1.0 - seconds_since_stop / descent_seconds
    return LegacyCommand(0.0, 0.0, 0.0, float(start_fraction_of_hover * hover_pwm * remaining))

