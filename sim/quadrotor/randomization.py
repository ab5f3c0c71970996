"""Per-episode domain randomization: vehicle parameters, disturbances and latency from uniform numbers."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np

from sim.errors import ConfigError
from sim.quadrotor.config import RandomizationConfig
from sim.quadrotor.model import QuadrotorParams


@dataclasses.dataclass
class EpisodeParams:
    """Physical parameters of n episodes, one row each (SI units). Reported in `info["params"]`."""

    mass: np.ndarray  # (n,) [kg]
    inertia: np.ndarray  # (n, 3) [kg m^2]
    thrust_scale: np.ndarray  # (n, 4) multiplies each rotor's thrust curve
    yaw_torque_coefficients: np.ndarray  # (n, 4) signed [N m / N]
    motor_tau_rise: np.ndarray  # (n,) [s]
    motor_tau_fall: np.ndarray  # (n,) [s]
    disturbance_force: np.ndarray  # (n, 3) world frame [N]
    disturbance_torque: np.ndarray  # (n, 3) world frame [N m]
    latency_steps: np.ndarray  # (n,) int, control steps
    arm_scale: np.ndarray  # (n,) multiplies the rotors' distances from the centre of mass
    thrust_curve: np.ndarray  # (n, 3) c0, c1, c2 [N] of the plant's thrust at normalized rotor speed w

    def as_dict(self) -> dict[str, np.ndarray]:
        """The fields as a dict of the (live, uncopied) arrays."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def assign(self, ids: np.ndarray, other: "EpisodeParams") -> None:
        """Overwrite rows `ids` with `other`'s rows (in order)."""
        for name, value in other.as_dict().items():
            getattr(self, name)[ids] = value


def nominal_params(nominal: QuadrotorParams, n: int) -> EpisodeParams:
    """n copies of the vehicle's nominal parameters, no disturbance, no latency."""
    return EpisodeParams(
        mass=np.full(n, nominal.mass),
        inertia=np.tile(nominal.inertia, (n, 1)),
        thrust_scale=np.ones((n, 4)),
        yaw_torque_coefficients=np.tile(nominal.yaw_torque_coefficients, (n, 1)),
        motor_tau_rise=np.full(n, nominal.motor_tau_rise),
        motor_tau_fall=np.full(n, nominal.motor_tau_fall),
        disturbance_force=np.zeros((n, 3)),
        disturbance_torque=np.zeros((n, 3)),
        latency_steps=np.zeros(n, dtype=np.int64),
        arm_scale=np.ones(n),
        thrust_curve=np.tile(nominal.thrust_curve, (n, 1)),
    )


def sample_params(xp: Any, u: Mapping[str, Any], nominal: QuadrotorParams, config: RandomizationConfig) -> dict[str, Any]:
    """The parameters of n episodes, feature-major (k, n) float64 rows by `EpisodeParams` field, randomized
    around `nominal` within the ranges of `config` by uniforms in [0, 1) (`u`, (k, n) rows named by
    `episode_starts.UNIFORM_FIELDS`; numpy or torch, `xp`). The native step's draw_starts repeats these
    operations in the same order."""
    ones = u["mass_scale"] * 0.0 + 1.0  # (1, n)
    if not config.enabled:
        return {**_nominal_vehicle(xp, ones, nominal), "disturbance_force": xp.concatenate([ones * 0.0] * 3, 0),
                "disturbance_torque": xp.concatenate([ones * 0.0] * 3, 0), "latency_steps": ones * 0.0}
    low, high = (int(v) for v in config.latency_steps)
    drawn = {
        "disturbance_force": _between((-1.0, 1.0), u["disturbance_force"]) * config.disturbance_force,
        "disturbance_torque": _between((-1.0, 1.0), u["disturbance_torque"]) * config.disturbance_torque,
        "latency_steps": xp.floor(low + u["latency_steps"] * (high - low + 1)),  # uniform over low..high
    }
    if not config.vehicle_parameters:
        return {**_nominal_vehicle(xp, ones, nominal), **drawn}
    tau_scale = _between(config.motor_tau_scale, u["motor_tau_scale"])
    mass = nominal.mass * _between(config.mass_scale, u["mass_scale"])
    arm = _between(config.arm_length_scale, u["arm_length_scale"])
    inertia = _rows(xp, ones, nominal.inertia) * _between(config.inertia_scale, u["inertia_scale"]) \
        * _log_between(xp, config.inertia_size_scale, u["inertia_size_scale"])
    if config.inertia_follows_mass_and_arm:
        inertia = inertia * (mass * (1.0 / nominal.mass)) * (arm * arm)
    return {
        "mass": mass,
        "inertia": inertia,
        "yaw_torque_coefficients": _rows(xp, ones, nominal.yaw_torque_coefficients)
        * _between(config.yaw_torque_scale, u["yaw_torque_scale"]),
        "thrust_scale": _between(config.thrust_scale, u["thrust_scale"]),
        "motor_tau_rise": nominal.motor_tau_rise * tau_scale * _between(config.motor_tau_rise_scale, u["motor_tau_rise_scale"]),
        "motor_tau_fall": nominal.motor_tau_fall * tau_scale * _between(config.motor_tau_fall_scale, u["motor_tau_fall_scale"]),
        "arm_scale": arm,
        "thrust_curve": _thrust_curve(xp, u, nominal, config, mass),
        **drawn,
    }


