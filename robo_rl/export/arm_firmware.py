"""The arm app (firmware/arm) for one bundle: its generated configuration, its cross-compiled image, and the
image booted on QEMU's STM32F405 with the servo bus and the host link on its two UARTs.

`arm_config_sources(manifest, calibration, settings)` writes what the C needs of policy.json (the chain, joint
limits, observation offsets, task constants, gripper range) and of the servo calibration as
`arm_config.h`/`arm_config.c`; `build_arm_app` cross-compiles `firmware/arm` around them and the bundle's
generated policy; `EmulatedArmBoard` runs the image under `qemu-system-arm -M netduinoplus2 -icount shift=0`
(instructions, and so the per-tick counts the board reports, are deterministic) with USART1 (the servo bus)
and USART2 (the host link) on Unix sockets. `HostArmApp` is the same app compiled for this PC with
`board_host.c` in place of the STM32F405's board (virtual time, byte queues): software in the loop, fast
enough to fuzz both links with hundreds of thousands of packets.
"""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robo_rl.export.c_generator import c_float
from robo_rl.export.cortex_m4 import connect_serial_socket, missing_tools, object_sizes
from robo_rl.export.errors import CortexM4Error, ExportError
from robo_rl.export.host_link import JOINT_SLOTS
from robo_rl.export.servo_calibration import ServoJoint, check_calibration

ARM_APP_DIR = Path(__file__).resolve().parents[2] / "firmware" / "arm"
ARM_FIELDS = ("tool_position", "tool_velocity", "gripper_opening", "cube_position", "cube_minus_tool", "goal_minus_tool")
SELF_TEST_PAIRS = 4
KINEMATICS_TOLERANCE = 1e-4  # [m] float32 forward kinematics against float64 over a 0.4 m chain


@dataclasses.dataclass(frozen=True)
class ArmFirmwareSettings:
    """What a deployment chooses for the app (the Python reference, robo_rl_ros.core.arm.ArmSettings, takes the
    same first three)."""

    max_joint_speed: float = 3.0  # [rad/s] the goal moves at most this over a tick (an STS3215 turns ~5 rad/s)
    ik_damping: float = 0.05
    orientation_gain: float = 1.0
    orientation_weight: float | None = None  # [m/rad] in the IK's least squares; None: as the training's impedance
    host_timeout_ms: int = 100  # no valid INPUTS for this long: hold
    bus_timeout_us: int = 2000  # a servo's answer takes ~100 us at 1 Mbaud plus its return delay
    servo_error_ticks: int = 3  # ticks a servo's error bits must persist before torque goes off
    servo_margin_steps: int = 64  # a present position this far outside the calibrated bounds is bad data
    # an arm joint's present position farther than this (over a tick) from the previous tick's is bad data
    # (an STS3215 turns at most ~3,000 steps/s unloaded)
    max_servo_steps_per_s: float = 4000.0
    input_limit: float = 2.0  # [m] object and goal coordinates beyond this are bad host data

    def validate(self) -> None:
        """ExportError naming the first setting out of its range."""
        import numbers

        from robo_rl_ros.core.arm import SETTING_RANGES  # the ROS 2 node's, for the settings both take

        # (low, high, whether low itself is allowed) as SETTING_RANGES; whole: counted in whole units (1.5 became the
        # C constant 1.5u, which only the compiler refused)
        shared = ("max_joint_speed", "ik_damping", "orientation_gain", "orientation_weight")
        checks = {**{name: SETTING_RANGES[name] for name in shared}, "input_limit": (0.1, 100.0, True),
                  "max_servo_steps_per_s": (100.0, 100_000.0, True)}
        whole = {"host_timeout_ms": (1, 60000, True), "bus_timeout_us": (100, 10_000_000, True),
                 "servo_error_ticks": (1, 255, True), "servo_margin_steps": (0, 1024, True)}
        for name, (low, high, low_allowed) in {**checks, **whole}.items():
            value = getattr(self, name)
            if value is None and name == "orientation_weight":
                continue
            kind = numbers.Integral if name in whole else numbers.Real
            if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high \
                    or (value == low and not low_allowed):
                raise ExportError(f"{name}={value!r} must be a {'whole ' * (name in whole)}number in "
                                  f"{'[' if low_allowed else '('}{low}, {high}]")


