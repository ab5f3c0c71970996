"""Crazyflie MuJoCo model: published vehicle parameter sets and the parameters read from the compiled model.

`crazyflie.xml` is the nominal vehicle. A named vehicle from `VEHICLES` rewrites the relevant MJCF
elements through `mujoco.MjSpec` before compiling, and `QuadrotorParams.from_model` reads every number
the simulation paths use back out of the compiled `MjModel`: the compiled model is the one source of
truth, never a Python constant.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np

from sim.errors import ConfigError

MJCF_PATH = Path(__file__).with_name("crazyflie.xml")
BODY_NAME = "crazyflie"
ROTOR_SITES = ("rotor1", "rotor2", "rotor3", "rotor4")
MOTOR_NAMES = ("motor1", "motor2", "motor3", "motor4")
# Reaction yaw torque sign per rotor (firmware motor order M1..M4); see crazyflie.xml.
YAW_TORQUE_SIGNS = np.array([-1.0, 1.0, -1.0, 1.0])


@dataclasses.dataclass(frozen=True)
class Vehicle:
    """A published quadrotor parameter set, applied on top of `crazyflie.xml`.

    Fields left as None keep the MJCF's value. Rotor speed is normalized to the vehicle's maximum.
    """

    source: str
    mass: float | None = None
    inertia: tuple[float, float, float] | None = None
    rotor_offset: float | None = None  # |x| = |y| of each rotor in the body frame [m]
    thrust_curve: tuple[float, float, float] | None = None  # c0, c1, c2 [N], input w in [0, 1]
    yaw_torque_ratio: float | None = None  # reaction torque per thrust [N m / N]
    motor_tau_rise: float | None = None  # [s]; 0 means no lag
    motor_tau_fall: float | None = None  # [s]


_L2F_MAX_RPM = 21702.0
VEHICLES: dict[str, Vehicle] = {
    "crazyflie_rltools": Vehicle(
        source="rl-tools/rl-tools l2f/parameters/dynamics/crazyflie.h (current RLtools L2F model); "
        "identical to crazyflie.xml",
    ),
    "crazyflie_l2f_paper": Vehicle(
        source="arplaboratory/learning-to-fly simulator/parameters/dynamics/crazy_flie.h "
        "(thrust 3.16e-10 rpm^2, rpm in [0, 21702], one time constant 0.15 s)",
        mass=0.027,
        inertia=(3.85e-6, 3.85e-6, 5.9675e-6),
        rotor_offset=0.028,
        thrust_curve=(0.0, 0.0, 3.16e-10 * _L2F_MAX_RPM**2),
        yaw_torque_ratio=0.005964552,
        motor_tau_rise=0.15,
        motor_tau_fall=0.15,
    ),
    "crazyflie_pybullet_drones": Vehicle(
        source="utiasDSL/gym-pybullet-drones assets/cf2x.urdf (kf 3.16e-10, km 7.94e-12, "
        "thrust-to-weight 2.25, no motor lag)",
        mass=0.027,
        inertia=(1.4e-5, 1.4e-5, 2.17e-5),
        rotor_offset=0.0397 / np.sqrt(2.0),
        thrust_curve=(0.0, 0.0, 2.25 * 0.027 * 9.8 / 4.0),
        yaw_torque_ratio=7.94e-12 / 3.16e-10,
        motor_tau_rise=0.0,
        motor_tau_fall=0.0,
    ),
}
DEFAULT_VEHICLE = "crazyflie_rltools"


def _check_vehicle(name: str, vehicle: Vehicle) -> None:
    positive = {
        "mass": vehicle.mass,
        "rotor_offset": vehicle.rotor_offset,
        "yaw_torque_ratio": vehicle.yaw_torque_ratio,
    }
    for field, value in positive.items():
        if value is not None and not value > 0:
            raise ConfigError(f"vehicle {name!r}: {field} must be > 0, got {value}")
    if vehicle.inertia is not None and not all(v > 0 for v in vehicle.inertia):
        raise ConfigError(f"vehicle {name!r}: inertia must be positive, got {vehicle.inertia}")
    for field in ("motor_tau_rise", "motor_tau_fall"):
        value = getattr(vehicle, field)
        if value is not None and not value >= 0:
            raise ConfigError(f"vehicle {name!r}: {field} must be >= 0, got {value}")
    if vehicle.thrust_curve is not None:
        c0, c1, c2 = vehicle.thrust_curve
        if c0 < 0 or c0 + c1 + c2 <= c0:
            raise ConfigError(f"vehicle {name!r}: thrust curve {vehicle.thrust_curve} must rise from c0 >= 0")


def resolve_vehicle(vehicle: str | Vehicle) -> tuple[str, Vehicle]:
    """Return (name, Vehicle) for a registered name or a custom `Vehicle`; raise ConfigError otherwise."""
    if isinstance(vehicle, Vehicle):
        _check_vehicle("custom", vehicle)
        return "custom", vehicle
    if vehicle not in VEHICLES:
        raise ConfigError(f"unknown vehicle {vehicle!r}; known vehicles: {', '.join(sorted(VEHICLES))}")
    return vehicle, VEHICLES[vehicle]


def load_model(vehicle: str | Vehicle = DEFAULT_VEHICLE) -> mujoco.MjModel:
    """Compile `crazyflie.xml` with a named or custom vehicle's parameters applied."""
    name, spec_values = resolve_vehicle(vehicle)
    spec = mujoco.MjSpec.from_file(str(MJCF_PATH))
    body = spec.body(BODY_NAME)
    if spec_values.mass is not None:
        body.mass = spec_values.mass
    if spec_values.inertia is not None:
        body.inertia = list(spec_values.inertia)
    if spec_values.rotor_offset is not None:
        for site_name in ROTOR_SITES:
            site = spec.site(site_name)
            site.pos = list(np.sign(site.pos[:2]) * spec_values.rotor_offset) + [site.pos[2]]
    numerics = {n.name: n for n in spec.numerics}
    if spec_values.thrust_curve is not None:
        numerics["thrust_curve"].data = list(spec_values.thrust_curve)
    if spec_values.motor_tau_rise is not None:
        numerics["motor_tau_rise"].data = [spec_values.motor_tau_rise]
    if spec_values.motor_tau_fall is not None:
        numerics["motor_tau_fall"].data = [spec_values.motor_tau_fall]
    if spec_values.yaw_torque_ratio is not None:
        for motor, sign in zip(MOTOR_NAMES, YAW_TORQUE_SIGNS):
            gear = list(spec.actuator(motor).gear)
            gear[5] = sign * spec_values.yaw_torque_ratio
            spec.actuator(motor).gear = gear
    model = spec.compile()
    params = QuadrotorParams.from_model(model)
    params.validate(name)
    return model


