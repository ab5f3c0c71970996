"""Teleoperation devices for the arm tasks: SERL-style end-effector actions (dx, dy, dz, gripper) in [-1, 1].

KeyboardTeleop: the terminal's keys (KEYS_HELP; hold a key and the terminal's key repeat keeps it moving).
The terminal is put in raw mode while recording and restored afterwards (also on errors). A key press
moves the tool for `hold_steps` control steps, bridging the gaps of the terminal's key repeat.
GamepadTeleop: a joystick through the Linux joystick API (/dev/input/js*). SpaceMouseTeleop: a 3Dconnexion
SpaceMouse through Linux hidraw (/dev/hidraw*). Both read their device file directly (no extra dependency)
and without blocking. A device file given by path must be a character device (of the kernel's input or hidraw
subsystem, where sysfs says which) or a FIFO standing in for one; anything else is refused when it is opened.
`make_teleop(device, **options)` builds any of them; all three have the same interface (context manager,
action(), start_episode(), ask_accept(), end_requested, quit_requested, help).

Robot base frame of the actions: +x forward, away from the robot's base; +y to the robot's left; +z up.
The default stick and SpaceMouse signs assume the operator stands behind the robot, facing the way it
faces: pushing the left stick or the SpaceMouse cap away from you moves the tool +x, to the left +y;
pushing the right stick away or lifting the cap moves it up (+z). Standing elsewhere, change `signs`.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import select
import stat
import struct
import sys
import termios
import time
import tty
from pathlib import Path
from typing import IO, Any, Callable, Protocol, Sequence

import numpy as np

from sim.errors import ConfigError

KEYS_HELP = """keys: w/s tool +x/-x, a/d +y/-y, r/f up/down, space close/open the gripper,
      x end the episode now, y/n keep/discard the finished episode, q quit"""
MOVES = {"w": (0, 1.0), "s": (0, -1.0), "a": (1, 1.0), "d": (1, -1.0), "r": (2, 1.0), "f": (2, -1.0)}


class Teleop(Protocol):
    """What the recorder uses of a teleoperation device."""

    help: str
    end_requested: bool
    quit_requested: bool

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def action(self) -> np.ndarray: ...
    def start_episode(self) -> None: ...
    def ask_accept(self, prompt: Callable[[str], None] = print) -> bool | None: ...


class KeyboardTeleop:
    """Reads keys without blocking from a terminal and turns them into actions (dx, dy, dz, gripper).

    Args:
        stream: a terminal (default stdin); it must be a TTY.
        hold_steps: control steps a key press keeps acting.
        speed: |action| of a held direction key (actions are in [-1, 1]).
    """

    help = KEYS_HELP

    def __init__(self, stream: IO | None = None, hold_steps: int = 6, speed: float = 1.0):
        self.stream = stream or sys.stdin
        if not os.isatty(self.stream.fileno()):
            raise RuntimeError("keyboard teleoperation needs a terminal on stdin (run it in a shell, not a pipe)")
        self.hold_steps, self.speed = hold_steps, speed
        self._held = np.zeros(3, dtype=np.int64)  # steps left per axis
        self._direction = np.zeros(3)
        self.gripper = -1.0  # open
        self.end_requested = False
        self.quit_requested = False
        self._saved: list | None = None

    def __enter__(self) -> "KeyboardTeleop":
        fd = self.stream.fileno()
        self._saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)  # keys arrive one by one, unechoed; Ctrl-C still interrupts
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            termios.tcsetattr(self.stream.fileno(), termios.TCSADRAIN, self._saved)
            self._saved = None

    def read_keys(self, timeout: float = 0.0) -> str:
        """Every key typed since the last call (waits up to `timeout` seconds for the first)."""
        fd, keys = self.stream.fileno(), ""
        while select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 64).decode(errors="ignore")
            if not chunk:
                break
            keys += chunk
            timeout = 0.0
        return keys.lower()

    def action(self) -> np.ndarray:
        """The action for this control step from the keys typed since the previous one."""
        for key in self.read_keys():
            if key in MOVES:
                axis, sign = MOVES[key]
                self._direction[axis], self._held[axis] = sign, self.hold_steps
            elif key == " ":
                self.gripper = -self.gripper
            elif key == "x":
                self.end_requested = True
            elif key == "q":
                self.quit_requested = True
        move = np.where(self._held > 0, self._direction * self.speed, 0.0)
        self._held = np.maximum(self._held - 1, 0)
        return np.array([*move, self.gripper], dtype=np.float32)

    def start_episode(self) -> None:
        """Forget held keys and open the gripper."""
        self._held[:] = 0
        self.gripper, self.end_requested = -1.0, False

    def ask_accept(self, prompt: Callable[[str], None] = print) -> bool | None:
        """Wait for y (accept), n (reject) or q (quit: returns None)."""
        prompt("episode finished: y = keep it, n = discard it, q = quit")
        while True:
            for key in self.read_keys(timeout=0.5):
                if key in "yn":
                    return key == "y"
                if key == "q":
                    self.quit_requested = True
                    return None


JS_EVENT = struct.Struct("<IhBB")  # struct js_event: time (ms), value, type, number
JS_BUTTON, JS_AXIS, JS_INIT = 0x01, 0x02, 0x80
XPAD_BUTTONS = {0: "A", 1: "B", 2: "X", 3: "Y", 4: "LB", 5: "RB", 6: "back", 7: "start", 8: "guide"}
JOYSTICK_ACCESS = ("check that your user may read it: be in group input (`sudo usermod -aG input $USER`, then log "
                   "in again) or add a udev rule such as KERNEL==\"js[0-9]*\", MODE=\"0664\", GROUP=\"input\"")
HIDRAW_ACCESS = ("hidraw nodes are root-only by default: add a udev rule such as (in /etc/udev/rules.d/"
                 "99-spacemouse.rules) KERNEL==\"hidraw*\", ATTRS{idVendor}==\"256f\", MODE=\"0660\", GROUP=\"input\" "
                 "(046d for older models), run `sudo udevadm control --reload && sudo udevadm trigger`, and be in "
                 "group input (`sudo usermod -aG input $USER`, then log in again)")
SPACEMOUSE_VENDOR = 0x256F  # 3Dconnexion's own vendor id: all its products
LOGITECH_VENDOR = 0x046D  # older 3Dconnexion models, but also Logitech's own mice and keyboards, hence the list
LOGITECH_SPACEMICE = {0xC603, 0xC605, 0xC606, 0xC621, 0xC623, 0xC625, 0xC626, 0xC627, 0xC628, 0xC629, 0xC62B, 0xC640}
LEFT, RIGHT = 0x1, 0x2  # SpaceMouse button bits


def _dead_zone(values: np.ndarray, dead_zone: float) -> np.ndarray:
    """Values clipped to [-1, 1], zero where |v| <= dead_zone, beyond it rescaled to grow from 0 at its edge."""
    values = np.clip(values, -1.0, 1.0)
    return np.where(np.abs(values) > dead_zone, np.sign(values) * (np.abs(values) - dead_zone) / (1.0 - dead_zone), 0.0)


def _button(number: int) -> str:
    """A gamepad button for the operator: its number and its name on an Xbox-style pad."""
    return f"button {number} ({XPAD_BUTTONS[number]})" if number in XPAD_BUTTONS else f"button {number}"


READS_PER_CALL = 256  # reads of a device per call at most: one that never runs dry (/dev/zero) must not hang a step


def _file_kind(mode: int) -> str:
    """What a file of st_mode `mode` is, for a message."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a regular file"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a device file")


