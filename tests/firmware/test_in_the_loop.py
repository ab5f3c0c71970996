"""Firmware in the loop: the MuJoCo quadrotor flown by PyTorch, ONNX Runtime, the host-compiled C and
the C on the emulated STM32F405 (over its serial port) follows one trajectory from one start, on a named
vehicle's nominal physics with its firmware's thrust limits, with and without action latency."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robo_rl.export.bundle import bundle_checkpoint, read_manifest
from robo_rl.export.errors import ExportError
from robo_rl.export.in_the_loop import bundle_env, compare_targets, fly, plant_config
from sim.quadrotor.model import VEHICLES


def test_a_bundle_with_another_c_prefix_or_a_spaced_path_passes_the_stm32f405_check_and_flies_in_the_loop(
        trained_run, tmp_path):
    """The harness compiled policy.c whatever c_prefix named the files: any other prefix failed the export with
    a make error about a hidden staging folder; so did an out= whose path holds a space (make split it)."""
    from robo_rl.export.bundle import export_bundle

    bundle = export_bundle(trained_run, out=tmp_path / "my exports" / "bundle", pairs=8, prefix="ctrl")
    assert sorted(p.name for p in (bundle / "c").iterdir()) == ["ctrl.c", "ctrl.h", "ctrl_layout.h"]
    m4 = read_manifest(bundle)["verification"]["cortex_m4"]
    assert m4["checked"] and m4["report"]["test_vector_failures"] == 0 and m4["policy_stack_bytes"] > 0
    report = compare_targets(bundle, seed=2, steps=20, checkpoint=trained_run / "best_policy.pt")
    assert max(report[name]["max_deviation_from_pytorch_m"] for name in report) < 1e-4


def test_every_target_flies_the_pytorch_trajectory(exported_bundle, trained_run):
    report = compare_targets(exported_bundle, seed=2, steps=150, checkpoint=trained_run / "best_policy.pt")
    assert set(report) == {"pytorch", "onnxruntime", "c_host", "c_stm32f405_qemu"}
    reference = report["pytorch"]
    assert reference["steps"] > 20  # a real flight, not one that ended at once
    for name, row in report.items():
        assert row["steps"] == reference["steps"], name
        assert row["max_deviation_from_pytorch_m"] < 1e-5, (name, row)
        assert abs(row["return"] - reference["return"]) < 1e-3, (name, row)
        assert abs(row["final_distance_to_target_m"] - reference["final_distance_to_target_m"]) < 1e-5, (name, row)


def test_the_final_distance_is_to_the_tasks_target_not_the_arena_centre(exported_bundle, tmp_path):
    """A reach bundle printed 0.1 m, the distance to the env's centre, where the vehicle was 0.47 m from its
    target: the flight's distance is to the task's own target at its last step."""
    import shutil

    from robo_rl.export.in_the_loop import bundle_env, fly

    bundle = tmp_path / "reach"
    shutil.copytree(exported_bundle, bundle)
    manifest = json.loads((bundle / "policy.json").read_text())
    manifest["env_id"] = "robo_rl/CrazyflieReach-v0"  # the same observation, a target away from the centre
    manifest["training"]["env_config"]["task"] = "reach"
    (bundle / "policy.json").write_text(json.dumps(manifest))
    env = bundle_env(bundle)
    env.reset(seed=3)
    target = np.asarray(env.unwrapped.batch.targets)[:, 0].copy()
    env.close()
    center = np.asarray(manifest["training"]["env_config"]["center"])
    assert np.linalg.norm(target - center) > 0.05
    flight = fly(bundle, lambda o: np.full(4, 0.5, dtype=np.float32), seed=3, steps=2)
    assert flight["final_distance_m"] == pytest.approx(float(np.linalg.norm(flight["positions"][-1] - target)), abs=1e-9)


def test_the_plant_is_the_named_vehicle_with_latency_and_its_firmware_limits(exported_bundle):
    manifest = read_manifest(exported_bundle)
    config = plant_config(manifest, "crazyflie_brushless", latency_steps=2, wind=0.004)
    assert config["vehicle"] == "crazyflie_brushless" and config["vehicle_overrides"] == {}
    assert (config["firmware_thrust_max"], config["firmware_thrust_min"]) == (
        VEHICLES["crazyflie_brushless"].firmware_thrust_max, VEHICLES["crazyflie_brushless"].firmware_thrust_min)
    env = bundle_env(exported_bundle, "crazyflie_brushless", latency_steps=2, wind=0.004)
    _, info = env.reset(seed=0)
    params, nominal = info["params"], env.unwrapped.batch.params
    assert params["latency_steps"] == 2 and np.abs(params["disturbance_force"]).max() <= 0.004
    assert np.abs(params["disturbance_force"]).max() > 0 and not np.any(params["disturbance_torque"])
    assert params["mass"] == nominal.mass == pytest.approx(0.044)  # nominal physics, not drawn
    np.testing.assert_array_equal(params["inertia"], nominal.inertia)
    # the default plant: the deployment vehicle, no latency, no wind, its firmware's limits
    default = plant_config(manifest)
    assert default["vehicle"] == manifest["deployment"]["vehicle"] == "crazyflie_rltools"
    assert default["randomization"]["latency_steps"] == [0, 0] and default["randomization"]["disturbance_force"] == 0
    assert default["firmware_thrust_max"] == manifest["deployment"]["firmware_thrust_max"] == 0.12
    # an older bundle (no deployment block) is flown on its training vehicle
    older = {**manifest, "training": manifest["training"]}
    older.pop("deployment")
    assert plant_config(older)["vehicle"] == manifest["training"]["env_config"]["vehicle"]
    for bad, message in (({"vehicle": "crazyflie_9000"}, "vehicle=crazyflie_9000 is not a known vehicle"),
                         ({"latency_steps": 11}, r"latency_steps=11 must be a whole number of control steps in \[0, 10\]"),
                         ({"wind": float("nan")}, r"wind=nan must be a force in \[0, 1\] N"),
                         # within [0, 1] N, but more than the vehicle can hold: it printed the plant, then a
                         # traceback-free error from the simulator naming the bundle's env_config
                         ({"wind": 1.0}, r"wind=1: config.randomization.disturbance_force 1 N per axis: .*cannot "
                                         r"hold against more than 0.\d+ N per axis")):
        with pytest.raises(ExportError, match=message):
            plant_config(manifest, **bad)
    # a bundle whose own env config is broken names the bundle, whatever the wind asked for (the wind was named
    # by matching the simulator's error text)
    edited = json.loads(json.dumps(manifest))
    edited["training"]["env_config"]["control_hz"] = 0
    with pytest.raises(ExportError, match="the bundle's policy.json training.env_config does not make a quadrotor env"):
        plant_config(edited, wind=0.004)


def test_latency_reaches_the_plant(exported_bundle, trained_run):
    # the same start, the same actions: two steps of latency delay what the motors get, so the flights part
    actions = lambda obs: np.full(4, 0.75, np.float32)  # noqa: E731 (above hover: the vehicle climbs)
    now, late = (fly(exported_bundle, actions, 0, 10, "crazyflie_rltools", k)["positions"] for k in (0, 2))
    assert np.abs(now[-1] - late[-1]).max() > 1e-4


def test_on_the_identified_crazyflie_with_two_steps_of_latency_every_target_stays_within_a_centimetre(
        exported_bundle, trained_run):
    report = compare_targets(exported_bundle, seed=2, steps=150, checkpoint=trained_run / "best_policy.pt",
                             vehicle="crazyflie_rltools", latency_steps=2)
    assert set(report) == {"pytorch", "onnxruntime", "c_host", "c_stm32f405_qemu"}
    reference = report["pytorch"]
    assert reference["steps"] > 20
    for name, row in report.items():
        assert row["steps"] == reference["steps"], name
        assert row["max_deviation_from_pytorch_m"] < 0.01, (name, row)


def test_in_the_loop_command_names_the_plant_and_refuses_a_bad_one_in_one_line(exported_bundle):
    command = [sys.executable, "-m", "robo_rl.export.in_the_loop", f"bundle={exported_bundle}"]
    result = subprocess.run(command + ["vehicle=crazyflie_rltools", "latency_steps=2", "steps=30", "cortex_m4=false"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("plant: crazyflie_rltools (nominal physics), latency 2 steps (20 ms)")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == {"pytorch", "onnxruntime", "c_host"}
    result = subprocess.run(command + ["vehicle=crazyflie_9000"], capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and "vehicle=crazyflie_9000 is not a known vehicle" in lines[0]


def test_a_state_history_policy_flies_alike_on_every_target_with_two_steps_of_latency(state_history_bundle,
                                                                                     state_history_run):
    # the targets get the simulator's observation, its state history (as observed) included
    assert read_manifest(state_history_bundle)["training"]["env_config"]["state_history"] == 4
    report = compare_targets(state_history_bundle, seed=2, steps=100, checkpoint=state_history_run / "best_policy.pt",
                             vehicle="crazyflie_rltools", latency_steps=2)
    assert set(report) == {"pytorch", "onnxruntime", "c_host", "c_stm32f405_qemu"}
    reference = report["pytorch"]
    assert reference["steps"] > 20
    for name, row in report.items():
        assert row["steps"] == reference["steps"], name
        assert row["max_deviation_from_pytorch_m"] < 0.01, (name, row)


def test_the_bundle_names_its_checkpoint_wherever_a_tool_runs(exported_bundle, tmp_path):
    """A bundle exported with run=runs/x recorded runs/x/best_policy.pt: from another folder in_the_loop found no
    checkpoint, and from one that held another runs/x it flew that policy as PyTorch's reference."""
    assert Path(read_manifest(exported_bundle)["training"]["checkpoint"]).is_absolute()
    older = {"training": {"run": "/data/exp/runs/tiny", "checkpoint": "runs/tiny/best_policy.pt"}}
    assert bundle_checkpoint(older) == Path("/data/exp/runs/tiny/best_policy.pt")
    older["training"]["checkpoint"] = "tiny/checkpoints/step_1600.pt"
    assert bundle_checkpoint(older) == Path("/data/exp/runs/tiny/checkpoints/step_1600.pt")


