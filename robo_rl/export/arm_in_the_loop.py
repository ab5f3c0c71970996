"""Processor in the loop for the arm: the MuJoCo SO-ARM100 behind its simulated servo bus, driven by the arm
app on the emulated STM32F405 and, on the same seeded episodes, by PyTorch through the same tick in Python.

The plant (`ArmPlant`) is the task's scene under the servos' position loop (sim.arm.joint_position with
servo_sim's gains), answering the Feetech protocol (servo_sim.SimulatedServoBus). Each control tick:
the host sends INPUTS (the cube's position as a tracker would report it, the reach target, ENABLE, and
NEW_EPISODE on an episode's first tick), the controller reads every servo, decides and writes the goals in
one SYNC_WRITE, and the plant advances one control period. The controllers:

- `run_firmware`: firmware/arm cross-compiled for the bundle (robo_rl.export.arm_firmware) on QEMU, its
  USART1 on the simulated bus and its USART2 on the host link;
- `run_reference`: the bundle's PyTorch actor in robo_rl_ros.core.arm.ArmPolicyController (the tick the
  ROS 2 arm node runs), over servo_client.ServoBusClient on the same simulated bus.

A reach episode succeeds with the tool within the task's success radius of the target on its last tick, a
pick-cube episode with the cube lifted by the task's lift height (as the simulator's `is_success`).

    python -m robo_rl.export.arm_in_the_loop bundle=<run>/export [episodes=20] [seed=0]
"""

from __future__ import annotations

import dataclasses
import json
import select
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robo_rl.cli import command, key_values
from robo_rl.export import host_link
from robo_rl.export.arm_firmware import (ArmAppBuild, ArmFirmwareSettings, EmulatedArmBoard, HostArmApp,
                                         arm_config_sources, build_arm_app, build_host_app, orientation_weight,
                                         write_arm_config)
from robo_rl.export.bundle import read_manifest, torch_actor
from robo_rl.export.errors import CortexM4Error, ExportError
from robo_rl.export.servo_calibration import ServoJoint, default_calibration
from robo_rl.export.servo_sim import SO_ARM100_SERVO_GAINS, SimulatedSerialPort, SimulatedServoBus
from sim.arm.joint_position import SimulatedArm

BOARD_TIMEOUT_S = 20.0  # no byte from the emulated board for this long: it hangs
# The emulated board's timeouts: it waits on a Python process (the simulated bus and host) that a busy machine
# may not schedule for milliseconds, while under -icount its clock runs on instructions. Its defaults (a 2 ms
# bus, a 100 ms host timeout) would then hold on clean links; these leave room for that (in virtual time,
# which runs slower than real time here). The short defaults are what the host build's safety tests and fuzz use.
EMULATED_BOARD_SETTINGS = ArmFirmwareSettings(bus_timeout_us=100_000, host_timeout_ms=500)


@dataclasses.dataclass
class ArmEpisode:
    """One closed-loop episode."""

    seed: int
    success: bool
    joint_positions: np.ndarray  # (T + 1, joints + 1) [rad, gripper m], as the plant had them
    commands: np.ndarray  # (T, joints + 1) the controller's joint and gripper commands
    final_error: float  # [m] reach: tool to target; pick-cube: lift still missing (0 when lifted)
    telemetry: list[host_link.Telemetry] = dataclasses.field(default_factory=list)  # the board's, per tick