def _numeric(model: mujoco.MjModel, name: str) -> np.ndarray:
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, name)
    if index < 0:
        raise ConfigError(f"the quadrotor MJCF has no <numeric name={name!r}>")
    start = model.numeric_adr[index]
    return np.array(model.numeric_data[start : start + model.numeric_size[index]], dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class QuadrotorParams:
    """Physical parameters of a compiled quadrotor model (SI units, body frame x forward, z up)."""

    mass: float
    inertia: np.ndarray  # (3,) principal moments [kg m^2]
    rotor_positions: np.ndarray  # (4, 3) [m]
    yaw_torque_coefficients: np.ndarray  # (4,) signed reaction torque per thrust [N m / N]
    thrust_curve: np.ndarray  # (3,) c0, c1, c2: thrust [N] = c0 + c1 w + c2 w^2
    motor_tau_rise: float  # [s]
    motor_tau_fall: float  # [s]
    gravity: float  # magnitude [m/s^2]
    timestep: float  # physics step [s]
    reach: float  # farthest extent of the vehicle's geoms from its centre of mass [m]

    @classmethod
    def from_model(cls, model: mujoco.MjModel) -> "QuadrotorParams":
        """Read the parameters from a compiled Crazyflie model."""
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, BODY_NAME)
        sites = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in ROTOR_SITES]
        motors = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in MOTOR_NAMES]
        if body < 0 or min(sites) < 0 or min(motors) < 0:
            raise ConfigError("model is not a robo-rl quadrotor (missing body, rotor sites or motors)")
        if np.any(model.body_ipos[body] != 0) or np.any(model.body_iquat[body] != [1, 0, 0, 0]):
            raise ConfigError("the quadrotor's inertial frame must coincide with its body frame")
        return cls(
            mass=float(model.body_mass[body]),
            inertia=model.body_inertia[body].copy(),
            rotor_positions=model.site_pos[sites].copy(),
            yaw_torque_coefficients=model.actuator_gear[motors, 5].copy(),
            thrust_curve=_numeric(model, "thrust_curve"),
            motor_tau_rise=float(_numeric(model, "motor_tau_rise")[0]),
            motor_tau_fall=float(_numeric(model, "motor_tau_fall")[0]),
            gravity=float(-model.opt.gravity[2]),
            timestep=float(model.opt.timestep),
            reach=float(max(
                np.linalg.norm(model.geom_pos[g]) + model.geom_rbound[g]
                for g in range(model.ngeom) if model.geom_bodyid[g] == body
            )),
        )

    def validate(self, name: str = "model") -> None:
        """Raise ConfigError unless the parameters describe a physically valid vehicle."""
        if not self.mass > 0:
            raise ConfigError(f"{name}: mass must be > 0, got {self.mass}")
        if not np.all(self.inertia > 0):
            raise ConfigError(f"{name}: inertia must be positive, got {self.inertia}")
        if self.thrust_max <= self.thrust_curve[0] or self.thrust_curve[0] < 0:
            raise ConfigError(f"{name}: thrust curve {self.thrust_curve} must rise from c0 >= 0")
        if 4 * self.thrust_max <= self.mass * self.gravity:
            raise ConfigError(f"{name}: the rotors cannot lift the vehicle (thrust-to-weight <= 1)")
        if self.motor_tau_rise < 0 or self.motor_tau_fall < 0:
            raise ConfigError(f"{name}: motor time constants must be >= 0")

    @property
    def thrust_max(self) -> float:
        """Maximum thrust of one rotor [N] (rotor speed w = 1)."""
        return float(self.thrust_curve.sum())

    @property
    def hover_rotor_speed(self) -> float:
        """Normalized rotor speed at which four rotors carry the weight."""
        c0, c1, c2 = self.thrust_curve
        target = self.mass * self.gravity / 4.0
        if c2 == 0:
            return float((target - c0) / c1)
        return float((-c1 + np.sqrt(c1 * c1 - 4 * c2 * (c0 - target))) / (2 * c2))

    @property
    def hover_command(self) -> float:
        """Normalized thrust command (the action, = firmware normalizedForces) that gives thrust m g."""
        return self.mass * self.gravity / 4.0 / self.thrust_max
