"""The core's bundle loading and ONNX inference: recorded pairs reproduced, clear errors for bad bundles."""

import json
import re
import shutil

import numpy as np
import pytest

from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.core.inference import OnnxPolicy
from robo_rl_ros.core.quadrotor import RESUME_STATES
from tests.ros2.conftest import HOVER_BUNDLE


def test_inference_reproduces_recorded_pairs(hover_bundle):
    policy = OnnxPolicy(hover_bundle)
    assert len(hover_bundle.recorded_observations) == 16
    for obs, expected in zip(hover_bundle.recorded_observations, hover_bundle.recorded_actions):
        np.testing.assert_allclose(policy(obs), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(policy.batch(hover_bundle.recorded_observations), hover_bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def test_freshly_exported_bundle_loads_and_reproduces_its_pairs(exported_bundle):
    bundle = load_bundle(exported_bundle)
    np.testing.assert_allclose(OnnxPolicy(bundle).batch(bundle.recorded_observations), bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def test_bundle_contents(hover_bundle):
    assert hover_bundle.control_hz == 100.0 and hover_bundle.is_quadrotor
    assert (hover_bundle.robot, hover_bundle.task) == ("quadrotor", "hover")
    assert [f.name for f in hover_bundle.layout] == ["position_error", "rotation_matrix", "velocity_error",
                                                     "angular_velocity", "action_history"]
    assert hover_bundle.field("action_history").size == 32


def _copy(tmp_path):
    target = tmp_path / "bundle"
    shutil.copytree(HOVER_BUNDLE, target)
    return target


def _edit(path, change):
    manifest = json.loads((path / "policy.json").read_text())
    change(manifest)
    (path / "policy.json").write_text(json.dumps(manifest))


def test_missing_files(tmp_path):
    with pytest.raises(BundleError, match="no policy.json"):
        load_bundle(tmp_path)
    bundle = _copy(tmp_path)
    (bundle / "policy.onnx").unlink()
    with pytest.raises(BundleError, match="ONNX file .* does not exist"):
        load_bundle(bundle)


def test_corrupt_files(tmp_path):
    bundle = _copy(tmp_path)
    (bundle / "policy.onnx").write_bytes(b"not an onnx model")
    with pytest.raises(BundleError, match="ONNX Runtime cannot load"):
        OnnxPolicy(load_bundle(bundle))
    (bundle / "policy.json").write_text("{ truncated")
    with pytest.raises(BundleError, match="not valid JSON"):
        load_bundle(bundle)


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(format="something/2"), "format must be"),
    (lambda m: m["observation"].update(size=51), "covers 50 entries but observation.size is 51"),
    (lambda m: m["observation"]["layout"][1].update(offset=4), "does not follow"),
    (lambda m: m["action"].update(low=[0.0, 0.0, 0.0]), "action.low must be 4 finite numbers"),
    (lambda m: m["action"].update(safe_action=[2.0] * 4), "outside"),
    (lambda m: m.pop("control_hz"), "missing or malformed entry"),
])
def test_inconsistent_manifest(tmp_path, change, message):
    bundle = _copy(tmp_path)
    _edit(bundle, change)
    with pytest.raises(BundleError, match=message):
        load_bundle(bundle)


def test_onnx_shape_mismatch(tmp_path):
    bundle = _copy(tmp_path)

    def grow(manifest):
        manifest["observation"]["size"] = 54
        manifest["observation"]["layout"][-1]["size"] = 36
        for pair in manifest["recorded_pairs"]:
            pair["observation"] += [0.0] * 4
    _edit(bundle, grow)
    with pytest.raises(BundleError, match="maps 50 -> 4 entries, policy.json declares 54 -> 4"):
        OnnxPolicy(load_bundle(bundle))


# --- bad bundles the node must refuse at start ---

