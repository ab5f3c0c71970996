"""Rotor model: normalized thrust command -> rotor-speed setpoint -> first-order lag -> thrust.

Shared by every simulation path (`xp` is numpy or torch). The command is held over a control step, so
the lag is integrated exactly per physics substep: w_{k+1} = w_cmd + (w_k - w_cmd) exp(-h / tau), with
tau the rise constant when speeding up and the fall constant when slowing down (the speed moves
monotonically towards a constant setpoint, so one constant holds for the whole control step). Thrust
during substep k is taken at w_k (zero-order hold), the value MuJoCo receives as actuator control.
"""

from __future__ import annotations

from typing import Any, Sequence

from sim.errors import ConfigError


def command_limits(thrust_max: float, firmware_thrust_max: float, firmware_thrust_min: float) -> tuple[float, float]:
    """The flight firmware's per-motor thrust limits [N] as normalized commands: (largest, cutoff).

    On the Crazyflie (`controlModeForce`) a command c of this vehicle's `thrust_max` becomes the force
    c * thrust_max / THRUST_MAX, clamped to [0, 1] (power_distribution_quadrotor.c, powerDistributionForce),
    and with battery compensation a motor whose thrust is below THRUST_MIN is turned off (motors.c,
    motorsCompensateBatteryVoltage returns 0). So commands above THRUST_MAX / thrust_max are clamped and
    those below THRUST_MIN / thrust_max give no thrust. A limit of 0 leaves it out (1 and 0: no limit).
    """
    largest = min(1.0, firmware_thrust_max / thrust_max) if firmware_thrust_max > 0 else 1.0
    cutoff = firmware_thrust_min / thrust_max
    if cutoff >= largest:
        raise ConfigError(f"firmware_thrust_min={firmware_thrust_min} N must be below firmware_thrust_max="
                          f"{firmware_thrust_max or thrust_max} N (0: this vehicle's thrust_max {thrust_max:.4g} N)")
    return largest, cutoff


def motor_command(xp: Any, action: Any, largest: float = 1.0, cutoff: float = 0.0) -> Any:
    """The normalized command the motors get for an action: clamped to [0, largest], 0 below `cutoff`.

    Every path applies it (the native kernel's load_commands too); it is also what the action history and the
    action reward terms see, as the firmware app's history holds what its motors got. The firmware's
    quantization to 1/65535 is not modelled.
    """
    command = xp.clip(action, 0.0, largest)
    if cutoff > 0.0:
        command = xp.where(command < cutoff, 0.0 * command, command)
    return command


def rotor_speed_setpoint(xp: Any, command: Any, thrust_curve: Sequence[float]) -> Any:
    """Steady-state normalized rotor speed giving `command * thrust_max` on the nominal thrust curve.

    `command` is the per-rotor normalized thrust, the Crazyflie firmware's `normalizedForces` (0..1 of
    this vehicle's maximum thrust); the controller inverts the nominal curve, the plant may differ.
    """
    c0, c1, c2 = (float(c) for c in thrust_curve)
    thrust = xp.clip(command, 0.0, 1.0) * (c0 + c1 + c2)
    thrust = xp.clip(thrust, c0, c0 + c1 + c2)
    if c2 == 0.0:
        return (thrust - c0) / c1
    discriminant = xp.clip(c1 * c1 - 4.0 * c2 * (c0 - thrust), 0.0, None)
    return xp.clip((-c1 + xp.sqrt(discriminant)) / (2.0 * c2), 0.0, 1.0)