def weakest_thrust_to_weight(config: RandomizationConfig, nominal: QuadrotorParams) -> float:
    """The lowest thrust-to-weight ratio the ranges of `config` (all of them: a curriculum raises the difficulty
    to 1) can draw around `nominal`: every rotor at the low end of thrust_scale, and the drawn thrust-to-weight at
    its low end (where configured) or the heaviest mass."""
    if not (config.enabled and config.vehicle_parameters):
        return nominal.thrust_to_weight
    if config.thrust_to_weight is not None:
        ratio = float(config.thrust_to_weight[0])
    else:
        ratio = nominal.thrust_to_weight / float(config.mass_scale[1])
    return ratio * float(config.thrust_scale[0])


def check_can_hover(config: RandomizationConfig, nominal: QuadrotorParams, name: str = "config.randomization") -> None:
    """ConfigError unless every vehicle the ranges of `config` draw can lift itself: thrust_scale [0, 0] gave NaN
    rewards, a mass_scale up to 10 crashed every episode, both without a word."""
    weakest = weakest_thrust_to_weight(config, nominal)
    if not weakest > 1.0:
        drawn = (f"thrust_to_weight from {config.thrust_to_weight[0]:g}" if config.thrust_to_weight is not None else
                 f"the nominal {nominal.thrust_to_weight:.3g} over mass_scale up to {config.mass_scale[1]:g}")
        raise ConfigError(f"{name}: its weakest vehicle ({drawn}, times thrust_scale from {config.thrust_scale[0]:g}) "
                          f"has thrust-to-weight {weakest:.3g}, and <= 1 cannot lift itself; narrow the ranges")


def check_can_hold(config: RandomizationConfig, nominal: QuadrotorParams, control_dt: float,
                   max_angular_speed: float, name: str = "config.randomization") -> None:
    """ConfigError where the largest disturbance `config` draws is more than its vehicles can fly, at their
    worst draw: a force the weakest and lightest vehicle cannot hold at full thrust; a torque beyond its rotors'
    authority about any axis while they carry its weight; or one control step of the drawn rotor imbalance and
    torque on the least inertia already spinning it past `max_angular_speed`, where episodes end. Such configs
    (a 10 N wind, 0.1 N m, an inertia of 1e-9) trained and evaluated on one-step episodes without a word."""
    if not config.enabled:
        return
    vary = config.vehicle_parameters
    low, high = (lambda r: float(r[0]) if vary else 1.0), (lambda r: float(r[1]) if vary else 1.0)
    ratio = weakest_thrust_to_weight(config, nominal)
    lightest = nominal.mass * low(config.mass_scale) * nominal.gravity  # the weight a given wind moves most
    force = config.disturbance_force
    # each axis up to d: thrust must carry sqrt((W + d)^2 + 2 d^2); solved for d at the weakest thrust
    force_limit = lightest * (math.sqrt(max(3.0 * ratio * ratio - 2.0, 0.0)) - 1.0) / 3.0
    if force > 0 and not force < force_limit:
        raise ConfigError(f"{name}.disturbance_force {force:g} N per axis: its weakest, lightest vehicle (thrust-to-"
                          f"weight {ratio:.3g}, weight {lightest:.3g} N) cannot hold against more than "
                          f"{force_limit:.3g} N per axis even at full thrust")
    # while the rotors carry the weight each can give or take min(T/W - 1, 1) W / 4 (roll and pitch: times
    # their offset, twice on each side; yaw: times the reaction torque per thrust)
    spare = min(ratio - 1.0, 1.0) * lightest
    offset = float(np.abs(nominal.rotor_positions[:, :2]).min())
    yaw_ratio = float(np.abs(nominal.yaw_torque_coefficients).min())
    authority = {"roll and pitch": offset * low(config.arm_length_scale) * spare,
                 "yaw": yaw_ratio * low(config.yaw_torque_scale) * spare}
    torque = config.disturbance_torque
    for axis, limit in authority.items():
        if torque > 0 and not torque < limit:
            raise ConfigError(f"{name}.disturbance_torque {torque:g} N m per axis is beyond its weakest vehicle's "
                              f"rotor authority about {axis}, {limit:.3g} N m while carrying its weight")
    heaviest_hover = nominal.mass * high(config.mass_scale) * nominal.gravity / 4.0
    spread = high(config.thrust_scale) - low(config.thrust_scale)
    imbalance = 2.0 * float(np.abs(nominal.rotor_positions[:, :2]).max()) * high(config.arm_length_scale) \
        * heaviest_hover * spread
    least_inertia = float(nominal.inertia.min()) * low(config.inertia_scale) * low(config.inertia_size_scale)
    if vary and config.inertia_follows_mass_and_arm:
        least_inertia *= low(config.mass_scale) * low(config.arm_length_scale) ** 2
    spin = (imbalance + torque) / least_inertia * control_dt
    if not spin < max_angular_speed:
        raise ConfigError(f"{name}: one control step of its rotors' thrust_scale imbalance and disturbance_torque "
                          f"({imbalance + torque:.3g} N m) spins the least inertia it draws ({least_inertia:.3g} kg m^2, from the "
                          f"vehicle's {float(nominal.inertia.min()):.3g}) to "
                          f"{spin:.3g} rad/s, past max_angular_speed {max_angular_speed:g} rad/s: every episode "
                          "would end at its first step")


