"""Per-episode domain randomization: sample vehicle parameters, disturbances and latency (numpy, seeded)."""

from __future__ import annotations

import dataclasses

import numpy as np

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
    )


def sample_params(
    rng: np.random.Generator, nominal: QuadrotorParams, config: RandomizationConfig, n: int
) -> EpisodeParams:
    """Sample n episodes' parameters around `nominal` within the ranges of `config`."""
    params = nominal_params(nominal, n)
    if not config.enabled:
        return params
    tau_scale = rng.uniform(*config.motor_tau_scale, size=n)
    params.mass *= rng.uniform(*config.mass_scale, size=n)
    params.inertia *= rng.uniform(*config.inertia_scale, size=(n, 3))
    params.thrust_scale = rng.uniform(*config.thrust_scale, size=(n, 4))
    params.yaw_torque_coefficients *= rng.uniform(*config.yaw_torque_scale, size=(n, 1))
    params.motor_tau_rise *= tau_scale
    params.motor_tau_fall *= tau_scale
    params.disturbance_force = rng.uniform(-1.0, 1.0, size=(n, 3)) * config.disturbance_force
    params.disturbance_torque = rng.uniform(-1.0, 1.0, size=(n, 3)) * config.disturbance_torque
    low, high = (int(v) for v in config.latency_steps)
    params.latency_steps = rng.integers(low, high + 1, size=n)
    return params