def check_device_file(fd: int, path: str, device: str, subsystem: str, example: str) -> None:
    """ConfigError unless `fd`, opened from `path` for the teleoperation `device`, is a character device of the
    kernel's `subsystem` (where /sys/dev/char says which; without sysfs any character device) or a FIFO standing
    in for one; `example` is such a device file, for the message."""
    info = os.fstat(fd)
    mode = info.st_mode
    allowed = f"a {device}'s device_path must be its device file, a character device such as {example}"
    if stat.S_ISFIFO(mode):
        return
    if not stat.S_ISCHR(mode):  # a directory failed at the first read, a regular file ran an episode and then waited
        raise ConfigError(f"device_path={path} is {_file_kind(mode)}; {allowed}")
    major = os.major(info.st_rdev)
    try:
        found = Path(os.readlink(f"/sys/dev/char/{major}:{os.minor(info.st_rdev)}/subsystem")).name
    except OSError:  # no sysfs here (some containers): the driver that registered the major number says it
        found = _char_driver(major)
    if found is None:  # neither tells: take the user's word for it
        return
    if found != subsystem:  # /dev/zero read as a gamepad never ran dry: a silent hang
        raise ConfigError(f"device_path={path} is a device of the kernel's {found} subsystem, not {subsystem}; "
                          f"{allowed}")


