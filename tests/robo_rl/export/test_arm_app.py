"""The arm app (firmware/arm) in the loop with the MuJoCo SO-ARM100 behind its simulated servo bus: on the
emulated STM32F405 against PyTorch on the same seeded episodes, and compiled for this PC (the same C with
board_host.c) under its safety faults and a protocol fuzz of both links."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robo_rl.export import host_link
from robo_rl.export.arm_firmware import ArmFirmwareSettings, EmulatedArmBoard, build_arm_app, build_host_app
from robo_rl.export.arm_in_the_loop import (EMULATED_BOARD_SETTINGS, ArmPlant, LinkFaults, _BoardLink, _flags,
                                            _HostAppLink, prepare_app, run_firmware, run_reference)
from robo_rl.export import feetech
from robo_rl.export.feetech import ERROR_OVERLOAD
from tests.robo_rl.export.arm_bundles import arm_bundle

State, Reason = host_link.SafetyState, host_link.Reason
GOAL = feetech.REGISTERS["goal_position"]
EPISODES = 12  # seeds 0-11; 20 cost `make test` 40 s more (reach 100%, pick-cube 83% on board and in PyTorch)
JOINT_TOLERANCE = 2e-3  # [rad] about one servo step: float32 on the board, float64 in Python, same goals in steps
# where the two round one goal to different steps, contact (grasping the cube) can amplify it: measured, 18 of 20
# pick-cube episodes and 20 of 20 reach episodes stay within a step, none beyond 0.03 rad
SAME_TRAJECTORIES = {"reach": 1.0, "pick-cube": 0.8}
MAX_DEVIATION = 0.05  # [rad]


@pytest.fixture(scope="module")
def reach(tmp_path_factory):
    """The committed SO-ARM100 reach policy: bundle folder and PyTorch policy."""
    return arm_bundle("so_arm100_reach", tmp_path_factory.mktemp("arm_bundles"))


@pytest.fixture(scope="module")
def pick(tmp_path_factory):
    """The committed SO-ARM100 pick-cube policy."""
    return arm_bundle("so_arm100_pick_cube", tmp_path_factory.mktemp("arm_bundles"))


@pytest.fixture(scope="module")
def reach_app(reach, tmp_path_factory):
    """The reach bundle's app compiled for this PC."""
    bundle, _ = reach
    build = tmp_path_factory.mktemp("reach_app")
    _, _, config = prepare_app(bundle, build)
    return build_host_app(bundle / "c", config, build / "host")


def compare_on_the_board(bundle: Path, act, tmp_path: Path, record_property, name: str) -> tuple[float, float]:
    seeds = list(range(EPISODES))
    reference = run_reference(bundle, seeds, act)
    board, build, boot = run_firmware(bundle, seeds, tmp_path)
    assert boot.self_test_failures == 0 and boot.servos_found == 6
    deviations = [float(np.abs(b.joint_positions - r.joint_positions)[:, :-1].max()) for b, r in zip(board, reference)]
    deviation = max(deviations)
    same = np.mean(np.array(deviations) <= JOINT_TOLERANCE)
    assert same >= SAME_TRAJECTORIES[name] and deviation <= MAX_DEVIATION, \
        f"the board's joint trajectories stray from PyTorch's by {np.round(deviations, 4)} rad"
    assert all(t.state == State.RUN for e in board for t in e.telemetry)  # nothing held on clean links
    control = [boot.instructions(t.control_ticks) for e in board for t in e.telemetry]
    bus = [boot.instructions(t.bus_ticks) for e in board for t in e.telemetry]
    firmware, pytorch = np.mean([e.success for e in board]), np.mean([e.success for e in reference])
    record_property("arm_app", f"{name}: firmware {firmware:.0%}, PyTorch {pytorch:.0%} over {EPISODES} episodes; "
                    f"{same:.0%} of trajectories within {JOINT_TOLERANCE:g} rad, all within {deviation:.1e} rad; per tick {np.median(control):,.0f} instructions deciding, "
                    f"{np.median(bus):,.0f} on servo packets; flash {build.flash_bytes:,} B (policy "
                    f"{build.policy_flash_bytes:,} B, app {build.app_flash_bytes:,} B), RAM {build.ram_bytes:,} B "
                    f"static + {max(t.stack_bytes for e in board for t in e.telemetry):,} B stack")
    return firmware, pytorch


