"""Configuration of the quadrotor tasks: the config's fields, overrides from nested dicts, validation.

`default_config(task)` gives a task's defaults (its task object's, sim.quadrotor.tasks); `make_config(task, **overrides)`
applies overrides such as `{"randomization": {"mass_scale": [0.8, 1.2]}}` (what Hydra composes) and
validates the result, raising one `ConfigError` that names the offending field and what it allows: every
field has its annotated type, every number is finite and inside `RANGES`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Mapping

from sim.errors import ConfigError
from sim.quadrotor.model import DEFAULT_VEHICLE, VEHICLES, Vehicle, resolve_vehicle
from sim.validation import Interval, at_least_zero, check_ranges, coerce, coerce_fields, merge, positive

Range = tuple[float, float]


@dataclasses.dataclass
class ObservationNoise:
    """Standard deviation of additive Gaussian noise per observation field (same units as the field)."""

    position: float = 0.0
    orientation: float = 0.0
    velocity: float = 0.0
    angular_velocity: float = 0.0


@dataclasses.dataclass
class RandomizationConfig:
    """Per-episode domain randomization: ranges are sampled uniformly and independently per episode.

    Scales multiply the vehicle's nominal value; disturbances are constant over an episode, in the world
    frame, uniform in [-max, max] per axis; latency delays the applied action by whole control steps.
    """

    enabled: bool = True
    vehicle_parameters: bool = True  # false: the vehicle's nominal physics every episode (latency, wind, noise drawn)
    mass_scale: Range = (0.95, 1.05)
    inertia_scale: Range = (0.9, 1.1)  # per axis
    thrust_scale: Range = (0.95, 1.05)  # per rotor: thrust-curve coefficient error
    yaw_torque_scale: Range = (0.9, 1.1)
    motor_tau_scale: Range = (0.8, 1.25)  # rise and fall constants scaled together
    disturbance_force: float = 0.005  # [N] per axis, ~2% of the Crazyflie's weight
    disturbance_torque: float = 1e-5  # [N m] per axis
    latency_steps: tuple[int, int] = (0, 1)  # inclusive range of control steps
    observation_noise: ObservationNoise = dataclasses.field(
        default_factory=lambda: ObservationNoise(0.001, 0.001, 0.002, 0.002)  # learning-to-fly's values
    )
    arm_length_scale: Range = (1.0, 1.0)  # rotor distance from the centre of mass (the moment arm)
    # Total thrust over the drawn weight, 4 thrust_max / (m g): when given, the thrust curve is scaled to it
    # (the action stays a fraction of the drawn vehicle's own maximum thrust); None keeps the nominal thrust.
    thrust_to_weight: Range | None = None
    # The plant's thrust curve against the speed setpoint the (nominal) motor model commands: this share of
    # the nominal curve is replaced by one linear in rotor speed, c(w) = (1 - s) c_nominal(w) + s w thrust_max,
    # which keeps zero and full thrust and bends the command-to-thrust map between (up to ~15% at hover).
    thrust_curve_linear_share: Range = (0.0, 0.0)
    motor_tau_rise_scale: Range = (1.0, 1.0)  # times motor_tau_scale, drawn independently of the fall
    motor_tau_fall_scale: Range = (1.0, 1.0)
    # All three moments of inertia together (the vehicle's size), times inertia_scale per axis. Drawn
    # log-uniformly: the Crazyflie family spans a factor of ~10 (learning-to-fly's model to the Brushless).
    inertia_size_scale: Range = (1.0, 1.0)
    # Moments of inertia also scale with the drawn mass and the square of the drawn arm length, as a rigid
    # frame's do (m L^2): then a heavier or larger draw is not also a more agile one, and the vehicles'
    # angular authority (arm x thrust / inertia) stays within the family's instead of multiplying its spreads.
    inertia_follows_mass_and_arm: bool = False
    # How much of the ranges above is drawn: 1 all of them, 0 the nominal vehicle (each range shrunk towards its
    # nominal point, disturbances and latency scaled down; observation noise kept). A training curriculum raises it.
    difficulty: float = 1.0


@dataclasses.dataclass
class InitialStateConfig:
    """Initial state around the start point, learning-to-fly style: uniform ranges, tilt up to a bound."""

    position_range: float = 0.2  # [m] per axis
    max_tilt_deg: float = 90.0
    velocity_range: float = 1.0  # [m/s] per axis
    angular_velocity_range: float = 1.0  # [rad/s] per axis
    hover_fraction: float = 0.1  # share of episodes that start exactly at rest at the start point


@dataclasses.dataclass
class QuadrotorEnvConfig:
    """Everything that defines a quadrotor task environment. Each task's defaults: sim.quadrotor.tasks."""

    task: str = "hover"
    vehicle: str = DEFAULT_VEHICLE
    vehicle_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)  # fields of model.Vehicle
    control_hz: float = 100.0
    episode_seconds: float = 5.0
    action_history: int = 8  # past actions in the observation (learning-to-fly used 32)
    # past observed velocity errors and body rates in the observation: with the past actions, what a policy
    # needs to tell how this vehicle answers its commands (thrust-to-weight, angular authority, delay)
    state_history: int = 0
    # [m] the observed position error is scaled down to this norm where it is longer (0: not limited): a
    # reference far away looks like one this far in its direction, so that a policy trained on errors of a few
    # decimetres flies to a farther target at the speed it learned for them (reach), rather than meeting an
    # error it never saw
    position_error_limit: float = 0.0
    center: tuple[float, float, float] = (0.0, 0.0, 1.0)  # hover target / start point / figure-eight centre
    reach_range: tuple[float, float, float] = (0.5, 0.5, 0.3)  # reach targets: centre +- this per axis [m]
    figure_eight_amplitude: float = 0.5  # [m] half-width along x; y half-width is half of it
    figure_eight_period: float = 6.0  # [s] per lap
    initial_state: InitialStateConfig = dataclasses.field(default_factory=InitialStateConfig)
    randomization: RandomizationConfig = dataclasses.field(default_factory=RandomizationConfig)
    reward_scales: dict[str, float] = dataclasses.field(default_factory=dict)
    success_radius: float = 0.1  # [m]
    success_max_tilt_deg: float = 30.0
    success_window_seconds: float = 1.0  # criterion must hold for this long, up to now
    max_position_error: float = 0.6  # [m] terminate when any axis of the error exceeds it (learning-to-fly's box)
    max_speed: float = 10.0  # [m/s] terminate beyond: diverging
    max_angular_speed: float = 35.0  # [rad/s] terminate beyond: diverging
    min_altitude: float = 0.05  # [m] terminate below: crash
    # A floor the vehicle can stand on: its centre of mass is held at or above this height [m] (the MJCF's frame
    # standing on z = 0: 0.006), its velocity and body rates stopped where it touches; None: no floor, as in
    # free flight (the tasks end before the vehicle can reach the ground). The MuJoCo paths collide with the
    # MJCF's floor instead.
    floor_height: float | None = None
    # The flight firmware's per-motor thrust limits [N], to train and evaluate as the vehicle flies: commands
    # above firmware_thrust_max / thrust_max are clamped and those below firmware_thrust_min / thrust_max turn
    # the motor off (motor.command_limits). 0 leaves a limit out. A Crazyflie 2.1 with battery compensation
    # (crazyflie-firmware platform_defaults_cf2.h): THRUST_MAX 0.12, THRUST_MIN 0.012817578393224994.
    firmware_thrust_max: float = 0.0
    firmware_thrust_min: float = 0.0

    @property
    def control_dt(self) -> float:
        """Control period [s]."""
        return 1.0 / self.control_hz

    @property
    def episode_steps(self) -> int:
        """Control steps before truncation."""
        return int(round(self.episode_seconds * self.control_hz))