class ArmPlant:
    """The task's scene on the simulated servo bus, one seeded episode at a time."""

    def __init__(self, manifest: dict[str, Any], calibration: Sequence[ServoJoint]):
        from robo_rl_ros.core.kinematics import KinematicChain

        self.task = manifest["task"]
        self.arm = SimulatedArm(manifest["training"]["env_config"], SO_ARM100_SERVO_GAINS, seed=0)
        self.bus = SimulatedServoBus(self.arm, calibration)
        self.calibration = tuple(calibration)
        self.chain = KinematicChain(manifest["kinematics"])
        self.dt = 1.0 / float(manifest["control_hz"])
        self.success_radius = float(self.arm.config.success_radius)
        self.lift_height = float(self.arm.config.lift_height)
        self.episode_steps = self.arm.config.episode_steps

    def reset(self, seed: int) -> None:
        """The seeded start of an episode (the task's cube placement and target)."""
        self.arm.seed = seed
        self.arm.reset()
        self.bus.idle()

    @property
    def target(self) -> np.ndarray:
        """The reach target (pick-cube: the lift goal above the cube's start)."""
        return np.asarray(self.arm.env.goal[0], dtype=np.float64)

    def object_position(self) -> np.ndarray:
        """The cube's position, as a tracker reports it."""
        return self.arm.state().cube_position

    def joint_positions(self) -> np.ndarray:
        """The arm joints' and the gripper's true positions (calibration order)."""
        state = self.arm.state()
        index = {name: i for i, name in enumerate(state.names)}
        return np.array([state.positions[index[s.joint]] for s in self.calibration])

    def advance(self) -> None:
        """One control period of physics."""
        self.bus.advance(self.dt)

    def outcome(self) -> tuple[bool, float]:
        """Success now, and the remaining error [m]."""
        if self.task == "pick_cube":
            lift = self.arm.state().lift
            return lift >= self.lift_height, max(self.lift_height - lift, 0.0)
        tool = self.chain.forward(self.joint_positions()[:-1])[0]
        distance = float(np.linalg.norm(tool - self.target))
        return distance < self.success_radius, distance


def _flags(first_tick: bool) -> int:
    return int(host_link.InputFlag.ENABLE) | (int(host_link.InputFlag.NEW_EPISODE) if first_tick else 0)


def run_reference(bundle: str | Path, seeds: Sequence[int], act: Callable[[np.ndarray], np.ndarray],
                  calibration: Sequence[ServoJoint] | None = None,
                  settings: ArmFirmwareSettings = ArmFirmwareSettings()) -> list[ArmEpisode]:
    """The episodes with `act` (observation -> action) in the ROS 2 arm node's tick, over the Python bus client."""
    from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
    from robo_rl_ros.core.bundle import load_bundle

    from robo_rl.export.servo_client import ServoBusClient

    manifest = read_manifest(bundle)
    calibration = tuple(calibration or default_calibration(manifest["kinematics"]))
    plant = ArmPlant(manifest, calibration)
    client = ServoBusClient(SimulatedSerialPort(plant.bus), calibration)
    controller = ArmPolicyController(load_bundle(bundle), ArmSettings(
        goal=(0.0, 0.0, 0.0), state_timeout=1.0, max_joint_speed=settings.max_joint_speed,
        ik_damping=settings.ik_damping, orientation_gain=settings.orientation_gain,
        orientation_weight=orientation_weight(manifest, settings)))
    names = [s.joint for s in calibration]
    episodes = []
    for seed in seeds:
        plant.reset(seed)
        controller.new_episode()
        state = client.read_state()
        client.write_goal_positions(state.positions)  # torque on where the arm is, as the firmware boots
        client.torque(True)
        positions, commands = [plant.joint_positions()], []
        for tick in range(plant.episode_steps):
            state = client.read_state()
            now = tick * plant.dt
            controller.update_joint_state(now, names, list(state.positions), list(state.velocities))
            controller.update_object(plant.object_position())
            if plant.task == "reach":
                controller.goal = plant.target.copy()
            result = controller.tick(now, act)
            if result.moving:
                client.write_goal_positions([*result.joint_command, result.gripper_command])
                commands.append([*result.joint_command, result.gripper_command])
            else:
                commands.append(commands[-1] if commands else list(state.positions))
            plant.advance()
            positions.append(plant.joint_positions())
        success, error = plant.outcome()
        episodes.append(ArmEpisode(seed, success, np.array(positions), np.array(commands), error))
    return episodes