def test_the_emulated_board_completes_reach_episodes_as_pytorch_does(reach, tmp_path, record_property):
    bundle, act = reach
    firmware, pytorch = compare_on_the_board(bundle, act, tmp_path, record_property, "reach")
    assert firmware >= 0.95 and abs(firmware - pytorch) <= 0.05


def test_the_emulated_board_picks_the_cube_from_the_host_links_pose_as_pytorch_does(pick, tmp_path, record_property):
    bundle, act = pick
    firmware, pytorch = compare_on_the_board(bundle, act, tmp_path, record_property, "pick-cube")
    assert abs(firmware - pytorch) <= 0.05 and pytorch >= 0.7


def test_the_emulated_boards_image_holds_on_faults_and_resumes(reach, tmp_path):
    """The flashed image itself (not the host build) on the safety paths: a silent servo, a NaN and a
    corrupted INPUTS frame, a silent host; each holds, and the next good data runs again."""
    bundle, _ = reach
    manifest, calibration, config = prepare_app(bundle, tmp_path, settings=EMULATED_BOARD_SETTINGS)
    build = build_arm_app(bundle / "c", config, tmp_path / "app")
    plant = ArmPlant(manifest, calibration)
    plant.reset(0)
    enable = int(host_link.InputFlag.ENABLE)
    with EmulatedArmBoard(build.elf, tmp_path) as board:
        link = _BoardLink(board, plant)
        assert link.wait_for_boot().servos_found == 6

        def tick(frame: bytes | None = None, flags: int = enable) -> tuple[int, int]:
            report = link.tick(flags, plant.object_position(), plant.target, frame)
            plant.advance()
            return report.state, report.reason
        assert [tick(flags=enable | int(host_link.InputFlag.NEW_EPISODE)), tick()] == [(State.RUN, Reason.OK)] * 2
        plant.bus.unplug(4)
        assert tick() == (State.HOLD, Reason.SERVO_TIMEOUT)
        plant.bus.plug(4)
        assert [tick(), tick()] == [(State.HOLD, Reason.BAD_SERVO_DATA), (State.RUN, Reason.OK)]
        nan = host_link.frame(host_link.MessageType.INPUTS, 9, host_link.Inputs(
            (float("nan"), 0.0, 0.0), tuple(plant.target), enable).pack())
        assert tick(nan) == (State.HOLD, Reason.BAD_HOST_DATA)
        good = host_link.inputs_frame(10, plant.object_position(), plant.target, enable)
        corrupted = good[:8] + bytes([good[8] ^ 0x40]) + good[9:]
        assert tick(corrupted) == (State.HOLD, Reason.HOST_TIMEOUT)  # dropped by its CRC: as if never sent
        assert tick(b"") == (State.HOLD, Reason.HOST_TIMEOUT)
        assert tick() == (State.RUN, Reason.OK)


def run_ticks(link: _HostAppLink, plant: ArmPlant, ticks: int, flags: int = None, first: bool = False,
              object_position: np.ndarray | None = None) -> list[host_link.Telemetry]:
    reports = []
    for tick in range(ticks):
        report = link.tick(_flags(first and tick == 0) if flags is None else flags,
                           plant.object_position() if object_position is None else object_position, plant.target)
        reports.append(report)
        plant.advance()
    return reports


def host_app(reach, reach_app) -> tuple[_HostAppLink, ArmPlant]:
    bundle, _ = reach
    manifest, calibration, _ = prepare_app(bundle, Path(reach_app).parent.parent)
    plant = ArmPlant(manifest, calibration)
    plant.reset(0)
    link = _HostAppLink(reach_app, plant)
    assert link.wait_for_boot().servos_found == 6
    return link, plant


def torque(plant: ArmPlant) -> list[int]:
    return [int(t) for t in plant.arm.torque]


def test_a_servo_fault_that_persists_turns_torque_off_until_the_host_re_arms(reach, reach_app):
    link, plant = host_app(reach, reach_app)
    assert run_ticks(link, plant, 3, first=True)[-1].state == State.RUN and torque(plant) == [1] * 6
    plant.bus.set_error(3, ERROR_OVERLOAD)
    reports = run_ticks(link, plant, 4)
    assert [r.state for r in reports[:2]] == [State.HOLD] * 2  # two ticks could be a corrupted byte
    assert (reports[2].state, reports[2].reason) == (State.TORQUE_OFF, Reason.SERVO_ERROR) and torque(plant) == [0] * 6
    plant.bus.set_error(3, 0)
    assert run_ticks(link, plant, 2)[-1].state == State.TORQUE_OFF  # latched: the fault went, the latch stays
    enable = int(host_link.InputFlag.ENABLE)
    assert run_ticks(link, plant, 1, flags=0)[0].state == State.TORQUE_OFF
    report = run_ticks(link, plant, 1, flags=enable)[0]  # the person's enable after a disable re-arms
    assert report.state == State.RUN and torque(plant) == [1] * 6