def _char_driver(major: int, devices: str = "/proc/devices") -> str | None:
    """The name under which the driver of character devices with the major number `major` registered (/proc/devices:
    mem, input, hidraw, ...), None where that cannot be read."""
    try:
        text = Path(devices).read_text()
    except OSError:
        return None
    section = text.split("Block devices:")[0]
    for line in section.splitlines()[1:]:
        number, _, name = line.strip().partition(" ")
        if number.isdigit() and int(number) == major:
            return name.strip()
    return None


class _DeviceFile:
    """A device file (or an open descriptor) read without blocking, plus the state every device keeps.

    Subclasses name the device (`device`), the kernel subsystem of its device files (`subsystem`) and one
    of them (`example`), by which a path is checked when it is opened (check_device_file).
    """

    device: str
    subsystem: str
    example: str

    def __init__(self, path: str | int, access_hint: str):
        self.path = path
        if isinstance(path, int):  # an open descriptor: the caller keeps ownership
            self.fd, self._owned = path, False
            os.set_blocking(path, False)
        else:
            try:
                self.fd, self._owned = os.open(path, os.O_RDONLY | os.O_NONBLOCK), True
            except OSError as error:
                raise RuntimeError(f"cannot open {path}: {error.strerror}; {access_hint}") from None
            try:
                check_device_file(self.fd, path, self.device, self.subsystem, self.example)
            except ConfigError:
                os.close(self.fd)
                raise
        self.gripper = -1.0  # open
        self.end_requested = False
        self.quit_requested = False

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the device file (a descriptor that was passed in stays open)."""
        if self._owned and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _read(self, size: int, timeout: float = 0.0) -> list[bytes]:
        """Everything readable now, one bytes per read (waits up to `timeout` seconds for the first)."""
        chunks: list[bytes] = []
        if not select.select([self.fd], [], [], timeout)[0]:
            return chunks
        for _ in range(READS_PER_CALL):  # the rest waits for the next call
            try:
                chunk = os.read(self.fd, size)
            except BlockingIOError:
                break
            except OSError as error:  # ENODEV: unplugged; stop recording, keeping what was accepted
                print(f"teleoperation device {self.path}: {error.strerror}; stopping", file=sys.stderr)
                self.quit_requested = True
                break
            if not chunk:  # end of file: only a pipe or FIFO standing in for the device; don't spin on it
                time.sleep(timeout)
                break
            chunks.append(chunk)
        return chunks

    def start_episode(self) -> None:
        """Open the gripper and clear the end-of-episode request."""
        self.gripper, self.end_requested = -1.0, False


@dataclasses.dataclass
class GamepadMapping:
    """Which gamepad axes and buttons (Linux joystick API numbers; `jstest /dev/input/js0` shows them) do what.

    Defaults: an Xbox-style pad under the Linux xpad driver (axes 0, 1 left stick, 3, 4 right stick, each
    negative pushed left or away from you; buttons 0 A, 1 B, 2 X, 3 Y, 6 back, 7 start).
    """

    axes: Sequence[int] = (1, 0, 4)  # tool x, y, z from: left stick away/toward, left stick left/right, right stick
    signs: Sequence[float] = (-1.0, -1.0, -1.0)  # stick away, left, away: tool +x, +y, +z
    gripper: int = 2  # X toggles the gripper
    end: int = 3  # Y ends the episode
    accept: int = 0  # A keeps the finished episode
    reject: int = 1  # B discards it
    quit: int = 6  # back quits, keeping what was accepted


def find_gamepad(search: str = "/dev/input/js*") -> str:
    """The first joystick device file matching the glob `search`; a RuntimeError saying what to check if none."""
    paths = sorted(glob.glob(search), key=lambda p: (len(p), p))
    if not paths:
        raise RuntimeError(f"no gamepad found: nothing matches {search}. Check that the pad is plugged in (or paired), "
                           "that the kernel's joydev module is loaded (`sudo modprobe joydev`), or give its device "
                           f"file (device_path=/dev/input/jsN); if it is there but cannot be opened, {JOYSTICK_ACCESS}")
    return paths[0]


class GamepadTeleop(_DeviceFile):
    """A gamepad through the Linux joystick API: sticks move the tool, buttons toggle the gripper, end the
    episode, keep or discard it, and quit (GamepadMapping).

    Args:
        path: the joystick device file, or an open descriptor (default: the first match of `search`).
        mapping: which axes and buttons do what (a GamepadMapping, or its fields as a dict, as in the config).
        dead_zone: share of full stick deflection read as zero; beyond it the action grows from 0.
        speed: |action| at full deflection.
        search: where to look for a joystick when no path is given.
    """

    device, subsystem, example = "gamepad", "input", "/dev/input/js0"

    def __init__(self, path: str | int | None = None, mapping: GamepadMapping | dict | None = None,
                 dead_zone: float = 0.15, speed: float = 1.0, search: str = "/dev/input/js*"):
        super().__init__(find_gamepad(search) if path is None else path, JOYSTICK_ACCESS)
        m = mapping if isinstance(mapping, GamepadMapping) else GamepadMapping(**(mapping or {}))
        self.mapping, self.dead_zone, self.speed = m, dead_zone, speed
        self._axes: dict[int, float] = {}
        self._partial = b""  # an event split across reads
        self.help = (f"gamepad: left stick moves the tool in x/y, right stick up/down; {_button(m.gripper)} toggles "
                     f"the gripper, {_button(m.end)} ends the episode, {_button(m.quit)} quits")

    def _pressed(self, timeout: float = 0.0) -> list[int]:
        """Read the pending events: update the axes, return the buttons pressed since the last call."""
        data = self._partial + b"".join(self._read(JS_EVENT.size * 64, timeout))
        whole = len(data) - len(data) % JS_EVENT.size
        self._partial = data[whole:]
        pressed = []
        for _, value, kind, number in JS_EVENT.iter_unpack(data[:whole]):
            if kind & ~JS_INIT == JS_AXIS:
                self._axes[number] = value / 32767.0
            elif kind == JS_BUTTON and value:  # init events (buttons held when opened) are no presses
                pressed.append(number)
        return pressed

    def action(self) -> np.ndarray:
        """The action for this control step: stick positions now, buttons pressed since the previous step."""
        m = self.mapping
        for button in self._pressed():
            if button == m.gripper:
                self.gripper = -self.gripper
            elif button == m.end:
                self.end_requested = True
            elif button == m.quit:
                self.quit_requested = True
        sticks = np.array([self._axes.get(axis, 0.0) * sign for axis, sign in zip(m.axes, m.signs)])
        return np.array([*_dead_zone(sticks, self.dead_zone) * self.speed, self.gripper], dtype=np.float32)

    def ask_accept(self, prompt: Callable[[str], None] = print) -> bool | None:
        """Wait for the accept (True) or reject (False) button, or quit (returns None)."""
        m = self.mapping
        prompt(f"episode finished: {_button(m.accept)} = keep it, {_button(m.reject)} = discard it, "
               f"{_button(m.quit)} = quit")
        while not self.quit_requested:
            for button in self._pressed(timeout=0.5):
                if button in (m.accept, m.reject):
                    return button == m.accept
                if button == m.quit:
                    self.quit_requested = True
        return None


def find_spacemouse(sysfs: str | Path = "/sys/class/hidraw", dev: str | Path = "/dev") -> str:
    """The device file (under `dev`) of the first 3Dconnexion SpaceMouse among the hidraw nodes in `sysfs`,
    recognized by the HID_ID line of each node's device/uevent; a RuntimeError saying what to check if none."""
    looked = []
    for node in sorted(Path(sysfs).glob("hidraw*"), key=lambda p: (len(p.name), p.name)):
        uevent = node / "device" / "uevent"
        try:
            fields = dict(line.split("=", 1) for line in uevent.read_text().splitlines() if "=" in line)
            _, vendor, product = (int(part, 16) for part in fields["HID_ID"].split(":"))
        except (OSError, KeyError, ValueError):
            looked.append(f"{uevent} (no HID_ID)")
            continue
        looked.append(f"{uevent} ({vendor:04x}:{product:04x})")
        if vendor == SPACEMOUSE_VENDOR or (vendor == LOGITECH_VENDOR and product in LOGITECH_SPACEMICE):
            return str(Path(dev) / node.name)
    nodes = ", ".join(looked) or f"{Path(sysfs) / 'hidraw*'} (no hidraw devices)"
    raise RuntimeError(f"no 3Dconnexion SpaceMouse found (HID_ID vendor 256f, or 046d with a 3Dconnexion product); "
                       f"looked at {nodes}. Check that it is plugged in (`lsusb` lists 3Dconnexion), or give its node "
                       f"(device_path=/dev/hidrawN); if it is there but cannot be opened, {HIDRAW_ACCESS}")


