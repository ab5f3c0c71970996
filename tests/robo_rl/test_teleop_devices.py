"""Gamepad and SpaceMouse teleoperation, fed real byte streams in the Linux joystick and hidraw formats.

Only the device files are stand-ins: a pipe or FIFO for /dev/input/js* (a byte stream of 8-byte js_event
records, as joydev's), a SOCK_SEQPACKET socket pair for /dev/hidraw* (one whole report per read, as
hidraw's), a FIFO at a discovered path, and a temp directory tree for /sys/class/hidraw.
"""

from __future__ import annotations

import inspect
import os
import signal
import socket
import struct
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from robo_rl.teleop import (
    TELEOP_DEVICES,
    GamepadMapping,
    GamepadTeleop,
    SpaceMouseTeleop,
    find_spacemouse,
    make_teleop,
)
from sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BUTTON, AXIS, INIT = 0x01, 0x02, 0x80
FULL = 32767
HALF_STICK = (16384 / FULL - 0.15) / 0.85  # half deflection past the default dead zone of 0.15
HALF_CAP = (175 / 350 - 0.1) / 0.9  # half of the SpaceMouse's full scale past its dead zone of 0.1


def js(kind: int, number: int, value: int, ms: int = 0) -> bytes:
    """One struct js_event: uint32 time (ms), int16 value, uint8 type, uint8 number, little-endian."""
    return struct.pack("<IhBB", ms, value, kind, number)


def press(button: int) -> bytes:
    """A button pressed and released."""
    return js(BUTTON, button, 1) + js(BUTTON, button, 0)


def report(report_id: int, *values: int) -> bytes:
    """A SpaceMouse HID report: its id, then int16 little-endian values."""
    return bytes([report_id]) + struct.pack(f"<{len(values)}h", *values)


def buttons(mask: int) -> bytes:
    """A SpaceMouse buttons report (id 3), bit 0 left, bit 1 right."""
    return bytes([3, mask, 0])


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


@pytest.fixture
def hidraw():
    device, host = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield device.fileno(), host
    device.close()
    host.close()


def fake_hidraw(root: Path, hid_ids: dict[str, str | None]) -> tuple[Path, Path]:
    """A /sys/class/hidraw stand-in (a device/uevent per node, None: no HID_ID line) and a /dev with FIFOs."""
    sysfs, dev = root / "sys", root / "dev"
    dev.mkdir(parents=True)
    sysfs.mkdir(parents=True)
    for name, hid_id in hid_ids.items():
        (sysfs / name / "device").mkdir(parents=True)
        lines = ["DRIVER=hid-generic"] + ([f"HID_ID={hid_id}"] if hid_id else []) + ["HID_NAME=some device"]
        (sysfs / name / "device" / "uevent").write_text("\n".join(lines) + "\n")
        os.mkfifo(dev / name)
    return sysfs, dev


def test_gamepad_sticks_give_signed_scaled_actions_outside_the_dead_zone(pipe):
    read_end, write_end = pipe
    with GamepadTeleop(read_end) as pad:
        # what joydev sends on open: every axis and button with the init flag; left stick held away from
        # the operator, X (the gripper button) held: the stick acts, the held button is no press
        os.write(write_end, b"".join(js(AXIS | INIT, axis, -FULL if axis == 1 else 0) for axis in range(6))
                 + b"".join(js(BUTTON | INIT, button, int(button == 2)) for button in range(11)))
        assert pad.action().tolist() == [1.0, 0.0, 0.0, -1.0]
        os.write(write_end, js(AXIS, 0, -32768) + js(AXIS, 4, FULL))  # left stick also left, right stick toward you
        assert pad.action().tolist() == [1.0, 1.0, -1.0, -1.0]
        os.write(write_end, js(AXIS, 1, 16384) + js(AXIS, 0, FULL) + js(AXIS, 4, -16384))  # half toward, right; up
        np.testing.assert_allclose(pad.action(), [-HALF_STICK, -1.0, HALF_STICK, -1.0], rtol=1e-6)
        assert pad.action()[0] == pytest.approx(-HALF_STICK)  # sticks hold their position between events
        os.write(write_end, js(AXIS, 1, 4900) + js(AXIS, 0, -4900) + js(AXIS, 4, 3000))  # all within 0.15 * 32767
        assert pad.action().tolist() == [0.0, 0.0, 0.0, -1.0]
        event = js(AXIS, 1, -FULL)
        os.write(write_end, event[:5])  # an event split across reads counts once whole
        assert pad.action()[0] == 0.0
        os.write(write_end, event[5:])
        assert pad.action()[0] == 1.0