class LinkFaults:
    """Seeded faults on the packets of both links, for fuzzing the app: each packet is, with probability
    `rate`, corrupted (1-3 bytes changed), truncated, duplicated, delayed (held back and delivered in front of
    the next packet the same way) or dropped; an INPUTS frame may instead carry a NaN or a coordinate of 50 m
    under a valid CRC. `counts` tallies what was done, by kind and by direction."""

    KINDS = ("corrupt", "truncate", "duplicate", "delay", "drop")

    def __init__(self, seed: int, rate: float):
        self.rng, self.rate = np.random.default_rng(seed), float(rate)
        self.counts: dict[str, int] = {}
        self._held: dict[str, bytes] = {}

    def apply(self, packet: bytes, direction: str) -> bytes:
        """The bytes to deliver for `packet` on its way in `direction` (held bytes first)."""
        data = self._held.pop(direction, b"")
        if self.rate <= 0.0 or self.rng.random() >= self.rate:
            return data + packet
        kind = self.KINDS[self.rng.integers(len(self.KINDS))]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.counts[direction] = self.counts.get(direction, 0) + 1
        if kind == "corrupt":
            damaged = bytearray(packet)
            for index in self.rng.integers(0, len(damaged), self.rng.integers(1, 4)):
                damaged[index] ^= int(self.rng.integers(1, 256))
            return data + bytes(damaged)
        if kind == "truncate":
            return data + packet[:self.rng.integers(0, len(packet))]
        if kind == "duplicate":
            return data + packet + packet
        if kind == "delay":
            self._held[direction] = packet
            return data
        return data  # drop

    def inputs(self, sequence: int, object_position: np.ndarray, goal: np.ndarray, flags: int) -> bytes:
        """An INPUTS frame, possibly with a NaN or out-of-range number under a valid CRC, then `apply`'s faults."""
        values = [*map(float, object_position), *map(float, goal)]
        if self.rate > 0.0 and self.rng.random() < self.rate / 5.0:
            kind = "nan" if self.rng.random() < 0.5 else "out_of_range"
            values[self.rng.integers(len(values))] = float("nan") if kind == "nan" else 50.0
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.counts["to_board_host"] = self.counts.get("to_board_host", 0) + 1
            payload = host_link.Inputs(tuple(values[:3]), tuple(values[3:]), flags).pack()
            return self._held.pop("to_board_host", b"") + host_link.frame(host_link.MessageType.INPUTS, sequence, payload)
        return self.apply(host_link.inputs_frame(sequence, values[:3], values[3:], flags), "to_board_host")

    @property
    def faulty_packets(self) -> int:
        """Packets given a fault so far."""
        return sum(self.counts.get(k, 0) for k in (*self.KINDS, "nan", "out_of_range"))


def _status_packets(data: bytes) -> list[bytes]:
    """A servo bus answer split into its status packets (the simulated bus answers whole packets)."""
    packets = []
    while len(data) >= 4:
        end = 4 + data[3]
        packets.append(data[:end])
        data = data[end:]
    return packets


class _HostAppLink:
    """The host's side of the arm app compiled for this PC (arm_firmware.HostArmApp), with optional faults."""

    def __init__(self, library: Path, plant: ArmPlant, faults: LinkFaults | None = None,
                 observe: Callable[[bytes], None] | None = None):
        """observe: called with every bus packet the app writes, before the faults."""
        self.plant, self.faults, self.observe = plant, faults, observe
        self.app = HostArmApp(library, self._on_bus)
        self.sequence = 0
        self.frames = host_link.FrameReader()

    def _on_bus(self, request: bytes) -> None:
        self.plant.bus.idle()  # each of the app's bus writes is one burst, after which it waits for the answer
        if self.observe is not None:
            self.observe(request)
        if self.faults is not None:
            request = self.faults.apply(request, "to_servos")
        for reply in _status_packets(self.plant.bus.feed(request)):
            self.app.push_bus(self.faults.apply(reply, "to_board_bus") if self.faults is not None else reply)

    def _message(self, data: bytes, kind: type) -> Any:
        messages = [f.message() for f in self.frames.feed(data)]
        found = [m for m in messages if isinstance(m, kind)]
        if len(found) != 1:
            raise CortexM4Error(f"the arm app sent {len(found)} {kind.__name__} messages where one was due")
        return found[0]

    def wait_for_boot(self) -> host_link.Boot:
        """The app's BOOT message."""
        return self._message(self.app.boot(), host_link.Boot)

    def tick(self, flags: int, object_position: np.ndarray, goal: np.ndarray) -> host_link.Telemetry:
        """One control tick: INPUTS in (through the faults), the app's TELEMETRY out."""
        if self.faults is not None:
            frame = self.faults.inputs(self.sequence, object_position, goal, flags)
        else:
            frame = host_link.inputs_frame(self.sequence, object_position, goal, flags)
        self.sequence = (self.sequence + 1) & 0xFF
        self.app.push_host(frame)
        return self._message(self.app.tick(), host_link.Telemetry)