def orientation_weight(manifest: dict[str, Any], settings: ArmFirmwareSettings) -> float:
    """The IK's weight of orientation against position: the settings', else the one the training's Cartesian
    impedance implied, sqrt(rotation_stiffness / translation_stiffness) (its equilibrium minimises
    k_t |dp|^2 + k_r |dtheta|^2)."""
    from robo_rl_ros.core.arm import training_orientation_weight

    if settings.orientation_weight is not None:
        return float(settings.orientation_weight)
    return training_orientation_weight(manifest["training"]["env_config"])


def _floats(values: Sequence[float] | np.ndarray) -> str:
    return "{" + ", ".join(c_float(float(v)) for v in np.ravel(values)) + "}"


def _rotation(quat: Sequence[float]) -> np.ndarray:
    from robo_rl_ros.core.rotations import quat_to_matrix

    return quat_to_matrix(np.asarray(quat, dtype=np.float64))


def arm_config_sources(manifest: dict[str, Any], calibration: Sequence[ServoJoint],
                       settings: ArmFirmwareSettings = ArmFirmwareSettings(), seed: int = 0) -> tuple[str, str]:
    """arm_config.h and arm_config.c for the bundle's manifest (policy.json). ExportError for a bundle that is
    not an arm's, a layout the app does not build, or a calibration that does not fit the kinematics."""
    from robo_rl_ros.core.kinematics import KinematicChain

    settings.validate()
    if manifest.get("robot") != "arm" or "kinematics" not in manifest:
        raise ExportError(f"{manifest.get('env_id')}: the arm app needs an arm bundle with kinematics in policy.json")
    kinematics, task = manifest["kinematics"], manifest["training"]["env_config"]
    check_calibration(calibration, kinematics)
    offsets = {entry["name"]: (entry["offset"], entry["size"]) for entry in manifest["observation"]["layout"]}
    if sorted(offsets) != sorted(ARM_FIELDS):
        raise ExportError(f"the arm app builds the observation fields {list(ARM_FIELDS)}, the bundle has {sorted(offsets)}")
    orientation = (task.get("spec") or {}).get("orientation", "full")
    if manifest["task"] not in ("reach", "pick_cube"):
        raise ExportError(f"the arm app runs reach and pick_cube policies, not {manifest['task']!r}")
    chain = KinematicChain(kinematics)
    joints = len(kinematics["joints"])
    if joints + 1 > JOINT_SLOTS:
        raise ExportError(f"the arm app drives up to {JOINT_SLOTS - 1} arm joints and a gripper, the bundle has {joints}")
    rng = np.random.default_rng(seed)
    home = np.asarray((task.get("spec") or {}).get("home") or np.zeros(joints), dtype=np.float64)
    pairs_q = [home] + [rng.uniform(chain.lower, chain.upper) for _ in range(SELF_TEST_PAIRS - 1)]
    pairs_tool = [chain.forward(q)[0] for q in pairs_q]
    links = []
    for link in kinematics["links"]:
        joint = link["joint"]
        links.append("    {" + f"{_floats(link['pos'])}, {_floats(_rotation(link['quat']))}, {int(joint is not None)}, "
                     f"{_floats(joint['axis'] if joint else (0, 0, 0))}, {_floats(joint['anchor'] if joint else (0, 0, 0))}"
                     + "}")
    servos = [f"    {{{s.servo_id}u, {c_float(s.zero_steps)}, {c_float(s.steps_per_unit)}, {s.min_steps}u, {s.max_steps}u}}"
              for s in calibration]
    workspace = np.asarray(task["workspace"], dtype=np.float64)  # (3, 2): (low, high) per axis
    gripper_low, gripper_high = kinematics["gripper"]["range"]
    control_hz = float(manifest["control_hz"])
    header = f"""/* arm_config.h: generated by robo_rl.export.arm_firmware for {manifest['env_id']}; do not edit. */
#ifndef ARM_CONFIG_H
#define ARM_CONFIG_H
#include "arm_types.h"

#define ARM_JOINTS {joints}
#define ARM_SERVOS {len(calibration)} /* the arm joints', then the gripper's */
#define ARM_LINKS {len(links)}
#define ARM_CONTROL_HZ {c_float(control_hz)}
#define ARM_TASK_PICK_CUBE {int(manifest['task'] == 'pick_cube')}
#define ARM_ACTION_SCALE {c_float(task['action_scale'])} /* [m] tool displacement at |action| = 1 */
#define ARM_LIFT_HEIGHT {c_float(task.get('lift_height', 0.0))}
#define ARM_ORIENTATION_ROWS {3 if orientation == 'full' else 2}
#define ARM_IK_DAMPING {c_float(settings.ik_damping)}
#define ARM_ORIENTATION_GAIN {c_float(settings.orientation_gain)}
#define ARM_ORIENTATION_WEIGHT {c_float(orientation_weight(manifest, settings))} /* [m/rad] in the IK's least squares */
#define ARM_MAX_JOINT_STEP {c_float(settings.max_joint_speed / control_hz)} /* [rad] per tick */
#define ARM_GRIPPER_LOW {c_float(gripper_low)}
#define ARM_GRIPPER_HIGH {c_float(gripper_high)}
#define ARM_INPUT_LIMIT {c_float(settings.input_limit)}
#define ARM_HOST_TIMEOUT_MS {settings.host_timeout_ms}u
#define ARM_BUS_TIMEOUT_US {settings.bus_timeout_us}u
#define ARM_SERVO_ERROR_TICKS {settings.servo_error_ticks}u
#define ARM_SERVO_MARGIN_STEPS {settings.servo_margin_steps}
#define ARM_SERVO_MAX_STEPS_PER_TICK {c_float(settings.max_servo_steps_per_s / control_hz)}
#define ARM_KINEMATICS_PAIRS {SELF_TEST_PAIRS}
#define ARM_KINEMATICS_TOLERANCE {c_float(KINEMATICS_TOLERANCE)}
#define ARM_OBS_SIZE {manifest['observation']['size']}
""" + "".join(f"#define ARM_OBS_{name.upper()} {offsets[name][0]}\n" for name in ARM_FIELDS) + """
extern const arm_link_t arm_links[ARM_LINKS];
extern const float arm_tool_pos[3], arm_tool_rot[9];
extern const float arm_joint_lower[ARM_JOINTS], arm_joint_upper[ARM_JOINTS];
extern const float arm_workspace_low[3], arm_workspace_high[3];
extern const arm_servo_t arm_servos[ARM_SERVOS];
extern const float arm_kinematics_q[ARM_KINEMATICS_PAIRS][ARM_JOINTS], arm_kinematics_tool[ARM_KINEMATICS_PAIRS][3];

#endif
"""
    source = f"""/* arm_config.c: generated by robo_rl.export.arm_firmware for {manifest['env_id']}; do not edit. */
#include "arm_config.h"

const arm_link_t arm_links[ARM_LINKS] = {{
{(',' + chr(10)).join(links)}
}};
const float arm_tool_pos[3] = {_floats(kinematics['tool']['pos'])};
const float arm_tool_rot[9] = {_floats(_rotation(kinematics['tool']['quat']))};
const float arm_joint_lower[ARM_JOINTS] = {_floats(chain.lower)};
const float arm_joint_upper[ARM_JOINTS] = {_floats(chain.upper)};
const float arm_workspace_low[3] = {_floats(workspace[:, 0])};
const float arm_workspace_high[3] = {_floats(workspace[:, 1])};
const arm_servo_t arm_servos[ARM_SERVOS] = {{ /* id, zero_steps, steps_per_unit, min_steps, max_steps */
{(',' + chr(10)).join(servos)}
}};
/* the chain's self-test: tool positions of robo_rl_ros.core.kinematics (float64) at these joint angles */
const float arm_kinematics_q[ARM_KINEMATICS_PAIRS][ARM_JOINTS] = {{{', '.join(_floats(q) for q in pairs_q)}}};
const float arm_kinematics_tool[ARM_KINEMATICS_PAIRS][3] = {{{', '.join(_floats(t) for t in pairs_tool)}}};
"""
    return header, source