def test_gamepad_buttons_toggle_the_gripper_end_the_episode_and_quit(pipe):
    read_end, write_end = pipe
    with GamepadTeleop(read_end) as pad:
        os.write(write_end, js(BUTTON, 2, 1))  # X pressed: closes; its release changes nothing
        assert pad.action()[3] == 1.0
        os.write(write_end, js(BUTTON, 2, 0))
        assert pad.action()[3] == 1.0
        os.write(write_end, press(2))
        assert pad.action()[3] == -1.0
        os.write(write_end, press(2) + press(3))  # X and Y: closed, episode ended
        assert pad.action()[3] == 1.0 and pad.end_requested and not pad.quit_requested
        pad.start_episode()
        assert not pad.end_requested and pad.action()[3] == -1.0
        os.write(write_end, press(6))  # back
        pad.action()
        assert pad.quit_requested


def test_gamepad_accept_reject_quit(pipe):
    read_end, write_end = pipe
    said: list[str] = []
    with GamepadTeleop(read_end) as pad:
        os.write(write_end, press(2) + press(3) + press(0))  # gripper and end buttons do nothing at the prompt
        assert pad.ask_accept(said.append) is True
        assert "button 0 (A) = keep it" in said[0] and "button 1 (B) = discard it" in said[0]
        os.write(write_end, press(1))
        assert pad.ask_accept(said.append) is False
        assert pad.action()[3] == -1.0 and not pad.end_requested
        os.write(write_end, press(6))
        assert pad.ask_accept(said.append) is None and pad.quit_requested


def test_gamepad_found_by_search_with_a_mapping_from_the_config(tmp_path):
    os.mkfifo(tmp_path / "js0")
    mapping = {"axes": [0, 1, 3], "signs": [1, 1, 1], "gripper": 5, "end": 7}  # as OmegaConf hands it over
    with make_teleop("gamepad", search=str(tmp_path / "js*"), mapping=mapping, speed=0.5) as pad:
        assert pad.path == str(tmp_path / "js0")
        write_end = os.open(tmp_path / "js0", os.O_WRONLY)
        try:
            os.write(write_end, js(AXIS, 0, FULL) + js(AXIS, 3, -FULL) + press(2) + press(5) + press(7))
            assert pad.action().tolist() == [0.5, 0.0, -0.5, 1.0] and pad.end_requested
        finally:
            os.close(write_end)


def test_gamepad_not_found_or_not_readable_says_where_it_looked_and_what_to_check(tmp_path):
    with pytest.raises(RuntimeError, match=r"no gamepad found: nothing matches .*/js\*") as error:
        make_teleop("gamepad", search=str(tmp_path / "js*"))
    assert "joydev" in str(error.value) and "group input" in str(error.value) and "udev" in str(error.value)
    with pytest.raises(RuntimeError, match=r"cannot open .*/js7: No such file"):
        make_teleop("gamepad", path=str(tmp_path / "js7"))
    if os.geteuid() != 0:  # root opens anything
        (tmp_path / "js0").touch(mode=0o000)
        with pytest.raises(RuntimeError, match=r"cannot open .*/js0: Permission denied.*group input.*udev"):
            make_teleop("gamepad", search=str(tmp_path / "js*"))


def test_a_read_error_as_when_the_device_is_unplugged_stops_recording(tmp_path, capsys):
    directory = os.open(tmp_path, os.O_RDONLY)  # reading a directory fails as reading an unplugged device does
    try:
        with GamepadTeleop(directory) as pad:
            assert pad.action().tolist() == [0.0, 0.0, 0.0, -1.0]
            assert pad.quit_requested and pad.ask_accept(lambda _: None) is None
    finally:
        os.close(directory)
    assert "stopping" in capsys.readouterr().err


@pytest.mark.parametrize("device, subsystem, example", [("gamepad", "input", "/dev/input/js0"),
                                                        ("spacemouse", "hidraw", "/dev/hidraw0")])