class _BoardLink:
    """The host's side of the emulated board: serves its servo bus from the plant, speaks its host link."""

    def __init__(self, board: EmulatedArmBoard, plant: ArmPlant):
        self.board, self.plant = board, plant
        self.frames = host_link.FrameReader()
        self.sequence = 0
        self.boot: host_link.Boot | None = None

    def _serve_until(self, kind: type) -> Any:
        """Answer the board's servo traffic until a frame of message `kind` arrives; that message."""
        while True:
            ready, _, _ = select.select([self.board.bus, self.board.host], [], [], BOARD_TIMEOUT_S)
            if not ready:
                raise CortexM4Error(f"the emulated board sent nothing for {BOARD_TIMEOUT_S:g} s")
            if self.board.bus in ready:
                self._serve_bus()
            if self.board.host in ready:
                data = self.board.host.recv(4096)
                if not data:
                    raise CortexM4Error("the emulated board closed its host link")
                for received in self.frames.feed(data):
                    message = received.message()
                    if isinstance(message, kind):
                        self._drain_bus()
                        return message

    def _serve_bus(self) -> None:
        data = self.board.bus.recv(4096)
        if not data:
            raise CortexM4Error("the emulated board closed its servo bus")
        reply = self.plant.bus.feed(data)
        if reply:
            self.board.bus.sendall(reply)

    def _drain_bus(self) -> None:
        """Bytes the board wrote on the bus before its frame (its SYNC_WRITE) reach the servos now."""
        while select.select([self.board.bus], [], [], 0.0)[0]:
            self._serve_bus()

    def wait_for_boot(self) -> host_link.Boot:
        """The board's BOOT message (after its self-test and servo scan)."""
        self.boot = self._serve_until(host_link.Boot)
        return self.boot

    def tick(self, flags: int, object_position: np.ndarray, goal: np.ndarray,
             frame: bytes | None = None) -> host_link.Telemetry:
        """One control tick: INPUTS out (or `frame` as given: b"" sends nothing), servo traffic served, the
        board's TELEMETRY back."""
        self.plant.bus.idle()  # the bus was quiet since the last tick's SYNC_WRITE
        if frame is None:
            frame = host_link.inputs_frame(self.sequence, object_position, goal, flags)
        self.board.host.sendall(frame)
        self.sequence = (self.sequence + 1) & 0xFF
        return self._serve_until(host_link.Telemetry)


def _run_episodes(link: Any, plant: ArmPlant, seeds: Sequence[int]) -> list[ArmEpisode]:
    episodes = []
    for seed in seeds:
        plant.reset(seed)
        positions, commands, telemetry = [plant.joint_positions()], [], []
        for tick in range(plant.episode_steps):
            report = link.tick(_flags(tick == 0), plant.object_position(), plant.target)
            telemetry.append(report)
            commands.append(report.joint_command[:len(plant.calibration)])
            plant.advance()
            positions.append(plant.joint_positions())
        success, error = plant.outcome()
        episodes.append(ArmEpisode(seed, success, np.array(positions), np.array(commands), error, telemetry))
    return episodes