def write_arm_config(directory: str | Path, manifest: dict[str, Any], calibration: Sequence[ServoJoint],
                     settings: ArmFirmwareSettings = ArmFirmwareSettings()) -> Path:
    """arm_config.h and arm_config.c into `directory`; returns it."""
    directory = Path(directory)
    header, source = arm_config_sources(manifest, calibration, settings)  # refused before any folder is made
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "arm_config.h").write_text(header)
    (directory / "arm_config.c").write_text(source)
    return directory


@dataclasses.dataclass(frozen=True)
class ArmAppBuild:
    """A cross-compiled arm app: the ELF and its flash and RAM use."""

    elf: Path
    flash_bytes: int  # .text + .data of the whole image
    ram_bytes: int  # .data + .bss
    policy_flash_bytes: int
    app_flash_bytes: int  # the app's own code (everything but the policy and the C library)
    bus_time_us_per_tick: float = 0.0  # wire time of a tick's servo traffic, where a run measured it


def build_arm_app(c_dir: str | Path, config_dir: str | Path, build_dir: str | Path) -> ArmAppBuild:
    """Cross-compile firmware/arm with the bundle's policy C (`c_dir`) and a generated configuration."""
    missing = missing_tools()
    if missing:
        raise CortexM4Error(f"missing {', '.join(missing)}: apt-get install gcc-arm-none-eabi "
                            "libnewlib-arm-none-eabi qemu-system-arm make")
    build = Path(build_dir).resolve()
    make = subprocess.run(["make", "-s", "-C", str(ARM_APP_DIR), f"POLICY_DIR={Path(c_dir).resolve()}",
                           f"CONFIG_DIR={Path(config_dir).resolve()}", f"BUILD={build}"], capture_output=True, text=True)
    if make.returncode != 0:
        raise CortexM4Error(f"cross-compilation of the arm app failed:\n{make.stdout}\n{make.stderr}")
    elf = build / "arm_app.elf"
    text, data, bss = object_sizes(elf)
    policy_text, policy_data, _ = object_sizes(build / "policy.o")
    app = sum(sum(object_sizes(build / f"{name}.o")[:2]) for name in
              ("main", "arm_control", "arm_kinematics", "servo_bus", "host_link", "board_stm32f405", "arm_config"))
    return ArmAppBuild(elf, text + data, data + bss, policy_text + policy_data, app)