def test_the_arm_holds_on_a_silent_servo_stale_or_bad_host_data_and_resumes(reach, reach_app):
    link, plant = host_app(reach, reach_app)
    run_ticks(link, plant, 3, first=True)
    plant.bus.unplug(2)
    goals = plant.arm.arm_command.copy()
    reports = run_ticks(link, plant, 3)
    assert {(r.state, r.reason) for r in reports} == {(State.HOLD, Reason.SERVO_TIMEOUT)}
    assert np.array_equal(plant.arm.arm_command, goals)  # no goal written while holding
    plant.bus.plug(2)  # its first reading back waits for the next to confirm it
    assert [(r.state, r.reason) for r in run_ticks(link, plant, 2)] == [(State.HOLD, Reason.BAD_SERVO_DATA),
                                                                        (State.RUN, Reason.OK)]
    # the host goes silent: the board ticks on its own clock, holding
    silent = link._message(link.app.tick(), host_link.Telemetry)
    assert (silent.state, silent.reason) == (State.HOLD, Reason.HOST_TIMEOUT)
    assert run_ticks(link, plant, 1)[0].state == State.RUN
    for bad in (np.array([np.nan, 0.0, 0.0]), np.array([0.2, 50.0, 0.0])):
        frame = host_link.frame(host_link.MessageType.INPUTS, 0, host_link.Inputs(
            tuple(bad), tuple(plant.target), int(host_link.InputFlag.ENABLE)).pack())
        link.app.push_host(frame)
        report = host_link.Telemetry.unpack(link.frames.feed(link.app.tick())[0].payload)
        assert (report.state, report.reason) == (State.HOLD, Reason.BAD_HOST_DATA)
    report = run_ticks(link, plant, 1, flags=0)[0]
    assert (report.state, report.reason) == (State.HOLD, Reason.HOST_DISABLED)
    assert run_ticks(link, plant, 1)[0].state == State.RUN


def test_a_failed_boot_self_test_never_turns_torque_on(reach, tmp_path):
    bundle, _ = reach
    manifest, calibration, config = prepare_app(bundle, tmp_path)
    source = (config / "arm_config.c").read_text()
    marker = "const float arm_kinematics_tool[ARM_KINEMATICS_PAIRS][3] = {{"
    assert marker in source
    (config / "arm_config.c").write_text(source.replace(marker, marker + "1.0f + "))  # a wrong chain constant
    library = build_host_app(bundle / "c", config, tmp_path / "host")
    plant = ArmPlant(manifest, calibration)
    plant.reset(0)
    link = _HostAppLink(library, plant)
    assert link.wait_for_boot().self_test_failures == 1
    reports = run_ticks(link, plant, 3, first=True)
    assert {(r.state, r.reason) for r in reports} == {(State.TORQUE_OFF, Reason.SELF_TEST_FAILED)}
    assert torque(plant) == [0] * 6


FUZZ_PACKETS = 100_000
FAULT_RATES = (0.1, 0.3, 0.6, 0.9)  # per packet, one per fault window in turn
# a late reply can cost the first clean tick, and a servo reading needs the next tick's to confirm it (an
# episode's start, where the simulated arm jumps home, falls in the faults: a real arm never jumps)
RECOVERY_TICKS = 3


