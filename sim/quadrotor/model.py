"""Crazyflie MuJoCo model: published vehicle parameter sets and the parameters read from the compiled model.

`crazyflie.xml` is the nominal vehicle. A named vehicle from `VEHICLES` rewrites the relevant MJCF
elements through `mujoco.MjSpec` before compiling, and `QuadrotorParams.from_model` reads every number
the simulation paths use back out of the compiled `MjModel`: the compiled model is the one source of
truth, never a Python constant.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

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
    `firmware_thrust_max` / `firmware_thrust_min` are the flight firmware's per-motor thrust limits for the
    vehicle's platform (crazyflie-firmware THRUST_MAX / THRUST_MIN): they describe the firmware that flies
    it, not the rigid body, so `load_model` leaves them out of the compiled model.
    """

    source: str
    mass: float | None = None
    inertia: tuple[float, float, float] | None = None
    rotor_offset: float | None = None  # |x| = |y| of each rotor in the body frame [m]
    thrust_curve: tuple[float, float, float] | None = None  # c0, c1, c2 [N], input w in [0, 1]
    yaw_torque_ratio: float | None = None  # reaction torque per thrust [N m / N]
    motor_tau_rise: float | None = None  # [s]; 0 means no lag
    motor_tau_fall: float | None = None  # [s]
    firmware_thrust_max: float | None = None  # [N] per motor
    firmware_thrust_min: float | None = None  # [N] per motor


_Box = tuple[float, tuple[float, float, float], float]  # mass [kg], size (x, y, z) [m], centre height [m]


def _with_boxes(mass: float, inertia: tuple[float, float, float],
                boxes: tuple[_Box, ...]) -> tuple[float, tuple[float, float, float]]:
    """Mass and principal inertia of a vehicle carrying uniform boxes (decks, batteries) on its z axis.

    `boxes` holds (mass [kg], (size x, y, z) [m], height of the box centre above the vehicle's centre of
    mass [m]). Inertia is taken about the combined centre of mass; the small shift of that centre along z
    (about a millimetre for a deck) is not applied to the rotor positions.
    """
    total = mass + sum(m for m, _, _ in boxes)
    z_com = sum(m * z for m, _, z in boxes) / total
    result = np.array(inertia, dtype=np.float64) + mass * z_com**2 * np.array([1.0, 1.0, 0.0])
    for m, (a, b, c), z in boxes:
        own = m / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
        result += own + m * (z - z_com) ** 2 * np.array([1.0, 1.0, 0.0])
    return total, (float(result[0]), float(result[1]), float(result[2]))


def _quadratic_through_max(cubic: tuple[float, float, float, float]) -> tuple[float, float, float]:
    """(0, c1, c2) fitting a published thrust cubic k0 + k1 w + k2 w^2 + k3 w^3 [N] on w in [0, 1].

    The MJCF's thrust curve is quadratic with c0 >= 0: the fit keeps the cubic's maximum thrust exactly
    (so thrust-to-weight and the hover command are the published ones) and minimizes the squared error
    to the cubic clipped at 0 (the cubic dips slightly below 0 at the lowest speeds).
    """
    w = np.linspace(0.0, 1.0, 2001)
    target = np.maximum(np.polynomial.polynomial.polyval(w, cubic), 0.0)
    thrust_max = float(sum(cubic))
    c1 = float(np.linalg.lstsq((w - w * w)[:, None], target - thrust_max * w * w, rcond=None)[0][0])
    return 0.0, c1, thrust_max - c1


# crazyflie-firmware platform_defaults_cf2.h with the default configuration (battery-compensated thrust,
# 2.1+ propellers): the per-motor limits every brushed Crazyflie 2.x flies with.
_CF2_FIRMWARE_THRUST_MAX = 0.12
_CF2_FIRMWARE_THRUST_MIN = 0.012817578393224994
_L2F_MAX_RPM = 21702.0
_L2F_INERTIA = (3.85e-6, 3.85e-6, 5.9675e-6)
# How to Model Your Crazyflie Brushless, Eq. 9: per-motor thrust [N] in w = Omega / 2900 rad/s, (k0..k3).
_BRUSHLESS_THRUST_CUBIC = (0.0, -0.0433191, 0.56176458, -0.23009526)
_BRUSHLESS_TORQUE_CUBIC = (0.0, 0.0002896, 0.00087032, -0.0003396)  # friction/drag torque [N m], same w
_BRUSHLESS_MASS = 0.044
# Decks from bitcraze/hardware products/*/datasheet/index.md: (mass, (x, y, z) size, centre height).
# Heights are not published: the AI-deck sits on the top headers above the battery, about 12 mm above
# the board, and the Flow deck v2 under the board, about 6 mm below (from the 29 mm frame height).
_AI_DECK = (0.0044, (0.052, 0.030, 0.008), 0.012)
_FLOW_DECK_V2 = (0.0016, (0.028, 0.021, 0.004), -0.006)
_L2F_AI_DECK_MASS, _L2F_AI_DECK_INERTIA = _with_boxes(0.027, _L2F_INERTIA, (_AI_DECK, _FLOW_DECK_V2))