def default_config(task: str = "hover") -> QuadrotorEnvConfig:
    """The default configuration of a quadrotor task (a name in sim.quadrotor.tasks.TASKS)."""
    return _task(task).default_config()


def _task(name: str) -> Any:
    """The task object called `name` (sim.quadrotor.tasks, which builds on this module: imported here)."""
    from sim.quadrotor.tasks import task_named

    return task_named(name)


def make_config(task: str = "hover", config: QuadrotorEnvConfig | Mapping[str, Any] | None = None,
                **overrides: Any) -> QuadrotorEnvConfig:
    """Build a validated config: a full `QuadrotorEnvConfig`, or task defaults updated by nested overrides.

    The one place where a quadrotor config is merged and checked: every field against its annotated type
    (`sim.validation.coerce`), every number finite and inside `RANGES`, then the checks between fields.
    """
    if isinstance(config, QuadrotorEnvConfig):
        result = merge(config, overrides)
    else:
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of QuadrotorEnvConfig fields, got {type(config).__name__}")
        merged = {**dict(config or {}), **overrides}
        result = merge(default_config(merged.pop("task", task)), merged)
    result = coerce(result, QuadrotorEnvConfig, "config")  # a config given whole is checked like overrides
    validate(result)
    result.vehicle_overrides = vehicle_overrides(result)  # as their types (lists from Hydra become tuples)
    return result