def test_a_checkpoint_that_is_not_the_bundles_policy_is_refused(exported_bundle, state_history_run):
    """Another observation size was torch's shape error as a traceback."""
    with pytest.raises(ExportError, match="does not take this bundle's observations"):
        compare_targets(exported_bundle, steps=5, cortex_m4=False, checkpoint=state_history_run / "best_policy.pt")


@pytest.mark.parametrize("missing", ["policy.onnx", "c/policy.c"])
def test_a_bundle_without_its_onnx_or_c_is_named_as_such(exported_bundle, tmp_path, missing):
    """They were onnxruntime's NoSuchFile and a FileNotFoundError, as tracebacks."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(exported_bundle, bundle)
    (bundle / missing).unlink()
    with pytest.raises(ExportError, match=f"lacks {missing}, which its policy.json lists; export the run again"):
        compare_targets(bundle, steps=5, cortex_m4=False)


@pytest.mark.parametrize("source", ["c/../policy.c", "policy.c", "c/int.c", 5])
def test_a_c_source_that_names_no_c_prefix_is_refused(exported_bundle, tmp_path, source):
    """The C checks build and call c/<c_prefix>.c's symbols, taking the prefix from the file's name: an edited
    policy.json must not name any other file (a number was a TypeError traceback)."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(exported_bundle, bundle)
    manifest = json.loads((bundle / "policy.json").read_text())
    manifest["files"]["c_source"] = source
    (bundle / "policy.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match=r"policy.json's files.c_source is .*, not c/<c_prefix>.c"):
        read_manifest(bundle)


@pytest.mark.parametrize("edit, message", [
    ({"control_hz": 0}, "training.env_config does not make a quadrotor env (config.control_hz must lie in"),
    ({"action_history": 9}, "training.env_config makes 54 observations, its policy reads 50"),
    ({"env_id": "robo_rl/Nope-v0"}, "policy.json env_id 'robo_rl/Nope-v0' is not an env of this robo-rl"),
    # Vehicle.__init__'s TypeError, reported as a bug; an action size that no target reads, flown without a word
    ({"deployment": {"vehicle_overrides": {"foo": 1}}}, "deployment.vehicle_overrides are not the vehicle's fields"),
    ({"action": {"size": 3}}, "policy.json action.size is 3, its env takes 4 actions"),
])
def test_an_edited_env_in_policy_json_is_refused_in_one_error(exported_bundle, tmp_path, edit, message):
    """A ZeroDivisionError, gymnasium's NameNotFound and a matrix-shape RuntimeError, each as a traceback."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(exported_bundle, bundle)
    manifest = json.loads((bundle / "policy.json").read_text())
    if "env_id" in edit:
        manifest.update(edit)
    elif set(edit) & {"deployment", "action"}:
        for section, values in edit.items():
            manifest[section].update(values)
    else:
        manifest["training"]["env_config"].update(edit)
    (bundle / "policy.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match=re.escape(message)):
        compare_targets(bundle, steps=5, cortex_m4=False)




def test_the_policy_observes_in_the_frame_of_the_starts_heading_as_the_deployment_targets_do(exported_bundle,
                                                                                             monkeypatch):
    """The Crazyflie app and the ROS 2 node observe in the frame of the heading they took over at: the first
    observation a target is given faces +x (heading about 0, within the observation noise), whatever the start's."""
    import robo_rl.export.in_the_loop as in_the_loop
    from sim.quadrotor.observation import heading, quadrotor_layout

    plant = in_the_loop.bundle_env

    def turned_plant(*args):  # the plant, started level and still, facing 2 rad from +x
        env = plant(*args)
        reset = env.reset
        center = np.asarray(env.unwrapped.config.center)
        env.reset = lambda seed=None, options=None: reset(seed=seed, options={"initial_state": {
            "position": center, "quaternion": [np.cos(1.0), 0.0, 0.0, np.sin(1.0)], "velocity": [0.0, 0.0, 0.0],
            "angular_velocity": [0.0, 0.0, 0.0]}})
        return env

    monkeypatch.setattr(in_the_loop, "bundle_env", turned_plant)
    seen = []
    flight = fly(exported_bundle, lambda obs: seen.append(obs) or np.full(4, 0.4, np.float32), seed=0, steps=1)
    env = plant(exported_bundle, None, 0, 0.0)
    rotation = quadrotor_layout(env.unwrapped.config.action_history, env.unwrapped.config.state_history).slices()[
        "rotation_matrix"]
    env.close()
    assert len(flight["actions"]) == 1
    assert abs(float(heading(seen[0][rotation]))) < 0.05  # in the world frame: 2 rad
