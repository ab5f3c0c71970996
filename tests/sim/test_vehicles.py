"""Named vehicles: each compiles, names its sources, and has the figures its sources publish.

Expected values here are recomputed from the published raw numbers (not read from `VEHICLES`), so a
typo in a vehicle entry or a wrong derivation shows up as a mismatch.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.quadrotor.model import VEHICLES, QuadrotorParams, Vehicle, load_model, resolve_vehicle, thrust_to_weight

G = 9.81
# "How to Model Your Crazyflie Brushless" (arXiv 2603.05944), Eq. 9, w = Omega / 2900 rad/s, highest power first
BRUSHLESS_THRUST = np.poly1d([-0.23009526, 0.56176458, -0.0433191, 0.0])
BRUSHLESS_TORQUE = np.poly1d([-0.0003396, 0.00087032, 0.0002896, 0.0])
L2F_THRUST_MAX = 3.16e-10 * 21702.0**2  # learning-to-fly crazy_flie.h: thrust constant x max rpm^2

# (thrust-to-weight, hover command, relative tolerance, where the figure comes from)
PUBLISHED = {
    "crazyflie_rltools": (1.47, 0.0306 * G / 4 / 0.11012887, 0.005, "crazyflie.h: 30.6 g, curve sums to 0.11013 N"),
    "crazyflie_l2f_paper": (2.25, 1 / 2.25, 0.005, "learning-to-fly: 27 g, 3.16e-10 x 21702^2 N"),
    "crazyflie_pybullet_drones": (2.25, 1 / 2.25, 0.002, "cf2x.urdf thrust2weight 2.25 at its g = 9.8"),
    "crazyflie_brushless": (4 * BRUSHLESS_THRUST(1.0) / (0.044 * G), 0.044 * G / 4 / BRUSHLESS_THRUST(1.0), 1e-6,
                            "Eq. 9 at w = 1, Table II 44 g"),
    "crazyflie_l2f_ai_deck": (4 * L2F_THRUST_MAX / (0.033 * G), 0.033 * G / 4 / L2F_THRUST_MAX, 1e-6,
                              "27 g + AI-deck 4.4 g + Flow deck v2 1.6 g"),
}
# crazyflie-firmware src/platform/interface/platform_defaults_cf2.h / platform_defaults_cf21bl.h
FIRMWARE_CF2 = (0.12, 0.012817578393224994)
FIRMWARE_CF21BL = (0.2, 0.02136263065537499)


def params_of(name: str) -> QuadrotorParams:
    return QuadrotorParams.from_model(load_model(name))


def test_every_named_vehicle_has_published_figures_here():
    assert set(PUBLISHED) == set(VEHICLES)
    assert {"crazyflie_brushless", "crazyflie_l2f_ai_deck"} <= set(VEHICLES)


@pytest.mark.parametrize("name", sorted(VEHICLES))
def test_vehicle_compiles_with_the_thrust_to_weight_and_hover_command_its_sources_give(name):
    params = params_of(name)
    params.validate(name)
    thrust_to_weight, hover_command, rtol, _ = PUBLISHED[name]
    assert params.thrust_to_weight == pytest.approx(thrust_to_weight, rel=rtol)
    assert params.hover_command == pytest.approx(hover_command, rel=rtol)
    # the hover rotor speed really gives m g on the compiled curve
    c0, c1, c2 = params.thrust_curve
    w = params.hover_rotor_speed
    assert 4 * (c0 + c1 * w + c2 * w * w) == pytest.approx(params.mass * params.gravity, rel=1e-9)


def test_thrust_to_weight_of_drawn_vehicles_weighs_each_rotor_by_its_own_thrust_scale():
    # two vehicles: curves summing to 0.1 N and 0.15 N per rotor, 20 g and 40 g, one rotor of the second at half
    curves = np.array([[0.0, 0.04, 0.06], [0.01, 0.04, 0.1]])
    scales = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.5]])
    ratios = thrust_to_weight(curves, np.array([0.02, 0.04]), 10.0, scales)
    np.testing.assert_allclose(ratios, [0.4 / 0.2, 0.15 * 3.5 / 0.4])
    assert thrust_to_weight(curves[0], 0.02, 10.0) == pytest.approx(2.0)


@pytest.mark.parametrize("name", sorted(VEHICLES))
def test_source_names_a_file_or_a_paper_for_every_vehicle(name):
    source = VEHICLES[name].source
    files = re.findall(r"[\w.-]+/[\w./-]+\.(?:h|xml|urdf|py|md)\b", source)
    papers = re.findall(r"arXiv \d{4}\.\d{4,5}", source)
    assert files or papers, source
    if VEHICLES[name].firmware_thrust_max is not None:  # the firmware limits name their file too
        assert re.search(r"platform_defaults_cf2(1bl)?\.h", source), source


@pytest.mark.parametrize("name", sorted(VEHICLES))
def test_firmware_thrust_limits_are_the_platform_defaults_and_leave_room_to_hover(name):
    vehicle, params = VEHICLES[name], params_of(name)
    expected = FIRMWARE_CF21BL if "brushless" in name else FIRMWARE_CF2
    assert (vehicle.firmware_thrust_max, vehicle.firmware_thrust_min) == expected
    assert vehicle.firmware_thrust_min < params.mass * params.gravity / 4 < vehicle.firmware_thrust_max


def test_brushless_matches_the_paper_and_the_firmware():
    params, vehicle = params_of("crazyflie_brushless"), VEHICLES["crazyflie_brushless"]
    assert params.mass == pytest.approx(0.044)
    np.testing.assert_allclose(params.inertia, [3.3e-5, 3.6e-5, 5.9e-5])
    # 0.0707 m between neighbouring rotors (paper) is crazyflie-firmware's ARM_LENGTH 0.050 m diagonal
    np.testing.assert_allclose(np.abs(params.rotor_positions[:, :2]), 0.0707 / 2)
    assert np.hypot(*params.rotor_positions[0, :2]) == pytest.approx(0.050, rel=1e-3)
    assert (params.motor_tau_rise, params.motor_tau_fall) == (0.05, 0.05)
    # Bitcraze: "up to 30 grams thrust each"
    assert params.thrust_max == pytest.approx(0.030 * G, rel=0.03)
    # the quadratic curve keeps the cubic's maximum and stays within 0.012 N of it (4% of the maximum)
    w = np.linspace(0.0, 1.0, 501)
    curve = np.polyval(params.thrust_curve[::-1], w)
    assert params.thrust_max == pytest.approx(BRUSHLESS_THRUST(1.0), rel=1e-12)
    assert np.max(np.abs(curve - np.maximum(BRUSHLESS_THRUST(w), 0.0))) < 0.012
    assert params.thrust_curve[0] == 0.0
    # yaw torque per thrust: the paper's torque/thrust cubics at the speed where the cubic carries m g
    roots = (BRUSHLESS_THRUST - params.mass * G / 4).roots
    hover = min(r.real for r in roots if abs(r.imag) < 1e-12 and 0.1 < r.real < 1.0)
    assert hover == pytest.approx(0.550, abs=1e-3)
    assert vehicle.yaw_torque_ratio == pytest.approx(BRUSHLESS_TORQUE(hover) / BRUSHLESS_THRUST(hover), rel=1e-6)
    np.testing.assert_allclose(np.abs(params.yaw_torque_coefficients), vehicle.yaw_torque_ratio)


def test_deck_loaded_vehicle_is_the_l2f_crazyflie_plus_its_decks():
    base, loaded = params_of("crazyflie_l2f_paper"), params_of("crazyflie_l2f_ai_deck")
    assert loaded.mass == pytest.approx(0.027 + 0.0044 + 0.0016)
    # same rotors, propellers and motors
    np.testing.assert_array_equal(loaded.rotor_positions, base.rotor_positions)
    np.testing.assert_array_equal(loaded.thrust_curve, base.thrust_curve)
    np.testing.assert_array_equal(loaded.yaw_torque_coefficients, base.yaw_torque_coefficients)
    assert (loaded.motor_tau_rise, loaded.motor_tau_fall) == (base.motor_tau_rise, base.motor_tau_fall)
    # inertia grows on every axis, by no more than both decks' masses at their farthest corners would add
    added = loaded.inertia - base.inertia
    assert np.all(added > 0)
    farthest = 0.0044 * (0.026**2 + 0.015**2 + 0.016**2) + 0.0016 * (0.014**2 + 0.0105**2 + 0.008**2)
    assert np.all(added < farthest)
    # a deck on top and one below, symmetric in the plane: roll and pitch grow by the z offsets, yaw does not
    assert added[0] > 0.0044 * 0.012**2 * 0.8 and added[2] < added[1]


def test_firmware_limits_and_inertia_are_checked_where_a_vehicle_is_resolved():
    base = VEHICLES["crazyflie_l2f_paper"]
    with pytest.raises(ConfigError, match="firmware_thrust_min 0.2 N must lie below firmware_thrust_max 0.12 N"):
        resolve_vehicle(dataclasses.replace(base, firmware_thrust_min=0.2))
    with pytest.raises(ConfigError, match="firmware_thrust_max must be >= 0 N"):
        resolve_vehicle(Vehicle("custom", firmware_thrust_max=-1.0))
    # a principal moment above the sum of the other two is no rigid body: refused before MuJoCo sees it
    with pytest.raises(ConfigError, match=r"inertia \(1e-06, 1e-06, 3e-06\) must satisfy Ixx \+ Iyy >= Izz"):
        resolve_vehicle(Vehicle("custom", inertia=(1e-6, 1e-6, 3e-6)))
    resolve_vehicle(Vehicle("custom", inertia=(1e-6, 2e-6, 3e-6)))  # a flat plate is one
    # the limits describe the firmware, not the rigid body: the compiled model is the same without them
    bare = dataclasses.replace(base, firmware_thrust_max=None, firmware_thrust_min=None)
    np.testing.assert_array_equal(load_model(bare).body_mass, load_model(base).body_mass)