# What each number may be (closed ends unless marked open), by field path: wide enough for any experiment
# the simulator can represent, narrow enough that states, rewards and observations stay finite and a step
# costs what it should (huge latencies or action histories are memory, tiny control rates are substeps).
RANGES: dict[str, Interval] = {
    "control_hz": Interval(10.0, 500.0, unit="Hz"),  # 1 to 50 physics steps of 2 ms
    "episode_seconds": positive(3600.0, "s"),
    "action_history": at_least_zero(256),
    "state_history": at_least_zero(64),
    "position_error_limit": at_least_zero(100.0, "m"),
    "center": Interval(-100.0, 100.0, unit="m"),
    "reach_range": at_least_zero(100.0, "m"),
    "figure_eight_amplitude": at_least_zero(100.0, "m"),
    "figure_eight_period": positive(3600.0, "s"),
    "initial_state.position_range": at_least_zero(100.0, "m"),
    "initial_state.max_tilt_deg": at_least_zero(180.0, "deg"),
    "initial_state.velocity_range": at_least_zero(100.0, "m/s"),
    "initial_state.angular_velocity_range": at_least_zero(100.0, "rad/s"),
    "initial_state.hover_fraction": at_least_zero(1.0),
    "randomization.mass_scale": Interval(0.1, 10.0),
    "randomization.inertia_scale": Interval(0.1, 10.0),
    "randomization.thrust_scale": at_least_zero(10.0),
    "randomization.yaw_torque_scale": at_least_zero(10.0),
    "randomization.motor_tau_scale": at_least_zero(10.0),
    "randomization.disturbance_force": at_least_zero(10.0, "N"),  # the Crazyflie weighs 0.27 N
    "randomization.disturbance_torque": at_least_zero(0.1, "N m"),
    "randomization.latency_steps": at_least_zero(50),
    "randomization.arm_length_scale": Interval(0.1, 10.0),
    "randomization.thrust_to_weight": Interval(1.05, 20.0),  # 1 cannot climb; the rotors must lift the vehicle
    "randomization.thrust_curve_linear_share": at_least_zero(1.0),
    "randomization.motor_tau_rise_scale": at_least_zero(10.0),
    "randomization.motor_tau_fall_scale": at_least_zero(10.0),
    "randomization.inertia_size_scale": Interval(0.01, 100.0),
    "randomization.difficulty": at_least_zero(1.0),
    "randomization.observation_noise.position": at_least_zero(10.0, "m"),
    "randomization.observation_noise.orientation": at_least_zero(10.0),
    "randomization.observation_noise.velocity": at_least_zero(10.0, "m/s"),
    "randomization.observation_noise.angular_velocity": at_least_zero(10.0, "rad/s"),
    "reward_scales.*": Interval(-1000.0, 1000.0),
    "success_radius": positive(100.0, "m"),
    "success_max_tilt_deg": at_least_zero(180.0, "deg"),
    "success_window_seconds": at_least_zero(3600.0, "s"),
    "max_position_error": positive(1000.0, "m"),
    "max_speed": positive(1000.0, "m/s"),
    "max_angular_speed": positive(1000.0, "rad/s"),
    "min_altitude": Interval(-100.0, 100.0, unit="m"),
    "floor_height": Interval(0.0, 1.0, unit="m"),
    "firmware_thrust_max": at_least_zero(100.0, "N"),
    "firmware_thrust_min": at_least_zero(100.0, "N"),
}
RANGE_PAIRS = ("randomization.mass_scale", "randomization.inertia_scale", "randomization.thrust_scale",
               "randomization.yaw_torque_scale", "randomization.motor_tau_scale", "randomization.latency_steps",
               "randomization.arm_length_scale", "randomization.thrust_to_weight",
               "randomization.thrust_curve_linear_share", "randomization.motor_tau_rise_scale",
               "randomization.motor_tau_fall_scale", "randomization.inertia_size_scale")
# vehicle_overrides, by Vehicle field (model.py's own checks then hold the vehicle to physical sense)
VEHICLE_RANGES: dict[str, Interval] = {
    "mass": Interval(0.001, 100.0, unit="kg"),
    "inertia": Interval(1e-9, 100.0, unit="kg m^2"),
    "rotor_offset": Interval(0.001, 10.0, unit="m"),
    "thrust_curve": Interval(-1000.0, 1000.0, unit="N"),
    "yaw_torque_ratio": positive(1.0, "N m / N"),
    "motor_tau_rise": at_least_zero(10.0, "s"),
    "motor_tau_fall": at_least_zero(10.0, "s"),
}