def _scale_weights(path, factor):
    """Every weight matrix of the bundle's policy.onnx multiplied by `factor` (NaN: all NaN)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path / "policy.onnx")
    for tensor in model.graph.initializer:
        values = numpy_helper.to_array(tensor)
        if values.ndim == 2:
            tensor.CopyFrom(numpy_helper.from_array((values * factor).astype(np.float32), tensor.name))
    onnx.save(model, path / "policy.onnx")


def _controller(path):
    from robo_rl_ros.core.quadrotor import QuadrotorPolicyController, QuadrotorSettings

    return QuadrotorPolicyController(load_bundle(path), QuadrotorSettings((0.0, 0.0, 1.0)))


@pytest.mark.parametrize("change, message", [
    (lambda m: m["training"]["vehicle_parameters"].update(thrust_max=float("nan")),
     "training.vehicle_parameters.thrust_max is nan; every number in policy.json must be finite"),
    (lambda m: m["training"]["vehicle_parameters"]["inertia"].__setitem__(1, float("inf")),
     r"training.vehicle_parameters.inertia\[1\] is inf"),
    (lambda m: m["recorded_pairs"][3]["observation"].__setitem__(7, float("-inf")),
     r"recorded_pairs\[3\].observation\[7\] is -inf"),
    (lambda m: m.update(control_hz=float("inf")), "control_hz is inf"),
    (lambda m: m.update(control_hz=1e6), r"control_hz is 1000000.0; allowed: a number in \(0, 1000\] Hz"),
    (lambda m: m["observation"]["normalization"]["std"].__setitem__(0, 0.0), "normalization.std must be > 0"),
    (lambda m: m["recorded_pairs"][0]["observation"].__setitem__(0, 1e39), "beyond float32's range"),
    (lambda m: m["recorded_pairs"][2]["action"].__setitem__(0, 1.5), r"recorded_pairs\[2\].action .* outside"),
    (lambda m: m.update(recorded_pairs=[]), "at least one"),
])
def test_non_finite_or_out_of_range_numbers_are_refused(tmp_path, change, message):
    bundle = _copy(tmp_path)
    _edit(bundle, change)
    with pytest.raises(BundleError, match=message):
        load_bundle(bundle)


@pytest.mark.parametrize("field, value, allowed", [
    ("thrust_max", -0.1, r"a finite number in \[0.0001, 1000\] N"),
    ("mass", 0.0, r"a finite number in \[0.001, 100\] kg"),
    ("gravity", -9.81, r"a finite number in \[0.1, 100\] m/s\^2"), ("hover_command", 1.2, r"a number in \(0, 1\)"),
])
def test_vehicle_parameters_out_of_range_are_refused(tmp_path, field, value, allowed):
    bundle = _copy(tmp_path)
    _edit(bundle, lambda m: m["training"]["vehicle_parameters"].update({field: value}))
    with pytest.raises(BundleError, match=f"vehicle_parameters.{field} is {value}; allowed: {allowed}"):
        _controller(bundle)


def test_nan_weights_are_refused(tmp_path):
    bundle = _copy(tmp_path)
    _scale_weights(bundle, np.nan)
    with pytest.raises(BundleError, match="weight 'actor.trunk.0.weight' holds 3200 NaN or infinite values"):
        OnnxPolicy(load_bundle(bundle))


def test_a_network_that_does_not_reproduce_its_recorded_pairs_is_refused(tmp_path):
    bundle = _copy(tmp_path)
    _scale_weights(bundle, -3.0)
    with pytest.raises(BundleError, match=r"recorded_pairs\[\d+\] differs by 0.9\d+ \(allowed: 0.0001\)"):
        _controller(bundle)


def test_pair_tolerance_is_what_the_committed_bundles_meet_with_room(hover_bundle):
    from robo_rl_ros.core.inference import PAIR_TOLERANCE

    policy = OnnxPolicy(hover_bundle)
    error = np.abs(policy.batch(hover_bundle.recorded_observations) - hover_bundle.recorded_actions).max()
    assert error < PAIR_TOLERANCE / 100  # 3.6e-7 here; the tolerance is 1e-4


@pytest.mark.parametrize("section, value, name", [
    ("observation.normalization", -1, "observation.normalization"),
    ("observation.normalization", [1.0], "observation.normalization"),
    ("training", -1e308, "training"),
    ("training", [], "training"),
    ("training.env_config", "hover", "training.env_config"),
    ("action", None, "action"),
])
def test_a_section_that_is_not_an_object_is_one_bundle_error(tmp_path, section, value, name):
    # found by the fuzz suite (tests/fuzz): these were AttributeError tracebacks out of the loader
    bundle = _copy(tmp_path)

    def change(manifest):
        *parents, key = section.split(".")
        node = manifest
        for parent in parents:
            node = node[parent]
        node[key] = value

    _edit(bundle, change)
    with pytest.raises(BundleError, match=f"{name} must be a JSON object"):
        load_bundle(bundle)


@pytest.mark.parametrize("change, path", [
    (lambda m: m["recorded_pairs"][6]["observation"].__setitem__(6, 10**400), r"recorded_pairs\[6\].observation\[6\]"),
    (lambda m: m["training"]["vehicle_parameters"].update(rotor_positions=10**400),
     "training.vehicle_parameters.rotor_positions"),
    (lambda m: m["observation"]["normalization"]["std"].__setitem__(4, -10**400), r"normalization.std\[4\]"),
])
def test_an_integer_beyond_float_range_is_one_bundle_error(tmp_path, change, path):
    # found by the fuzz suite: JSON reads 10**400 as a Python int, and its float conversion was an OverflowError
    bundle = _copy(tmp_path)
    _edit(bundle, change)
    with pytest.raises(BundleError, match=f"{path} is an integer beyond float64's range; every number in policy.json "
                                          "must be finite"):
        load_bundle(bundle)


@pytest.mark.parametrize("files, message", [
    (None, "files must be a JSON object, got nothing"),
    (["policy.onnx"], "files must be a JSON object, got list"),
    ({}, "files.onnx is None; allowed: the relative name of a file inside the bundle"),
    ({"onnx": 7}, "files.onnx is 7; allowed: the relative name"),
    ({"onnx": ""}, "files.onnx is ''; allowed"),
    ({"onnx": "../bundle/policy.onnx"}, r"files.onnx is '../bundle/policy.onnx', a path out of the bundle"),
    ({"onnx": "ABSOLUTE"}, "a path out of the bundle"),
])
def test_files_onnx_must_name_a_file_inside_the_bundle(tmp_path, files, message):
    # found by the fuzz suite: a missing `files` was a KeyError, a list or a number a TypeError, out of the loader
    bundle = _copy(tmp_path)
    if files == {"onnx": "ABSOLUTE"}:  # a path that exists: refused for where it is, not for being missing
        files = {"onnx": str(bundle / "policy.onnx")}
    _edit(bundle, lambda m: m.pop("files") if files is None else m.update(files=files))
    with pytest.raises(BundleError, match=message):
        load_bundle(bundle)


def test_an_onnx_file_linked_from_outside_the_bundle_is_refused(tmp_path):
    bundle = _copy(tmp_path)
    outside = tmp_path / "elsewhere.onnx"
    (bundle / "policy.onnx").rename(outside)
    (bundle / "policy.onnx").symlink_to(outside)
    with pytest.raises(BundleError, match="leads outside the bundle"):
        load_bundle(bundle)


def _vehicle(manifest):
    return manifest["training"]["vehicle_parameters"]


@pytest.mark.parametrize("change, message", [
    # found by the fuzz suite: 1e308 in a rotor position was a 'math domain error' ValueError out of the first tick
    (lambda m: _vehicle(m)["rotor_positions"][0].__setitem__(1, 1e308),
     r"rotor_positions\[0\]\[1\] is 1e\+308; allowed: a finite number in \[-10, 10\] m"),
    (lambda m: _vehicle(m)["yaw_torque_coefficients"].__setitem__(3, -1e308),
     r"yaw_torque_coefficients\[3\] is -1e\+308; allowed: a finite number in \[-1, 1\] N m / N"),
    (lambda m: _vehicle(m)["inertia"].__setitem__(0, 1e-300),
     r"inertia\[0\] is 1e-300; allowed: a finite number in \[1e-09, 100\]"),
    (lambda m: _vehicle(m).update(thrust_max=1e300),
     r"thrust_max is 1e\+300; allowed: a finite number in \[0.0001, 1000\] N"),
    (lambda m: _vehicle(m).update(mass=50.0), "thrust_max 0.148829 N with mass 50 kg and gravity 9.81 m/s.2 gives a "
                                              "thrust-to-weight ratio of 0.00121; allowed: above 1"),
    (lambda m: _vehicle(m)["inertia"].__setitem__(2, 1e-4),
     r"inertia is \[3.85e-06, 3.85e-06, 0.0001\]; allowed: principal moments of a rigid body"),
    (lambda m: _vehicle(m)["rotor_positions"].__setitem__(2, [0.0, 0.0, 0.01]),
     r"rotor_positions\[2\] lies 0 m from the centre in x-y; allowed: at least 0.001 m"),
])
def test_a_vehicle_no_multirotor_could_be_is_refused_at_start(tmp_path, change, message):
    bundle = _copy(tmp_path)
    _edit(bundle, change)
    with pytest.raises(BundleError, match=f"policy.json training.vehicle_parameters.{message}"):
        _controller(bundle)


def _deployed_on(tmp_path, vehicle):
    """The committed hover bundle (trained on crazyflie_l2f_paper, exported before bundles named their
    deployment vehicle) with the `deployment` block an export for `vehicle` writes."""
    from robo_rl.export.bundle import deployment_block
    from sim.quadrotor.config import make_config

    bundle = _copy(tmp_path)
    env_config = json.loads((bundle / "policy.json").read_text())["training"]["env_config"]
    block = deployment_block(make_config(env_config["task"], env_config), vehicle)
    _edit(bundle, lambda m: m.update(deployment=block))
    return bundle, block


def test_the_deployment_vehicle_turns_actions_into_thrust_and_starts_the_history(tmp_path, hover_bundle):
    from robo_rl_ros.core.crazyflie import VehicleModel, motor_wrench
    from robo_rl_ros.core.observation import VehicleState

    bundle, block = _deployed_on(tmp_path, "crazyflie_rltools")
    trained = hover_bundle.vehicle_parameters
    assert block["thrust_max_newton"] != pytest.approx(trained["thrust_max"], rel=0.1)  # 0.110 N against 0.149 N
    vehicle = VehicleModel.from_bundle(load_bundle(bundle))
    assert vehicle.thrust_max == block["thrust_max_newton"] and vehicle.mass == block["vehicle_parameters"]["mass"]
    np.testing.assert_array_equal(vehicle.inertia, block["vehicle_parameters"]["inertia"])
    thrust, _ = motor_wrench(vehicle, np.full(4, 0.5))
    assert thrust == pytest.approx(2.0 * block["thrust_max_newton"])
    # the controller's action history starts at the deployment vehicle's hover command, and its setpoint's
    # collective thrust is the action in that vehicle's newtons
    controller = _controller(bundle)
    for i in range(RESUME_STATES):  # the policy takes over on a steady stream
        controller.update_state(0.01 * i, VehicleState(np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]),
                                                       np.zeros(3), np.zeros(3)))
    result = controller.tick(0.01 * RESUME_STATES)
    assert result.flying and np.allclose(result.observation[18:], block["hover_command"])
    assert result.setpoint.thrust == pytest.approx(float(np.sum(result.action)) * block["thrust_max_newton"])
    # a bundle without the block (the committed one) flies its training vehicle, as before
    assert VehicleModel.from_bundle(hover_bundle).thrust_max == trained["thrust_max"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d["vehicle_parameters"].update(thrust_max=1e300),
     r"policy.json deployment.thrust_max_newton is 0.11\d* but deployment.vehicle_parameters.thrust_max is 1e\+300"),
    (lambda d: d.update(thrust_max_newton=1e300, vehicle_parameters={**d["vehicle_parameters"], "thrust_max": 1e300}),
     r"policy.json deployment.vehicle_parameters.thrust_max is 1e\+300; allowed: a finite number in \[0.0001, 1000\] N"),
    (lambda d: d["vehicle_parameters"].update(mass=50.0),
     r"policy.json deployment.vehicle_parameters.thrust_max 0.110129 N with mass 50 kg .* allowed: above 1"),
    (lambda d: d.update(hover_command=1.5, vehicle_parameters={**d["vehicle_parameters"], "hover_command": 1.5}),
     r"policy.json deployment.vehicle_parameters.hover_command is 1.5; allowed: a number in \(0, 1\)"),
    (lambda d: d.update(vehicle_parameters=None), "policy.json deployment.vehicle_parameters must be a JSON object"),
])
def test_a_deployment_vehicle_no_multirotor_could_be_is_refused_at_start(tmp_path, change, message):
    bundle, _ = _deployed_on(tmp_path, "crazyflie_rltools")
    _edit(bundle, lambda m: change(m["deployment"]))
    with pytest.raises(BundleError, match=message):
        _controller(bundle)


def test_the_kinds_of_robot_and_task_come_from_policy_json_not_from_the_env_id(tmp_path):
    """A target decides what it drives by policy.json's `robot`: an env id that looks like a quadrotor's does not
    make an arm bundle one, a bundle without the entry is refused (exported before it was recorded)."""
    from robo_rl_ros.core.quadrotor import QuadrotorPolicyController, QuadrotorSettings

    bundle = _copy(tmp_path)
    _edit(bundle, lambda m: m.update(robot="arm"))
    arm = load_bundle(bundle)
    assert arm.env_id.startswith("robo_rl/Crazyflie") and not arm.is_quadrotor
    with pytest.raises(BundleError, match="robot 'arm' with 4 actions; this node flies robot 'quadrotor'"):
        QuadrotorPolicyController(arm, QuadrotorSettings(target_position=(0.0, 0.0, 1.0)))
    _edit(bundle, lambda m: m.pop("robot"))
    with pytest.raises(BundleError, match="robot is None; allowed: 'quadrotor', 'arm'.*export it again"):
        load_bundle(bundle)
    _edit(bundle, lambda m: m.update(robot="quadrotor", task=""))
    with pytest.raises(BundleError, match="task is ''"):
        load_bundle(bundle)


def test_a_bundle_path_with_a_trailing_blank_is_shown_quoted(hover_bundle):
    """`no policy.json in <path>` with the blank invisible read as if the folder lacked the file it holds."""
    with pytest.raises(BundleError, match=re.escape(f"no policy.json in '{hover_bundle.directory} '")):
        load_bundle(f"{hover_bundle.directory} ")