class SpaceMouseTeleop(_DeviceFile):
    """A 3Dconnexion SpaceMouse through Linux hidraw: pushing the cap moves the tool; left button toggles the
    gripper, right button ends the episode; at the keep/discard prompt left keeps, right discards, both quit.

    Reports, one per read from hidraw, the first byte the report id: 1 translation x, y, z as int16
    little-endian (some models append rotation rx, ry, rz to it: 13 bytes), 2 rotation (ignored: the actions
    are translations), 3 buttons bitmask (bit 0 left, bit 1 right). The SpaceMouse's own axes: +x right,
    +y toward you, +z down (pressing the cap); `axes` and `signs` turn them into the robot base frame (module
    docstring: by default cap away from you +x, left +y, lifted +z).

    Args:
        path: the hidraw device file, or an open descriptor (default: find_spacemouse(sysfs, dev)).
        full_scale: deflection (counts) read as |action| 1; about 350 on most models.
        dead_zone: share of full scale read as zero; beyond it the action grows from 0.
        speed: |action| at full scale.
        axes: which SpaceMouse axis (0 x, 1 y, 2 z) gives the tool's x, y, z.
        signs: the sign applied to each of them.
        sysfs, dev: where find_spacemouse looks when no path is given.
    """

    help = ("spacemouse: push the cap to move the tool (away from you +x, left +y, lift it: up); left button "
            "toggles the gripper, right button ends the episode; at the prompt both buttons together quit")
    device, subsystem, example = "spacemouse", "hidraw", "/dev/hidraw0"

    def __init__(self, path: str | int | None = None, full_scale: float = 350.0, dead_zone: float = 0.1,
                 speed: float = 1.0, axes: Sequence[int] = (1, 0, 2), signs: Sequence[float] = (-1.0, -1.0, -1.0),
                 sysfs: str | Path = "/sys/class/hidraw", dev: str | Path = "/dev"):
        super().__init__(find_spacemouse(sysfs, dev) if path is None else path, HIDRAW_ACCESS)
        self.full_scale, self.dead_zone, self.speed = full_scale, dead_zone, speed
        self.axes, self.signs = list(axes), np.asarray(signs, dtype=float)
        self._translation = np.zeros(3)
        self._buttons = 0

    def _button_reports(self, timeout: float = 0.0) -> list[int]:
        """Read the pending reports: keep the latest translation, return the button masks in arrival order."""
        masks = []
        for report in self._read(64, timeout):
            if report[0] == 1 and len(report) >= 7:
                self._translation = np.array(struct.unpack_from("<3h", report, 1), dtype=float)
            elif report[0] == 3 and len(report) >= 2:
                masks.append(int.from_bytes(report[1:], "little"))
        return masks

    def action(self) -> np.ndarray:
        """The action for this control step: the cap's latest translation, buttons pressed since the last step."""
        for mask in self._button_reports():
            pressed, self._buttons = mask & ~self._buttons, mask
            if pressed & LEFT:
                self.gripper = -self.gripper
            if pressed & RIGHT:
                self.end_requested = True
        move = self._translation[self.axes] * self.signs / self.full_scale
        return np.array([*_dead_zone(move, self.dead_zone) * self.speed, self.gripper], dtype=np.float32)

    def ask_accept(self, prompt: Callable[[str], None] = print) -> bool | None:
        """Wait for a click: left keeps (True), right discards (False), both together quit (returns None)."""
        prompt("episode finished: left button = keep it, right button = discard it, both together = quit")
        chord = 0  # buttons pressed at this prompt, decided on when all are released (a button still held
        # from ending the episode does not count)
        while not self.quit_requested:
            for mask in self._button_reports(timeout=0.5):
                chord, self._buttons = chord | (mask & ~self._buttons), mask
                if mask == 0 and chord & (LEFT | RIGHT):
                    if chord & (LEFT | RIGHT) == LEFT | RIGHT:
                        self.quit_requested = True
                        return None
                    return bool(chord & LEFT)
        return None


TELEOP_DEVICES: dict[str, type] = {"keyboard": KeyboardTeleop, "gamepad": GamepadTeleop, "spacemouse": SpaceMouseTeleop}


def make_teleop(device: str, **options: Any) -> Teleop:
    """The teleoperation device named `device` (keyboard, gamepad or spacemouse), built with `options` (the
    arguments of its class: KeyboardTeleop, GamepadTeleop, SpaceMouseTeleop)."""
    if device not in TELEOP_DEVICES:
        raise ValueError(f"unknown teleoperation device {device!r}; known: {', '.join(TELEOP_DEVICES)}")
    if device == "keyboard" and "path" in options:
        raise ValueError("a device path is for gamepad and spacemouse; the keyboard is the terminal on stdin")
    return TELEOP_DEVICES[device](**options)