def test_fuzzing_both_links_never_crashes_or_hangs_and_the_arm_goes_safe_and_recovers(reach, reach_app,
                                                                                       record_property):
    """100,000 corrupted, truncated, duplicated, delayed or dropped packets on the servo bus (both ways) and the
    host link, and INPUTS with NaN or out-of-range numbers: every tick answers (no hang, no crash); while it
    runs, the app's commands stay inside the joint limits, one tick's step apart, near where the arm is, and the
    goals it sends inside the servos' bounds; after each window of faults it runs again within three clean ticks."""
    bundle, _ = reach
    manifest, calibration, _ = prepare_app(bundle, Path(reach_app).parent.parent)
    settings = ArmFirmwareSettings()
    plant = ArmPlant(manifest, calibration)
    plant.reset(0)
    faults = LinkFaults(seed=7, rate=0.0)
    sent_goals: list[np.ndarray] = []

    def watch(request: bytes) -> None:  # the goals as the app sent them, before the faults
        for packet in feetech.PacketReader().feed(request):
            if packet.code == feetech.Instruction.SYNC_WRITE and packet.parameters[0] == GOAL.address:
                sent_goals.append(np.frombuffer(packet.parameters[2:], dtype=np.uint8).reshape(6, 3)[:, 1:].copy())
    link = _HostAppLink(reach_app, plant, faults, observe=watch)
    assert link.wait_for_boot().servos_found == 6
    limits = np.array([link_["joint"]["range"] for link_ in manifest["kinematics"]["links"] if link_["joint"]])
    max_step = settings.max_joint_speed / manifest["control_hz"]
    near = settings.max_servo_steps_per_s / manifest["control_hz"] / calibration[0].steps_per_unit + max_step + 0.05
    bounds = np.array([[s.min_steps, s.max_steps] for s in calibration])
    states: dict[str, int] = {}
    windows, recovered, tick, previous = 0, 0, 0, None
    while faults.faulty_packets < FUZZ_PACKETS:  # an episode per window: its start, then its faults, then clean
        faults.rate = FAULT_RATES[windows % len(FAULT_RATES)]
        plant.reset(windows)
        for phase, ticks in (("faults", 10), ("clean", RECOVERY_TICKS)):
            if phase == "clean":
                faults.rate = 0.0
            for k in range(ticks):
                first = phase == "faults" and k == 0
                report = link.tick(_flags(first), plant.object_position(), plant.target)
                key = f"{State(report.state).name}/{Reason(report.reason).name}"
                states[key] = states.get(key, 0) + 1
                command = np.array(report.joint_command[:5])
                if report.state == State.RUN:
                    assert np.all(np.isfinite(report.action)) and np.all(np.abs(report.action) <= 1.0)
                    assert np.all(command >= limits[:, 0] - 1e-6) and np.all(command <= limits[:, 1] + 1e-6)
                    assert np.all(np.abs(command - plant.joint_positions()[:5]) <= near), (tick, command)
                    if previous is not None and not first:
                        assert np.all(np.abs(command - previous) <= max_step + near), (tick, command, previous)
                    previous = command
                else:
                    previous = None
                if phase == "clean" and k == RECOVERY_TICKS - 1:
                    assert report.state == State.RUN, f"not running {RECOVERY_TICKS} ticks after faults ({key}, {tick})"
                    recovered += 1
                if report.state == State.RUN or phase == "clean":  # held goals hold the arm: no physics to run
                    plant.advance()
                tick += 1
        windows += 1
    goals = np.concatenate(sent_goals).view("<u2").reshape(-1, 6)
    assert np.all(goals >= bounds[:, 0]) and np.all(goals <= bounds[:, 1])
    assert states.get("TORQUE_OFF/SERVO_ERROR", 0) == 0  # no corrupted byte latched the torque off
    for reason in ("HOST_TIMEOUT", "BAD_HOST_DATA", "SERVO_TIMEOUT"):
        assert states.get(f"HOLD/{reason}", 0) > 0, reason  # each fault seen and held on
    # and after all that, a clean episode reaches its target
    plant.reset(100)
    reports = run_ticks(link, plant, plant.episode_steps, first=True)
    assert all(r.state == State.RUN for r in reports[1:]) and plant.outcome()[0]
    print(f"{faults.faulty_packets} faulty packets over {tick} ticks, {windows} windows: {faults.counts}")
    record_property("fuzz", f"arm app links (host build): {faults.faulty_packets} faulty packets "
                    f"({', '.join(f'{k} {v}' for k, v in sorted(faults.counts.items()))}) over {tick} ticks, "
                    f"{windows} fault windows, each recovered within {RECOVERY_TICKS} clean ticks; states {states}")


def test_a_checkpoint_of_another_run_is_refused_before_any_episode(reach, trained_run):
    from robo_rl.checkpoint import policy_file
    from robo_rl.export.bundle import read_manifest, torch_actor
    from robo_rl.export.errors import ExportError

    bundle, _ = reach
    with pytest.raises(ExportError, match="does not take this bundle's observations"):
        torch_actor(read_manifest(bundle), policy_file(trained_run))  # a hover run's