def test_a_device_path_that_is_no_device_file_is_refused_when_it_is_opened(device, subsystem, example, tmp_path):
    """A directory stopped recording at the first read ("Is a directory; stopping", exit 0); a regular file ran
    an episode, then waited at the keep/discard prompt for a button it could never give; /dev/zero never ran dry
    (a silent hang)."""
    (tmp_path / "README.md").write_text("not a pad\n")
    refused = {tmp_path: "a directory", tmp_path / "README.md": "a regular file"}
    if Path("/sys/dev/char/1:5/subsystem").exists():  # /dev/zero's kernel subsystem, where sysfs tells
        refused[Path("/dev/zero")] = f"a device of the kernel's mem subsystem, not {subsystem}"
    for path, kind in refused.items():
        with pytest.raises(ConfigError) as error:
            make_teleop(device, path=str(path))
        assert str(error.value) == (f"device_path={path} is {kind}; a {device}'s device_path must be its device "
                                    f"file, a character device such as {example}")
    os.mkfifo(tmp_path / "fifo")  # what stands in for the device in these tests stays allowed
    make_teleop(device, path=str(tmp_path / "fifo")).close()


@pytest.mark.parametrize("device, subsystem", [("gamepad", "input"), ("spacemouse", "hidraw")])
def test_without_sysfs_the_drivers_name_tells_a_zero_device_from_a_gamepad(device, subsystem, monkeypatch):
    """Where /sys/dev/char cannot be read (some containers), /dev/zero passed as a gamepad: it was taken on the
    user's word. /proc/devices names the driver of its major number (mem), as sysfs names the subsystem."""
    def no_sysfs(path, *args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", path)

    monkeypatch.setattr(os, "readlink", no_sysfs)
    with pytest.raises(ConfigError, match=f"device_path=/dev/zero is a device of the kernel's mem subsystem, not "
                                          f"{subsystem}"):
        make_teleop(device, path="/dev/zero")


def test_a_device_that_never_runs_dry_does_not_hang_a_control_step():
    """/dev/zero as a gamepad (given as a descriptor, or where sysfs cannot tell what it is) kept the first
    action() reading forever."""
    class Hung(Exception):  # not an OSError, which the device's read error handling would take for an unplugged pad
        pass

    def too_long(*_):
        raise Hung("action() did not return within 20 s")

    zero = os.open("/dev/zero", os.O_RDONLY)
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        with GamepadTeleop(zero) as pad:
            assert pad.action().tolist() == [0.0, 0.0, 0.0, -1.0]  # all-zero bytes are no joystick events
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.close(zero)


def test_spacemouse_translation_reports_of_both_layouts(hidraw):
    fd, host = hidraw
    with SpaceMouseTeleop(fd) as mouse:
        assert mouse.action().tolist() == [0.0, 0.0, 0.0, -1.0]
        host.send(report(1, 0, -350, 0))  # 7-byte report: cap pushed away from the operator (its -y)
        assert mouse.action().tolist() == [1.0, 0.0, 0.0, -1.0]
        assert mouse.action().tolist() == [1.0, 0.0, 0.0, -1.0]  # held: the last report stands
        host.send(report(1, -175, 0, -500))  # half to the left, lifted past full scale
        np.testing.assert_allclose(mouse.action(), [0.0, HALF_CAP, 1.0, -1.0], rtol=1e-6)
        host.send(report(1, 30, -34, 20))  # within the dead zone (35 counts)
        assert mouse.action().tolist() == [0.0, 0.0, 0.0, -1.0]
        host.send(report(2, 300, -300, 300))  # rotation: no action
        assert mouse.action().tolist() == [0.0, 0.0, 0.0, -1.0]
        host.send(report(1, 350, 0, 0, 300, -300, 300))  # 13-byte report 1 with rotation (newer models)
        assert mouse.action().tolist() == [0.0, -1.0, 0.0, -1.0]
        host.send(report(1, 0, 175, 350, -300, 300, -300))  # toward the operator, pressed down
        np.testing.assert_allclose(mouse.action(), [-HALF_CAP, 0.0, -1.0, -1.0], rtol=1e-6)


def test_spacemouse_axes_and_signs_are_configurable(hidraw):
    fd, host = hidraw
    with SpaceMouseTeleop(fd, axes=(0, 1, 2), signs=(1.0, 1.0, -1.0), full_scale=700.0) as mouse:
        host.send(report(1, 700, -350, -700))
        np.testing.assert_allclose(mouse.action(), [1.0, -(0.5 - 0.1) / 0.9, 1.0, -1.0], rtol=1e-6)


def test_spacemouse_buttons_and_accept_reject_quit(hidraw):
    fd, host = hidraw
    said: list[str] = []
    with SpaceMouseTeleop(fd) as mouse:
        host.send(buttons(1))  # left: gripper closes on the press
        assert mouse.action()[3] == 1.0
        host.send(buttons(0))
        assert mouse.action()[3] == 1.0
        host.send(buttons(1))
        host.send(buttons(0))
        assert mouse.action()[3] == -1.0
        host.send(buttons(2))  # right: ends the episode; still held when the prompt comes
        mouse.action()
        assert mouse.end_requested and not mouse.quit_requested
        host.send(buttons(0))  # its release decides nothing; then a left click keeps
        host.send(buttons(1))
        host.send(buttons(0))
        assert mouse.ask_accept(said.append) is True and "left button = keep it" in said[0]
        host.send(buttons(2))
        host.send(buttons(0))
        assert mouse.ask_accept(said.append) is False
        mouse.start_episode()
        assert not mouse.end_requested and mouse.action()[3] == -1.0
        for mask in (1, 3, 2, 0):  # both together, released one after the other: quit
            host.send(buttons(mask))
        assert mouse.ask_accept(said.append) is None and mouse.quit_requested


def test_spacemouse_found_by_its_sysfs_hid_id(tmp_path):
    sysfs, dev = fake_hidraw(tmp_path, {
        "hidraw0": "0003:0000046D:0000C52B",  # a Logitech receiver: Logitech's vendor id, no SpaceMouse
        "hidraw1": None,
        "hidraw2": "0003:0000256F:0000C635",  # SpaceMouse Compact
        "hidraw10": "0003:0000046D:0000C626",  # SpaceNavigator (after hidraw2: numeric order)
    })
    assert find_spacemouse(sysfs, dev) == str(dev / "hidraw2")
    (sysfs / "hidraw2" / "device" / "uevent").write_text("HID_ID=0003:000004F3:0000C635\n")
    assert find_spacemouse(sysfs, dev) == str(dev / "hidraw10")
    with make_teleop("spacemouse", sysfs=sysfs, dev=dev) as mouse:  # opens the discovered node
        write_end = os.open(dev / "hidraw10", os.O_WRONLY)
        try:
            os.write(write_end, report(1, 0, 0, -350))
            assert mouse.action().tolist() == [0.0, 0.0, 1.0, -1.0]
        finally:
            os.close(write_end)


def test_spacemouse_not_found_says_where_it_looked_and_what_to_check(tmp_path):
    sysfs, dev = fake_hidraw(tmp_path, {"hidraw0": "0003:0000046D:0000C52B", "hidraw1": None})
    with pytest.raises(RuntimeError, match="no 3Dconnexion SpaceMouse found") as error:
        make_teleop("spacemouse", sysfs=sysfs, dev=dev)
    message = str(error.value)
    assert f"{sysfs}/hidraw0/device/uevent (046d:c52b)" in message
    assert f"{sysfs}/hidraw1/device/uevent (no HID_ID)" in message
    assert "udev" in message and "group input" in message and "device_path=" in message
    with pytest.raises(RuntimeError, match=r"hidraw\* \(no hidraw devices\)"):
        find_spacemouse(tmp_path / "empty", dev)


def test_make_teleop_rejects_unknown_devices_and_a_path_for_the_keyboard():
    with pytest.raises(ValueError, match="device 'joystick'; known: keyboard, gamepad, spacemouse"):
        make_teleop("joystick")
    with pytest.raises(ValueError, match="keyboard is the terminal"):
        make_teleop("keyboard", path="/dev/input/js0")


def test_record_config_teleop_options_are_the_class_defaults():
    options = OmegaConf.to_container(OmegaConf.load(ROOT / "configs" / "record.yaml").teleop)

    def same(value, default):
        return list(value) == list(default) if isinstance(value, (list, tuple)) else value == default

    for device, values in options.items():
        parameters = inspect.signature(TELEOP_DEVICES[device]).parameters
        for name, value in values.items():
            if name == "mapping":
                for field, field_value in value.items():
                    assert same(field_value, getattr(GamepadMapping(), field)), (device, field)
            else:
                assert same(value, parameters[name].default), (device, name)


def test_record_with_a_missing_device_fails_before_building_the_env(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir

    from robo_rl.record import record

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        for device in ("gamepad", "spacemouse"):
            cfg = compose("record", [f"device={device}", f"device_path={tmp_path / 'absent'}", "env=arm_reach",
                                     "dataset=reach/teleop-v0"])  # the default names the env through Hydra's runtime
            with pytest.raises(RuntimeError, match=f"cannot open {tmp_path / 'absent'}"):
                record(cfg)
        with pytest.raises(ValueError, match="available: scripted, keyboard, gamepad, spacemouse"):
            record(compose("record", ["device=joystick", "env=arm_reach"]))


def test_a_gamepad_demonstration_is_recorded(pipe):
    import torch

    from robo_rl.envs import make_vector_env
    from robo_rl.record import record_teleop

    read_end, write_end = pipe
    env = make_vector_env(OmegaConf.load(ROOT / "configs" / "env" / "arm_reach.yaml"), 1, torch.device("cpu"),
                          threads=1)

    def operator(text: str) -> None:  # acts on what the recorder says, as a person would
        if text.endswith("go"):
            os.write(write_end, js(AXIS, 1, -FULL) + press(2))  # stick away from you, close the gripper
        elif "keep it" in text:
            os.write(write_end, press(0))

    episodes = record_teleop(env, GamepadTeleop(read_end), episodes=1, seed=0, realtime=False, say=operator)
    assert len(episodes) == 1
    actions = episodes[0]["actions"]
    assert len(actions) == 150 and episodes[0]["truncations"][-1]  # ran to the 3 s time limit at 50 Hz
    assert (actions == [1.0, 0.0, 0.0, 1.0]).all()


@pytest.mark.parametrize("handler", ["default", "ignored"])
def test_ctrl_c_while_recording_keeps_the_episodes_already_accepted(pipe, handler):
    """An hour of demonstrations must not be lost to a Ctrl-C: it stops recording as the quit button does, also
    in a process where SIGINT had been set to be ignored (in CI a worker had it so: the Ctrl-C did nothing, and all
    three episodes were recorded)."""
    import torch

    from robo_rl.envs import make_vector_env
    from robo_rl.record import record_teleop

    read_end, write_end = pipe
    env = make_vector_env(OmegaConf.load(ROOT / "configs" / "env" / "arm_reach.yaml"), 1, torch.device("cpu"),
                          threads=1)
    said: list[str] = []

    def operator(text: str) -> None:
        said.append(text)
        if text.startswith("episode 1 ") and text.endswith("go"):
            os.write(write_end, js(AXIS, 1, -FULL) + press(3))  # stick away from you, end the episode
        elif text.startswith("episode 2 ") and text.endswith("go"):
            signal.raise_signal(signal.SIGINT)  # the person presses Ctrl-C in the terminal
        elif "keep it" in text:
            os.write(write_end, press(0))

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if handler == "ignored" else signal.default_int_handler)
    try:
        episodes = record_teleop(env, GamepadTeleop(read_end), episodes=3, seed=0, realtime=False, say=operator)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped record_teleop: the accepted episode was lost")
    finally:
        assert signal.getsignal(signal.SIGINT) == (signal.SIG_IGN if handler == "ignored" else signal.default_int_handler)
        signal.signal(signal.SIGINT, previous)
    assert len(episodes) == 1 and (episodes[0]["actions"][:, 0] == 1.0).all()
    assert said[-1] == "interrupted: keeping the 1 accepted episode(s)"


def test_an_error_part_way_keeps_the_episodes_already_accepted(pipe):
    """teleop.keyboard.speed=nan (now refused up front) made the first key press of episode 2 an error: the session
    ended with it and the accepted episode was never written. Any error now hands them to the caller with it."""
    import torch

    from robo_rl.envs import make_vector_env
    from robo_rl.record import RecordingStopped, record_teleop

    read_end, write_end = pipe
    env = make_vector_env(OmegaConf.load(ROOT / "configs" / "env" / "arm_reach.yaml"), 1, torch.device("cpu"),
                          threads=1)
    teleop = GamepadTeleop(read_end)
    said: list[str] = []

    def operator(text: str) -> None:
        said.append(text)
        if text.startswith("episode 1 ") and text.endswith("go"):
            os.write(write_end, js(AXIS, 1, -FULL) + press(3))
        elif text.startswith("episode 2 ") and text.endswith("go"):
            teleop.speed = float("nan")  # the device goes wrong
            os.write(write_end, js(AXIS, 1, -FULL))
        elif "keep it" in text:
            os.write(write_end, press(0))

    with pytest.raises(RecordingStopped) as stopped:
        record_teleop(env, teleop, episodes=3, seed=0, realtime=False, say=operator)
    assert len(stopped.value.accepted) == 1 and (stopped.value.accepted[0]["actions"][:, 0] == 1.0).all()
    assert "finite" in str(stopped.value.error) and said[-1] == "stopped by an error: keeping the 1 accepted episode(s)"


def _existing_dataset(root: Path, dataset_id: str) -> Path:
    """A dataset folder at `dataset_id` under the Minari root `root`, as another recording left it."""
    path = root / dataset_id
    (path / "data").mkdir(parents=True)
    (path / "data" / "metadata.json").write_text('{"dataset_id": "%s"}' % dataset_id)
    return path


def test_recording_to_a_dataset_that_exists_is_refused_before_the_first_episode(tmp_path, monkeypatch):
    """It was refused when the episodes were written, after the person had driven and accepted every one of
    them: all lost."""
    from hydra import compose, initialize_config_dir

    from robo_rl.datasets import DatasetError
    from robo_rl.record import record

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    existing = _existing_dataset(tmp_path / "minari", "a/b/c-v0")
    os.mkfifo(tmp_path / "js0")
    operator = os.open(tmp_path / "js0", os.O_RDWR | os.O_NONBLOCK)  # the pad's side of the stand-in
    try:
        os.write(operator, press(6))  # the quit button, waiting to be read should a session start
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            cfg = compose("record", ["device=gamepad", f"device_path={tmp_path / 'js0'}", "env=arm_reach",
                                     "dataset=a/b/c-v0", "episodes=2", "realtime=false"])
            with pytest.raises(DatasetError) as error:
                record(cfg)
        assert os.read(operator, 64) == press(6)  # no session: nothing read from the pad
    finally:
        os.close(operator)
    assert str(error.value) == (f"dataset 'a/b/c-v0' exists at {existing}; choose a new version "
                                "(e.g. dataset=a/b/c-v1)")
    assert sorted(str(p.relative_to(existing)) for p in existing.rglob("*")) == ["data", "data/metadata.json"]
    assert [p.name for p in (tmp_path / "minari" / "a" / "b").iterdir()] == ["c-v0"]  # nothing else written


def test_a_dataset_written_meanwhile_gets_the_episodes_under_its_next_free_version(tmp_path, monkeypatch, capsys):
    """Should another command write the dataset while a person records (it was free when recording began), the
    accepted episodes are not lost to the name: they go to the next free version, and the output says so."""
    import minari
    from hydra import compose, initialize_config_dir

    import robo_rl.record
    from robo_rl.record import record

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    os.mkfifo(tmp_path / "js0")
    operator = os.open(tmp_path / "js0", os.O_RDWR | os.O_NONBLOCK)
    real_session = robo_rl.record.record_teleop

    def session_meanwhile_another_writes(env, teleop, *args):
        _existing_dataset(tmp_path / "minari", "a/b/c-v0")
        _existing_dataset(tmp_path / "minari", "a/b/c-v1")

        def person(text: str) -> None:  # ends the episode at once and keeps it
            print(text)
            if text.endswith("go"):
                os.write(operator, press(3))
            elif "keep it" in text:
                os.write(operator, press(0))

        return real_session(env, teleop, *args, say=person)

    monkeypatch.setattr(robo_rl.record, "record_teleop", session_meanwhile_another_writes)
    try:
        with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
            record(compose("record", ["device=gamepad", f"device_path={tmp_path / 'js0'}", "env=arm_reach",
                                      "dataset=a/b/c-v0", "episodes=1", "realtime=false"]))
    finally:
        os.close(operator)
    assert "dataset a/b/c-v0 appeared while recording; writing the episodes as a/b/c-v2 instead" \
        in capsys.readouterr().out
    assert minari.load_dataset("a/b/c-v2").total_episodes == 1
    assert (tmp_path / "minari" / "a/b/c-v0/data/metadata.json").read_text() == '{"dataset_id": "a/b/c-v0"}'