def hover_commands(m: Any, mass: Any, thrust_scale: Sequence[Any], thrust_curve: Sequence[Any],
                   nominal_curve: Sequence[float], gravity: float) -> list[Any]:
    """Per rotor, the normalized command that holds a vehicle in the air (4 rows): the rotor speed at which its
    own thrust curve (`thrust_curve`, 3 rows, times the rotor's `thrust_scale`) lifts a quarter of its weight,
    as the command whose setpoint that speed is on the nominal curve the controller inverts
    (`rotor_speed_setpoint`). `m` is a math namespace (sim.kernel_expr), so the native step traces it too."""
    n0, n1, n2 = (float(c) for c in nominal_curve)
    c0, c1, c2 = thrust_curve
    commands = []
    for scale in thrust_scale:
        lift = mass * (0.25 * gravity) / scale - c0
        discriminant = c1 * c1 + 4.0 * c2 * lift
        discriminant = m.where(discriminant < 0.0, m.zeros_like(discriminant), discriminant)
        # the root of c2 w^2 + c1 w - lift in the form that also holds for a linear curve (c2 = 0)
        speed = (2.0 * lift) / (c1 + m.sqrt(discriminant))
        commands.append((n0 + speed * (n1 + n2 * speed)) * (1.0 / (n0 + n1 + n2)))
    return commands


def lag_factors(xp: Any, timestep: float, tau_rise: Any, tau_fall: Any) -> tuple[Any, Any]:
    """Per-substep decay factors exp(-h / tau) for rising and falling speed (0 for tau = 0: no lag)."""
    rise = xp.exp(-timestep / xp.clip(tau_rise, 1e-9, None))
    fall = xp.exp(-timestep / xp.clip(tau_fall, 1e-9, None))
    return rise, fall


def lag_time_constant(xp: Any, timestep: float, decay: Any) -> Any:
    """The time constant tau [s] whose per-substep decay factor (`lag_factors`) is `decay`: about 0 for no lag,
    finite (very long) for a factor of 1."""
    return -timestep / xp.clip(xp.log(xp.clip(decay, 1e-30, None)), None, -1e-9)


def rotor_speed_substeps(
    xp: Any, speed: Any, setpoint: Any, decay_rise: Any, decay_fall: Any, substeps: int
) -> tuple[Any, Any]:
    """Rotor speeds at the start of each of `substeps` physics steps, (K, 4, N), and at the end, (4, N).

    Arrays are feature-major: `speed` and `setpoint` (4, N); `decay_rise`/`decay_fall` broadcast against
    them (e.g. (N,) per-episode values).
    """
    decay = xp.where(setpoint >= speed, decay_rise, decay_fall)
    offset = speed - setpoint
    speeds = []
    for _ in range(substeps):
        speeds.append(setpoint + offset)
        offset = offset * decay
    return xp.stack(speeds, 0), setpoint + offset


def rotor_thrust_substeps(
    xp: Any, speed: Any, setpoint: Any, decay_rise: Any, decay_fall: Any, substeps: int,
    thrust_curve: Any, thrust_scale: Any,
) -> tuple[Any, Any]:
    """Rotor thrusts [N] during each of `substeps` physics steps, (K, 4, N), and the speeds at the end, (4, N).

    `thrust_curve` is the plant's (c0, c1, c2): three floats, or rows (3, N) of per-vehicle values. The same
    numbers as `thrust_from_speed` of `rotor_speed_substeps`' speeds, to rounding, evaluated as the thrust
    curve expanded around the setpoint: thrust = a + e (b + c e) for the speed's offset e from the setpoint,
    with a, b, c fixed over the control step. A substep then costs two multiply-adds and the decay of e (the
    native kernel's form, which this reference matches operation for operation).
    """
    c0, c1, c2 = thrust_curve[0], thrust_curve[1], thrust_curve[2]
    decay = xp.where(setpoint >= speed, decay_rise, decay_fall)
    offset = speed - setpoint
    a = thrust_scale * (c0 + setpoint * (c1 + c2 * setpoint))
    b = thrust_scale * (c1 + (2.0 * c2) * setpoint)
    c = thrust_scale * c2
    thrusts = []
    for _ in range(substeps):
        thrusts.append(a + offset * (b + c * offset))
        offset = offset * decay
    return xp.stack(thrusts, 0), setpoint + offset


def thrust_from_speed(speed: Any, thrust_curve: Sequence[float], thrust_scale: Any) -> Any:
    """Rotor thrust [N] at normalized speed `speed`, times the per-rotor coefficient scale."""
    c0, c1, c2 = (float(c) for c in thrust_curve)
    return thrust_scale * (c0 + speed * (c1 + c2 * speed))