def test_the_quadrotor_in_the_loop_tool_names_the_arm_tool_for_an_arm_bundle(reach):
    """It said the bundle's vehicle None is not a known vehicle; given one, it failed on an unknown option."""
    import subprocess
    import sys

    bundle, _ = reach
    result = subprocess.run([sys.executable, "-m", "robo_rl.export.in_the_loop", f"bundle={bundle}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: the bundle is an arm's policy (robo_rl/SOArm100Reach-v0); this flies quadrotors: "
        "python -m robo_rl.export.arm_in_the_loop bundle=<bundle> flies arms"], result.stderr
    from robo_rl.export.errors import ExportError
    from robo_rl.export.in_the_loop import compare_targets  # the function the command calls says the same
    with pytest.raises(ExportError, match="the bundle is an arm's policy"):
        compare_targets(bundle, steps=5, cortex_m4=False)


@pytest.mark.parametrize("edit, message", [
    # a ZeroDivisionError, int() of NaN and a KeyError from the firmware's configuration
    (lambda m: m.update(control_hz=0), "control_hz"),
    (lambda m: next(link for link in m["kinematics"]["links"] if link["joint"])["joint"].update(
        range=[float("nan"), 1.0]), "joint.range[0] is nan"),
    (lambda m: m.pop("kinematics"), "kinematics"),
])
def test_an_edited_arm_bundle_is_one_error_naming_what(reach, tmp_path, edit, message):
    import json
    import shutil
    import subprocess
    import sys

    bundle, _ = reach
    edited = tmp_path / "edited"
    shutil.copytree(bundle, edited)
    manifest = json.loads((edited / "policy.json").read_text())
    edit(manifest)
    (edited / "policy.json").write_text(json.dumps(manifest))
    result = subprocess.run([sys.executable, "-m", "robo_rl.export.arm_in_the_loop", f"bundle={edited}", "episodes=1"],
                            capture_output=True, text=True, timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: bundle={edited}: "), result.stderr
    assert message in lines[0], lines[0]


def test_the_config_command_writes_the_apps_configuration_and_refuses_other_bundles(reach, tmp_path):
    """The README's config step was a `python -c` one-liner: every refusal a traceback, and write_arm_config made its
    folder before refusing."""
    import subprocess
    import sys

    bundle, _ = reach
    done = subprocess.run([sys.executable, "-m", "robo_rl.export.arm_firmware", f"bundle={bundle}",
                           f"out={tmp_path / 'config'}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == ["arm_config.c", "arm_config.h"]
    assert "make -C firmware/arm POLICY_DIR=" in done.stdout
    for args, message in [([f"bundle={bundle}"], "out= is required"),
                          ([f"bundle={tmp_path / 'none'}", f"out={tmp_path / 'x'}"], "is not an exported bundle")]:
        refused = subprocess.run([sys.executable, "-m", "robo_rl.export.arm_firmware", *args], capture_output=True,
                                 text=True, timeout=120)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and message in lines[0], refused.stderr
    assert not (tmp_path / "x").exists()


def test_the_config_command_replaces_only_its_own_configuration(reach, tmp_path):
    """A hand-calibrated arm_config.h was silently replaced by the builders' calibration, and out=<the bundle> wrote
    into it, so that export could no longer replace the bundle."""
    import subprocess
    import sys

    bundle, _ = reach

    def config(out):
        return subprocess.run([sys.executable, "-m", "robo_rl.export.arm_firmware", f"bundle={bundle}", f"out={out}"],
                              capture_output=True, text=True, timeout=120)

    assert config(tmp_path / "config").returncode == 0
    assert config(tmp_path / "config").returncode == 0  # its own files, the same again: fine
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "arm_config.h").write_text("/* my hand-calibrated config */\n")
    (tmp_path / "a_file").write_text("x")
    bundle_files = sorted(p.name for p in Path(bundle).iterdir())
    for out, message in [(mine, "holds an arm_config.h other than the one this writes"),
                         (bundle, "is an exported bundle (it holds policy.json)"),
                         (tmp_path / "a_file", "is a file")]:
        refused = config(out)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1 and message in lines[0], refused.stderr
    assert (mine / "arm_config.h").read_text() == "/* my hand-calibrated config */\n"
    assert sorted(p.name for p in mine.iterdir()) == ["arm_config.h"]
    assert sorted(p.name for p in Path(bundle).iterdir()) == bundle_files