class EmulatedArmBoard:
    """The arm app's image on QEMU's STM32F405: `bus` and `host` are connected stream sockets to USART1 (the
    servo bus) and USART2 (the host link). Use as a context manager (QEMU stops on exit)."""

    def __init__(self, elf: str | Path, socket_dir: str | Path, timeout: float = 30.0):
        socket_dir = Path(socket_dir)
        self._paths = [socket_dir / "usart1_bus.sock", socket_dir / "usart2_host.sock"]
        for path in self._paths:
            path.unlink(missing_ok=True)
        # wait=on for both: QEMU starts the CPU only once both ends are connected, so no byte is lost
        self._qemu = subprocess.Popen(
            ["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none", "-icount", "shift=0",
             *(arg for path in self._paths for arg in ("-serial", f"unix:{path},server=on,wait=on")),
             "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            self.bus = connect_serial_socket(self._qemu, self._paths[0], timeout)
            self.host = connect_serial_socket(self._qemu, self._paths[1], timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop QEMU and close the sockets."""
        for name in ("bus", "host"):
            connection = getattr(self, name, None)
            if connection is not None:
                connection.close()
        self._qemu.kill()
        self._qemu.wait()
        self._qemu.stderr.close()

    def __enter__(self) -> "EmulatedArmBoard":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


HOST_APP_SOURCES = ("arm_app", "arm_control", "arm_kinematics", "servo_bus", "host_link", "board_host")
BusHandler = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t)


def build_host_app(c_dir: str | Path, config_dir: str | Path, build_dir: str | Path, sanitize: bool = False) -> Path:
    """The arm app as a shared library for this PC (gcc); `sanitize` adds AddressSanitizer and UBSan (the
    process that loads it must preload libasan)."""
    build = Path(build_dir).resolve()
    build.mkdir(parents=True, exist_ok=True)
    library = build / ("libarm_app_sanitized.so" if sanitize else "libarm_app.so")
    sources = [str(ARM_APP_DIR / f"{name}.c") for name in HOST_APP_SOURCES]
    sources += [str(Path(c_dir).resolve() / "policy.c"), str(Path(config_dir).resolve() / "arm_config.c")]
    # -Bsymbolic: the app's calls stay inside it (a library loaded before, e.g. by torch, may export a `host_write`)
    flags = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-Wl,-Bsymbolic"]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    compile_ = subprocess.run(["gcc", *flags, f"-I{ARM_APP_DIR}", f"-I{Path(c_dir).resolve()}",
                               f"-I{Path(config_dir).resolve()}", *sources, "-o", str(library), "-lm"],
                              capture_output=True, text=True)
    if compile_.returncode != 0:
        raise ExportError(f"compiling the arm app for the host failed:\n{compile_.stderr[-3000:]}")
    return library


class HostArmApp:
    """The arm app (firmware/arm/arm_app.c) in this process: `bus_handler(bytes)` receives every packet the app
    writes on the servo bus and answers through `push_bus`; `boot()` and `tick()` run the app's boot and one
    control tick and return the bytes it sent on the host link."""

    def __init__(self, library: str | Path, bus_handler: Callable[[bytes], None]):
        self._lib = ctypes.CDLL(str(library))
        self._lib.board_host_push_bus.argtypes = self._lib.board_host_push_host.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._lib.board_host_take_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._lib.board_host_take_host.restype = ctypes.c_size_t
        self._handler = BusHandler(lambda data, n: bus_handler(ctypes.string_at(data, n)))  # kept alive here
        self._lib.board_host_reset()
        self._lib.board_host_set_bus_handler(self._handler)
        self._out = ctypes.create_string_buffer(1 << 16)

    def push_bus(self, data: bytes) -> None:
        """Bytes arriving on the app's servo bus UART."""
        self._lib.board_host_push_bus(data, len(data))

    def push_host(self, data: bytes) -> None:
        """Bytes arriving on the app's host link UART."""
        self._lib.board_host_push_host(data, len(data))

    def _taken(self) -> bytes:
        n = self._lib.board_host_take_host(self._out, len(self._out))  # before .raw copies the buffer
        return self._out.raw[:n]

    def boot(self) -> bytes:
        """Run the app's boot; what it sent the host."""
        self._lib.arm_app_boot()
        return self._taken()

    def tick(self) -> bytes:
        """Run one control tick; what it sent the host."""
        self._lib.arm_app_tick()
        return self._taken()


def check_config_folder(out: str | Path, sources: tuple[str, str]) -> None:
    """ExportError unless `out` may take arm_config.h and arm_config.c with these contents: not a file, not a bundle
    or run folder, and any arm_config.h/.c there already the same (a hand-calibrated one was silently replaced
    by the builders' calibration, and a bundle that holds them is no longer one export can replace)."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"out={out} is a file; give a folder for arm_config.h and arm_config.c")
    for marker, what in (("policy.json", "an exported bundle"), ("config.yaml", "a training run")):
        if (folder / marker).exists():
            raise ExportError(f"out={out} is {what} (it holds {marker}); give a folder of its own for the app's "
                              "configuration")
    for name, text in zip(("arm_config.h", "arm_config.c"), sources):
        if (folder / name).exists() and (folder / name).read_text(errors="replace") != text:
            raise ExportError(f"out={out} holds an {name} other than the one this writes (a calibration of your own "
                              "would be replaced by the builders'); give a new folder, or remove it")


def main(argv: list[str]) -> None:
    """CLI: `python -m robo_rl.export.arm_firmware bundle=<arm bundle> out=<folder>` writes the app's arm_config.h/.c
    for the bundle with the SO-ARM100 builders' calibration (`default_calibration`) and the default settings."""
    from robo_rl.cli import key_values
    from robo_rl.export.arm_in_the_loop import check_arm_bundle
    from robo_rl.export.bundle import read_manifest
    from robo_rl.export.servo_calibration import default_calibration

    usage = "usage: python -m robo_rl.export.arm_firmware bundle=<arm bundle dir> out=<folder for arm_config.h/.c>"
    args = key_values(argv, {"bundle": str, "out": str}, usage)
    if "out" not in args:
        raise ExportError(f"out= is required; {usage}")
    manifest = read_manifest(args["bundle"])
    if manifest.get("robot") != "arm":
        raise ExportError(f"bundle={args['bundle']} is a {manifest.get('robot')} policy; the arm app runs arm bundles")
    check_arm_bundle(args["bundle"])
    calibration = default_calibration(manifest["kinematics"])
    check_config_folder(args["out"], arm_config_sources(manifest, calibration))
    out = write_arm_config(args["out"], manifest, calibration)
    print(f"wrote {out / 'arm_config.h'} and {out / 'arm_config.c'} (the SO-ARM100 builders' calibration); build with "
          f"make -C firmware/arm POLICY_DIR={Path(args['bundle']).resolve() / 'c'} CONFIG_DIR={out.resolve()} BUILD=<dir>")


if __name__ == "__main__":
    import sys

    from robo_rl.cli import command

    command(main)(sys.argv[1:])