def _hover_yaw_torque_ratio(thrust: tuple[float, ...], torque: tuple[float, ...], mass: float) -> float:
    """Torque/thrust ratio of two published rotor cubics at the speed where four rotors carry `mass` m g."""
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection on the rising branch that carries the weight
        mid = 0.5 * (low + high)
        if np.polynomial.polynomial.polyval(mid, thrust) < mass * 9.81 / 4.0:
            low = mid
        else:
            high = mid
    speed = 0.5 * (low + high)
    return float(np.polynomial.polynomial.polyval(speed, torque) / np.polynomial.polynomial.polyval(speed, thrust))


_L2F_PAPER = Vehicle(
    source="arplaboratory/learning-to-fly simulator/parameters/dynamics/crazy_flie.h "
    "(thrust 3.16e-10 rpm^2, rpm in [0, 21702], one time constant 0.15 s); firmware limits: "
    "bitcraze/crazyflie-firmware src/platform/interface/platform_defaults_cf2.h",
    mass=0.027,
    inertia=_L2F_INERTIA,
    rotor_offset=0.028,
    thrust_curve=(0.0, 0.0, 3.16e-10 * _L2F_MAX_RPM**2),
    yaw_torque_ratio=0.005964552,
    motor_tau_rise=0.15,
    motor_tau_fall=0.15,
    firmware_thrust_max=_CF2_FIRMWARE_THRUST_MAX,
    firmware_thrust_min=_CF2_FIRMWARE_THRUST_MIN,
)
VEHICLES: dict[str, Vehicle] = {
    "crazyflie_rltools": Vehicle(
        source="rl-tools/rl-tools l2f/parameters/dynamics/crazyflie.h (current RLtools L2F model); "
        "identical to crazyflie.xml; firmware limits: bitcraze/crazyflie-firmware "
        "src/platform/interface/platform_defaults_cf2.h",
        firmware_thrust_max=_CF2_FIRMWARE_THRUST_MAX,
        firmware_thrust_min=_CF2_FIRMWARE_THRUST_MIN,
    ),
    "crazyflie_l2f_paper": _L2F_PAPER,
    "crazyflie_pybullet_drones": Vehicle(
        source="utiasDSL/gym-pybullet-drones assets/cf2x.urdf (kf 3.16e-10, km 7.94e-12, "
        "thrust-to-weight 2.25, no motor lag); firmware limits: bitcraze/crazyflie-firmware "
        "src/platform/interface/platform_defaults_cf2.h",
        mass=0.027,
        inertia=(1.4e-5, 1.4e-5, 2.17e-5),
        rotor_offset=0.0397 / np.sqrt(2.0),
        thrust_curve=(0.0, 0.0, 2.25 * 0.027 * 9.8 / 4.0),
        yaw_torque_ratio=7.94e-12 / 3.16e-10,
        motor_tau_rise=0.0,
        motor_tau_fall=0.0,
        firmware_thrust_max=_CF2_FIRMWARE_THRUST_MAX,
        firmware_thrust_min=_CF2_FIRMWARE_THRUST_MIN,
    ),
    "crazyflie_brushless": Vehicle(
        source="Graefe, Scherer, Hoenig, Trimpe, 'How to Model Your Crazyflie Brushless', arXiv 2603.05944 "
        "(code: Data-Science-in-Mechanical-Engineering/CrazyflieBrushJAX environment/quadcopter.py): "
        "Table II with propeller guards (mass 44 g, J diag (3.3, 3.6, 5.9)e-5 kg m^2, width 0.0707 m "
        "between rotors, = ARM_LENGTH 0.050 m diagonal in crazyflie-firmware platform_defaults_cf21bl.h); "
        "motor first order T = 0.05 s, gain K = 2900 rad/s, so w = Omega / 2900; thrust and torque cubics "
        "of Eq. 9 in w. Derived here: thrust curve = least-squares quadratic through the cubic's maximum "
        "0.28835 N (max error 0.011 N), yaw torque ratio = torque/thrust of the cubics at hover (the "
        "rotor-inertia torque J_m dOmega/dt is not modelled); firmware limits: bitcraze/crazyflie-firmware "
        "src/platform/interface/platform_defaults_cf21bl.h (THRUST_MAX 0.2 N, THRUST_MIN 0.02136 N)",
        mass=_BRUSHLESS_MASS,
        inertia=(3.3e-5, 3.6e-5, 5.9e-5),
        rotor_offset=0.0707 / 2.0,
        thrust_curve=_quadratic_through_max(_BRUSHLESS_THRUST_CUBIC),
        yaw_torque_ratio=_hover_yaw_torque_ratio(_BRUSHLESS_THRUST_CUBIC, _BRUSHLESS_TORQUE_CUBIC, _BRUSHLESS_MASS),
        motor_tau_rise=0.05,
        motor_tau_fall=0.05,
        firmware_thrust_max=0.2,
        firmware_thrust_min=0.02136263065537499,
    ),
    "crazyflie_l2f_ai_deck": dataclasses.replace(
        _L2F_PAPER,
        source="crazyflie_l2f_paper's Crazyflie 2.1 (arplaboratory/learning-to-fly simulator/parameters/"
        "dynamics/crazy_flie.h: 27 g, rotors, thrust, yaw torque, 0.15 s lag) carrying an AI-deck 1.1 "
        "on top (4.4 g, 52 x 30 x 8 mm) and a Flow deck v2 underneath (1.6 g, 28 x 21 x 4 mm; "
        "bitcraze/hardware products/ai-deck and flow-deck-2 datasheet/index.md): 33.0 g. Derived here: "
        "inertia = the base inertia plus each deck as a uniform box, centre 12 mm above / 6 mm below "
        "the board (assumed, not published), about the combined centre of mass; firmware limits: "
        "bitcraze/crazyflie-firmware src/platform/interface/platform_defaults_cf2.h",
        mass=_L2F_AI_DECK_MASS,
        inertia=_L2F_AI_DECK_INERTIA,
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
    if vehicle.inertia is not None and 2 * max(vehicle.inertia) > sum(vehicle.inertia) * (1 + 1e-9):
        # no rigid body has one principal moment above the sum of the other two (MuJoCo refuses to compile it)
        raise ConfigError(f"vehicle {name!r}: inertia {vehicle.inertia} must satisfy Ixx + Iyy >= Izz "
                          "(and each permutation)")
    for field in ("motor_tau_rise", "motor_tau_fall"):
        value = getattr(vehicle, field)
        if value is not None and not value >= 0:
            raise ConfigError(f"vehicle {name!r}: {field} must be >= 0, got {value}")
    if vehicle.thrust_curve is not None:
        c0, c1, c2 = vehicle.thrust_curve
        if c0 < 0 or c0 + c1 + c2 <= c0:
            raise ConfigError(f"vehicle {name!r}: thrust curve {vehicle.thrust_curve} must rise from c0 >= 0")
    for field in ("firmware_thrust_max", "firmware_thrust_min"):
        value = getattr(vehicle, field)
        if value is not None and not value >= 0:
            raise ConfigError(f"vehicle {name!r}: {field} must be >= 0 N, got {value}")
    if (vehicle.firmware_thrust_max is not None and vehicle.firmware_thrust_min is not None
            and not vehicle.firmware_thrust_min < vehicle.firmware_thrust_max):
        raise ConfigError(f"vehicle {name!r}: firmware_thrust_min {vehicle.firmware_thrust_min} N must lie below "
                          f"firmware_thrust_max {vehicle.firmware_thrust_max} N")


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


def place_floor(model: mujoco.MjModel, floor_height: float) -> None:
    """Move `model`'s floor plane so that the vehicle, standing level on it, has its centre of mass at
    `floor_height` (where the torch path's floor holds it): the plane lies the frame's half-height lower."""
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    frame = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "frame")
    model.geom_pos[floor, 2] = floor_height - model.geom_size[frame, 2]


def _numeric(model: mujoco.MjModel, name: str) -> np.ndarray:
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, name)
    if index < 0:
        raise ConfigError(f"the quadrotor MJCF has no <numeric name={name!r}>")
    start = model.numeric_adr[index]
    return np.array(model.numeric_data[start : start + model.numeric_size[index]], dtype=np.float64)