def _nominal_vehicle(xp: Any, ones: Any, nominal: QuadrotorParams) -> dict[str, Any]:
    """The vehicle's own physical parameters as (k, n) rows."""
    return {
        "mass": ones * nominal.mass, "inertia": _rows(xp, ones, nominal.inertia),
        "yaw_torque_coefficients": _rows(xp, ones, nominal.yaw_torque_coefficients),
        "thrust_scale": xp.concatenate([ones] * 4, 0),
        "motor_tau_rise": ones * nominal.motor_tau_rise, "motor_tau_fall": ones * nominal.motor_tau_fall,
        "arm_scale": ones * 1.0, "thrust_curve": _rows(xp, ones, nominal.thrust_curve),
    }


def _thrust_curve(xp: Any, u: Mapping[str, Any], nominal: QuadrotorParams, config: RandomizationConfig,
                  mass: Any) -> Any:
    """The plant's thrust curve (3, n) [N]: the nominal one with a drawn share made linear in rotor speed,
    scaled to a drawn thrust-to-weight ratio of the drawn mass where one is configured."""
    share = _between(config.thrust_curve_linear_share, u["thrust_curve_linear_share"])
    linear = (0.0, nominal.thrust_max, 0.0)
    curve = [(1.0 - share) * float(c) + share * line for c, line in zip(nominal.thrust_curve, linear)]
    if config.thrust_to_weight is not None:
        ratio = _between(config.thrust_to_weight, u["thrust_to_weight"])
        scale = ratio * mass * (nominal.gravity / (4.0 * nominal.thrust_max))
        curve = [c * scale for c in curve]
    return xp.concatenate(curve, 0)


# The point each range shrinks towards as difficulty falls: the nominal vehicle's value.
_NOMINAL_POINTS = {"mass_scale": 1.0, "inertia_scale": 1.0, "thrust_scale": 1.0, "yaw_torque_scale": 1.0,
                   "motor_tau_scale": 1.0, "arm_length_scale": 1.0, "thrust_curve_linear_share": 0.0,
                   "motor_tau_rise_scale": 1.0, "motor_tau_fall_scale": 1.0}


def at_difficulty(config: RandomizationConfig, nominal: QuadrotorParams) -> RandomizationConfig:
    """`config` with its ranges shrunk by `config.difficulty` towards the nominal vehicle (the nearest point of a
    range that excludes it): a range [lo, hi] around c becomes [c + d (lo - c), c + d (hi - c)] (in log space
    for the log-uniform inertia size), disturbances and the latency's upper bound are scaled by d."""
    d = float(config.difficulty)
    if d >= 1.0:
        return config

    def shrink(bounds: tuple[float, float], centre: float) -> tuple[float, float]:
        low, high = float(bounds[0]), float(bounds[1])
        c = min(max(centre, low), high)
        return c + d * (low - c), c + d * (high - c)

    changes: dict[str, Any] = {name: shrink(getattr(config, name), centre) for name, centre in _NOMINAL_POINTS.items()}
    low, high = config.inertia_size_scale
    log_low, log_high = shrink((math.log(low), math.log(high)), 0.0)
    changes["inertia_size_scale"] = (math.exp(log_low), math.exp(log_high))
    if config.thrust_to_weight is not None:
        changes["thrust_to_weight"] = shrink(config.thrust_to_weight, nominal.thrust_to_weight)
    latency_low, latency_high = (int(v) for v in config.latency_steps)
    changes["latency_steps"] = (latency_low, max(latency_low, int(round(d * latency_high))))
    changes["disturbance_force"] = d * config.disturbance_force
    changes["disturbance_torque"] = d * config.disturbance_torque
    return dataclasses.replace(config, difficulty=1.0, **changes)


def _between(bounds: tuple[float, float], u: Any) -> Any:
    """Uniforms in [0, 1) mapped onto [low, high)."""
    low, high = float(bounds[0]), float(bounds[1])
    return low + (high - low) * u


def _log_between(xp: Any, bounds: tuple[float, float], u: Any) -> Any:
    """Uniforms in [0, 1) mapped log-uniformly onto [low, high) (1 exactly where low = high = 1)."""
    low, high = math.log(float(bounds[0])), math.log(float(bounds[1]))
    return xp.exp(low + (high - low) * u)


def _rows(xp: Any, ones: Any, values: np.ndarray) -> Any:
    """Per-component constants (k,) as rows (k, n), from a row of ones (1, n)."""
    return xp.concatenate([ones * float(v) for v in values], 0)