def prepare_app(bundle: str | Path, build_dir: str | Path, calibration: Sequence[ServoJoint] | None = None,
                settings: ArmFirmwareSettings = ArmFirmwareSettings()) -> tuple[dict[str, Any], tuple[ServoJoint, ...], Path]:
    """The bundle's manifest, the calibration (default: default_calibration) and the generated configuration's folder."""
    manifest = read_manifest(bundle)
    calibration = tuple(calibration or default_calibration(manifest["kinematics"]))
    return manifest, calibration, write_arm_config(Path(build_dir) / "config", manifest, calibration, settings)


def run_firmware(bundle: str | Path, seeds: Sequence[int], build_dir: str | Path,
                 calibration: Sequence[ServoJoint] | None = None,
                 settings: ArmFirmwareSettings = EMULATED_BOARD_SETTINGS,
                 ) -> tuple[list[ArmEpisode], ArmAppBuild, host_link.Boot]:
    """The episodes with the arm app on the emulated STM32F405; also its build figures and BOOT message."""
    bundle, build_dir = Path(bundle), Path(build_dir)
    manifest, calibration, config = prepare_app(bundle, build_dir, calibration, settings)
    build = build_arm_app(bundle / "c", config, build_dir / "app")
    plant = ArmPlant(manifest, calibration)
    plant.reset(seeds[0] if seeds else 0)
    with EmulatedArmBoard(build.elf, build_dir) as board:
        link = _BoardLink(board, plant)
        boot = link.wait_for_boot()
        if boot.self_test_failures:
            raise CortexM4Error(f"the arm app's boot self-test failed ({boot.self_test_failures} failures)")
        start_us = plant.bus.bus_time_us
        episodes = _run_episodes(link, plant, seeds)
        ticks = sum(len(e.telemetry) for e in episodes)
        build = dataclasses.replace(build, bus_time_us_per_tick=(plant.bus.bus_time_us - start_us) / max(ticks, 1))
    return episodes, build, boot


def run_host_app(bundle: str | Path, seeds: Sequence[int], build_dir: str | Path, faults: LinkFaults | None = None,
                 calibration: Sequence[ServoJoint] | None = None, settings: ArmFirmwareSettings = ArmFirmwareSettings(),
                 library: Path | None = None) -> tuple[list[ArmEpisode], host_link.Boot, "_HostAppLink"]:
    """The episodes with the arm app compiled for this PC (software in the loop), optionally under `faults`;
    also its BOOT message and the link (its plant and faults). `library`: an already built app."""
    bundle = Path(bundle)
    manifest, calibration, config = prepare_app(bundle, build_dir, calibration, settings)
    plant = ArmPlant(manifest, calibration)
    plant.reset(seeds[0] if seeds else 0)
    link = _HostAppLink(library or build_host_app(bundle / "c", config, Path(build_dir) / "host"), plant, faults)
    boot = link.wait_for_boot()
    return _run_episodes(link, plant, seeds), boot, link