def validate(config: QuadrotorEnvConfig) -> None:
    """Raise ConfigError if any value of `config` is out of its valid domain (see `RANGES`)."""
    task = _task(config.task)
    terms = task.term_names
    if config.vehicle not in VEHICLES:
        raise ConfigError(f"unknown vehicle {config.vehicle!r}; known vehicles: {', '.join(sorted(VEHICLES))}")
    unknown = set(config.reward_scales) - set(terms)
    if unknown:
        raise ConfigError(f"unknown reward terms {sorted(unknown)}; terms: {', '.join(terms)}")
    check_ranges(config, RANGES, RANGE_PAIRS, "config")
    overrides = vehicle_overrides(config)
    resolve_vehicle(dataclasses.replace(VEHICLES[config.vehicle], **overrides))  # physical sense first
    check_ranges(Vehicle("custom", **overrides), VEHICLE_RANGES, name="config.vehicle_overrides")
    if not config.success_window_seconds <= config.episode_seconds:
        raise ConfigError(f"config.success_window_seconds must lie in [0, episode_seconds={config.episode_seconds:g}], "
                          f"got {config.success_window_seconds:g}")
    if config.firmware_thrust_max > 0 and not config.firmware_thrust_min < config.firmware_thrust_max:
        raise ConfigError(f"config.firmware_thrust_min must lie below firmware_thrust_max={config.firmware_thrust_max:g} N, "
                          f"got {config.firmware_thrust_min:g}")
    task.validate(config)
    check_starts_inside_bounds(config)
    check_flyable(config)
    if config.episode_steps < 1:
        raise ConfigError(f"config.episode_seconds must last at least one control step (1/control_hz), "
                          f"got {config.episode_seconds:g}")


def check_starts_inside_bounds(config: QuadrotorEnvConfig) -> None:
    """ConfigError where `initial_state` draws starts that the episode's bounds end at their first step: a
    position_range beyond max_position_error, starts below min_altitude, speeds above max_speed or
    max_angular_speed (each axis drawn within its range, the norm up to sqrt(3) times it). Such a config trained
    or evaluated on episodes of one step without a word."""
    start = config.initial_state
    if not start.position_range < config.max_position_error:
        raise ConfigError(f"config.initial_state.position_range {start.position_range:g} m must lie below "
                          f"max_position_error {config.max_position_error:g} m: starts out there end at once")
    lowest = float(config.center[2]) - start.position_range
    if not lowest > config.min_altitude:
        raise ConfigError(f"config: starts reach down to {lowest:g} m (center z {float(config.center[2]):g} - "
                          f"initial_state.position_range {start.position_range:g}), not above min_altitude "
                          f"{config.min_altitude:g} m, where episodes end")
    if config.floor_height is not None and lowest < config.floor_height:  # on the floor is a start (takeoff_land)
        raise ConfigError(f"config: starts reach down to {lowest:g} m (center z {float(config.center[2]):g} - "
                          f"initial_state.position_range {start.position_range:g}), below floor_height "
                          f"{config.floor_height:g} m: they start inside the floor")
    for field, limit, unit in (("velocity_range", "max_speed", "m/s"),
                               ("angular_velocity_range", "max_angular_speed", "rad/s")):
        fastest = math.sqrt(3.0) * getattr(start, field)
        if not fastest < getattr(config, limit):
            raise ConfigError(f"config.initial_state.{field} {getattr(start, field):g} {unit} per axis draws starts up "
                              f"to {fastest:.3g} {unit}, not below {limit} {getattr(config, limit):g} {unit}, where "
                              "episodes end")


def check_flyable(config: QuadrotorEnvConfig) -> None:
    """ConfigError where the randomization draws vehicles that cannot lift themselves or hold against its
    disturbances (`randomization.check_can_hover`, `check_can_hold`): with the config, before a run folder, an
    evaluation's plant line or a batch."""
    from sim.quadrotor.randomization import check_can_hold, check_can_hover

    params = _vehicle_params(vehicle_from_config(config))
    check_can_hover(config.randomization, params)
    check_can_hold(config.randomization, params, config.control_dt, config.max_angular_speed)


@functools.lru_cache(maxsize=64)
def _vehicle_params(vehicle: Vehicle) -> Any:
    """The compiled parameters of `vehicle` (QuadrotorParams), once per vehicle: compiling its model cost every
    config 3.5 ms."""
    from sim.quadrotor.model import QuadrotorParams, load_model

    return QuadrotorParams.from_model(load_model(vehicle))


def vehicle_overrides(config: QuadrotorEnvConfig) -> dict[str, Any]:
    """`config.vehicle_overrides` checked against the fields of `Vehicle` and coerced to their types."""
    vehicle_fields = {f.name for f in dataclasses.fields(Vehicle)} - {"source"}
    unknown = set(config.vehicle_overrides) - vehicle_fields
    if unknown:
        raise ConfigError(f"unknown vehicle_overrides {sorted(map(str, unknown))}; valid: {sorted(vehicle_fields)}")
    return coerce_fields(Vehicle, config.vehicle_overrides, "config.vehicle_overrides")


def vehicle_from_config(config: QuadrotorEnvConfig) -> Vehicle:
    """The vehicle named in `config` with `vehicle_overrides` applied."""
    return dataclasses.replace(VEHICLES[config.vehicle], **vehicle_overrides(config))