def thrust_to_weight(thrust_curve: Any, mass: Any, gravity: float, thrust_scale: Any = 1.0) -> Any:
    """The full thrust of the four rotors over the weight m g.

    `thrust_curve` is (..., 3), c0 c1 c2 per vehicle (a rotor's full thrust is their sum, at speed 1); `mass` is
    (...) [kg]; `thrust_scale` is 1, or (..., 4) per-rotor factors on the curve. A float for one vehicle, else
    an array of the leading shape."""
    rotor_max = np.sum(np.asarray(thrust_curve, dtype=float), axis=-1)
    full = np.sum(np.asarray(rotor_max)[..., None] * np.broadcast_to(np.asarray(thrust_scale, dtype=float),
                                                                      np.shape(rotor_max) + (4,)), axis=-1)
    ratio = full / (np.asarray(mass, dtype=float) * gravity)
    return float(ratio) if np.ndim(ratio) == 0 else ratio


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
        if self.thrust_to_weight <= 1.0:
            raise ConfigError(f"{name}: the rotors cannot lift the vehicle (thrust-to-weight <= 1)")
        if self.motor_tau_rise < 0 or self.motor_tau_fall < 0:
            raise ConfigError(f"{name}: motor time constants must be >= 0")

    @property
    def thrust_max(self) -> float:
        """Maximum thrust of one rotor [N] (rotor speed w = 1)."""
        return float(self.thrust_curve.sum())

    @property
    def thrust_to_weight(self) -> float:
        """Full thrust of the four rotors over the weight (`thrust_to_weight`)."""
        return thrust_to_weight(self.thrust_curve, self.mass, self.gravity)

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