def compare(bundle: str | Path, episodes: int = 20, seed: int = 0, checkpoint: str | Path | None = None,
            settings: ArmFirmwareSettings = ArmFirmwareSettings()) -> dict[str, Any]:
    """Firmware on the emulated board against PyTorch on the same seeded episodes: success of each, the largest
    joint deviation between their trajectories, and the board's per-tick instructions, flash and RAM."""
    manifest = read_manifest(bundle)
    arm_config_sources(manifest, default_calibration(manifest["kinematics"]), settings)  # an arm the app drives
    seeds = list(range(seed, seed + episodes))
    reference = run_reference(bundle, seeds, torch_actor(manifest, checkpoint), settings=settings)
    emulated = dataclasses.replace(settings, bus_timeout_us=EMULATED_BOARD_SETTINGS.bus_timeout_us,
                                   host_timeout_ms=EMULATED_BOARD_SETTINGS.host_timeout_ms)
    with tempfile.TemporaryDirectory() as build:
        board, build_figures, boot = run_firmware(bundle, seeds, build, settings=emulated)
    deviation = [float(np.abs(b.joint_positions - r.joint_positions)[:, :-1].max()) for b, r in zip(board, reference)]
    control = [boot.instructions(t.control_ticks) for e in board for t in e.telemetry if t.state == 0]
    bus = [boot.instructions(t.bus_ticks) for e in board for t in e.telemetry if t.state == 0]
    return {
        "env_id": manifest["env_id"], "episodes": episodes, "seeds": seeds,
        "pytorch_success": float(np.mean([e.success for e in reference])),
        "firmware_success": float(np.mean([e.success for e in board])),
        "max_joint_deviation_rad": max(deviation),
        "median_joint_deviation_rad": float(np.median(deviation)),
        "held_ticks": sum(t.state != 0 for e in board for t in e.telemetry),
        "instructions_per_tick": {"control_median": float(np.median(control)), "control_max": float(np.max(control)),
                                  "bus_median": float(np.median(bus)), "bus_max": float(np.max(bus))},
        "flash_bytes": build_figures.flash_bytes, "ram_bytes": build_figures.ram_bytes,
        "stack_bytes": max(t.stack_bytes for e in board for t in e.telemetry),
        "bus_time_us_per_tick": build_figures.bus_time_us_per_tick,
        "policy_flash_bytes": build_figures.policy_flash_bytes, "app_flash_bytes": build_figures.app_flash_bytes,
        "episodes_detail": [{"seed": b.seed, "firmware_success": b.success, "pytorch_success": r.success,
                             "firmware_final_error_m": b.final_error, "pytorch_final_error_m": r.final_error,
                             "max_joint_deviation_rad": d} for b, r, d in zip(board, reference, deviation)],
    }


def check_arm_bundle(bundle: str | Path) -> None:
    """ExportError naming what of the bundle's policy.json no arm can run on (a control_hz of 0, a NaN joint range,
    no kinematics), as the ROS 2 arm node's loader refuses it: an edited bundle was a traceback from the firmware's
    configuration (a ZeroDivisionError, int() of NaN, a KeyError)."""
    from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
    from robo_rl_ros.core.bundle import BundleError, load_bundle

    try:
        ArmPolicyController(load_bundle(bundle), ArmSettings(goal=(0.0, 0.0, 0.0)))
    except BundleError as error:
        raise ExportError(f"bundle={bundle}: {error}") from None


@command
def main(argv: list[str]) -> None:
    """CLI: key=value arguments bundle=, episodes=, seed=, checkpoint=."""
    args = key_values(argv, {"bundle": str, "episodes": (int, 1), "seed": (int, 0), "checkpoint": str},
                      "usage: python -m robo_rl.export.arm_in_the_loop bundle=<arm bundle dir> [episodes=20] [seed=0]")
    import torch

    torch.set_num_threads(1)
    manifest = read_manifest(args["bundle"])
    if manifest.get("robot") != "arm":
        raise ExportError(f"bundle={args['bundle']} is a {manifest.get('robot')} policy; this runs arm bundles")
    check_arm_bundle(args["bundle"])
    report = compare(args["bundle"], args.get("episodes", 20), args.get("seed", 0), args.get("checkpoint"))
    print(f"{report['env_id']}: {report['episodes']} episodes from seed {report['seeds'][0]}")
    print(f"  success: PyTorch {report['pytorch_success']:.0%}, firmware on the emulated STM32F405 "
          f"{report['firmware_success']:.0%}; largest joint deviation {report['max_joint_deviation_rad']:.2e} rad")
    i = report["instructions_per_tick"]
    print(f"  per tick: {i['control_median']:,.0f} instructions deciding (max {i['control_max']:,.0f}), "
          f"{i['bus_median']:,.0f} on servo packets (max {i['bus_max']:,.0f}); "
          f"{report['bus_time_us_per_tick']:,.0f} us of traffic on the 1 Mbaud bus")
    print(f"  flash {report['flash_bytes']:,} B (policy {report['policy_flash_bytes']:,} B, app "
          f"{report['app_flash_bytes']:,} B), RAM {report['ram_bytes']:,} B static + {report['stack_bytes']:,} B stack")
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
