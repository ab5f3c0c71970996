"""Load and validate a robo-rl policy bundle (`policy.json` + `policy.onnx`), the export's contract.

A policy on camera images also reads one uint8 RGB image per camera (`observation.images`: name, height,
width), and its recorded pairs' images are in the file `files.recorded_images` (an .npz of one
(pairs, height, width, 3) array per camera).

Only numpy and the standard library: this runs on the robot computer.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

BUNDLE_FORMAT = "robo_rl.policy_bundle/1"
ROBOTS = ("quadrotor", "arm")  # policy.json `robot`: the kinds of robot a bundle drives
MAX_CONTROL_HZ = 1000.0  # the Crazyflie's own stabilizer loop rate; no node ticks faster


class BundleError(ValueError):
    """The bundle is missing, corrupt or inconsistent."""


@dataclasses.dataclass(frozen=True)
class LayoutField:
    """One named slice of the observation vector."""

    name: str
    offset: int
    size: int
    unit: str

    @property
    def slice(self) -> slice:
        """This field's slice of the observation vector."""
        return slice(self.offset, self.offset + self.size)


@dataclasses.dataclass(frozen=True)
class CameraInput:
    """One camera image the policy reads: ONNX input `name`, uint8 RGB (height, width, 3)."""

    name: str
    height: int
    width: int

    @property
    def shape(self) -> tuple[int, int, int]:
        """The image's array shape."""
        return (self.height, self.width, 3)


@dataclasses.dataclass(frozen=True)
class PolicyBundle:
    """A validated bundle: what every deployment target reads from `policy.json`."""

    directory: Path
    env_id: str
    robot: str  # one of ROBOTS
    task: str  # the task it was trained on: "hover", "reach", "figure_eight", "pick_cube", ...
    control_hz: float
    observation_size: int
    layout: tuple[LayoutField, ...]
    action_size: int
    action_low: np.ndarray
    action_high: np.ndarray
    safe_action: np.ndarray
    recorded_observations: np.ndarray  # (pairs, observation_size)
    recorded_actions: np.ndarray  # (pairs, action_size)
    env_config: dict[str, Any]
    vehicle_parameters: dict[str, Any]  # training.vehicle_parameters: the nominal vehicle it was trained on
    manifest: dict[str, Any]
    # policy.json `deployment`: the vehicle the bundle was exported to fly (its vehicle_parameters,
    # thrust_max_newton, hover_command, firmware limits); {} in bundles from before it was recorded
    deployment: dict[str, Any] = dataclasses.field(default_factory=dict)
    cameras: tuple[CameraInput, ...] = ()  # a policy on camera images: the images it reads, in ONNX input order
    recorded_images: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # (pairs, H, W, 3) per camera

    @property
    def onnx_path(self) -> Path:
        """The ONNX file of the policy."""
        return self.directory / self.manifest["files"]["onnx"]

    def field(self, name: str) -> LayoutField:
        """The layout field called `name`; BundleError if the layout has none."""
        for entry in self.layout:
            if entry.name == name:
                return entry
        raise BundleError(f"the observation layout has no field {name!r}; it has {[f.name for f in self.layout]}")

    @property
    def is_quadrotor(self) -> bool:
        """Whether the bundle is a quadrotor policy (four normalized motor thrusts)."""
        return self.robot == "quadrotor"


def load_bundle(directory: str | Path) -> PolicyBundle:
    """Read and validate the bundle in `directory`; raise one BundleError naming the first problem."""
    directory = Path(directory)
    manifest_path = directory / "policy.json"
    if not manifest_path.is_file():
        # quoted where the path has leading or trailing blanks, which the message would otherwise hide
        shown = repr(str(directory)) if str(directory) != str(directory).strip() else str(directory)
        raise BundleError(f"no policy.json in {shown}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as error:  # JSONDecodeError, UnicodeDecodeError, an int of over 4300 digits
        raise BundleError(f"{manifest_path} is not valid JSON: {error}") from error
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise BundleError(f"{manifest_path}: format must be {BUNDLE_FORMAT!r}, got {found!r}")
    where = _first_non_finite(manifest)  # JSON readers accept NaN, Infinity, 1e999 (-> inf) and 10**400 (an int)
    if where is not None:
        path, value = where
        raise BundleError(f"{manifest_path}: {path} is {value}; every number in policy.json must be finite "
                          f"(within +-{sys.float_info.max:.3g})")
    try:
        bundle = _parse(directory, manifest)
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, BundleError):
            raise
        raise BundleError(f"{manifest_path}: missing or malformed entry: {error!r}") from error
    if not bundle.onnx_path.is_file():
        raise BundleError(f"the bundle's ONNX file {bundle.onnx_path} does not exist")
    if not bundle.onnx_path.resolve().is_relative_to(directory.resolve()):  # a symbolic link out of the bundle
        raise BundleError(f"the bundle's ONNX file {bundle.onnx_path} leads outside the bundle {directory}; "
                          "allowed: a file inside it")
    return bundle


def _parse(directory: Path, manifest: dict[str, Any]) -> PolicyBundle:
    robot, task = manifest.get("robot"), manifest.get("task")
    if robot not in ROBOTS:
        raise BundleError(f"policy.json: robot is {robot!r}; allowed: {', '.join(map(repr, ROBOTS))} (a bundle "
                          "without it was exported before robo-rl recorded it: export it again)")
    if not isinstance(task, str) or not task:
        raise BundleError(f"policy.json: task is {task!r}; allowed: the name of the task the policy was trained on")
    observation, action = _mapping(manifest, "observation"), _mapping(manifest, "action")
    obs_size, act_size = int(observation["size"]), int(action["size"])
    layout = tuple(LayoutField(str(f["name"]), int(f["offset"]), int(f["size"]), str(f.get("unit", "")))
                   for f in observation["layout"])
    offset = 0
    for entry in layout:
        if entry.offset != offset or entry.size < 1:
            raise BundleError(f"observation layout field {entry.name!r} at offset {entry.offset} (size "
                              f"{entry.size}) does not follow the previous field (expected offset {offset})")
        offset += entry.size
    if offset != obs_size:
        raise BundleError(f"the observation layout covers {offset} entries but observation.size is {obs_size}")
    if obs_size < 1 or act_size < 1:
        raise BundleError(f"observation.size {obs_size} and action.size {act_size} must be >= 1")
    std = _mapping(observation, "normalization", "observation.", required=False).get("std")
    if std is not None and not np.all(np.asarray(std, dtype=np.float64) > 0):
        raise BundleError("observation.normalization.std must be > 0 everywhere (it divides the observation)")
    low, high, safe = (_vector(action[key], act_size, f"action.{key}") for key in ("low", "high", "safe_action"))
    if not np.all(low <= high):
        raise BundleError(f"action.low {low.tolist()} exceeds action.high {high.tolist()}")
    if not np.all((safe >= low) & (safe <= high)):
        raise BundleError(f"action.safe_action {safe.tolist()} lies outside [low, high]")
    pairs = manifest["recorded_pairs"]
    if not isinstance(pairs, list) or not pairs:
        raise BundleError("recorded_pairs must hold at least one (observation, action) pair: the network is "
                          "checked against them at load")
    with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf, refused below
        recorded_obs = np.array([p["observation"] for p in pairs], dtype=np.float32).reshape(len(pairs), -1)
        recorded_act = np.array([p["action"] for p in pairs], dtype=np.float32).reshape(len(pairs), -1)
    if recorded_obs.shape[1] != obs_size or recorded_act.shape[1] != act_size:
        raise BundleError(f"recorded pairs have shapes {recorded_obs.shape[1]}/{recorded_act.shape[1]}, "
                          f"the bundle declares observation {obs_size} and action {act_size}")
    # finite in JSON (float64) but not in float32
    if not (np.all(np.isfinite(recorded_obs)) and np.all(np.isfinite(recorded_act))):
        raise BundleError("recorded_pairs hold numbers beyond float32's range")
    outside = (recorded_act < low - 1e-6) | (recorded_act > high + 1e-6)
    if np.any(outside):
        pair = int(np.argwhere(outside)[0][0])
        raise BundleError(f"recorded_pairs[{pair}].action {recorded_act[pair].tolist()} lies outside action.low/high")
    files = _mapping(manifest, "files")
    _onnx_file(files)
    cameras = _cameras(observation)
    recorded_images = _recorded_images(directory, files, cameras, len(pairs)) if cameras else {}
    control_hz = float(manifest["control_hz"])
    if not 0 < control_hz <= MAX_CONTROL_HZ:
        raise BundleError(f"control_hz is {control_hz}; allowed: a number in (0, {MAX_CONTROL_HZ:g}] Hz")
    training = _mapping(manifest, "training", required=False)
    env_config = _mapping(training, "env_config", "training.", required=False)
    vehicle_parameters = _mapping(training, "vehicle_parameters", "training.", required=False)
    deployment = _mapping(manifest, "deployment", required=False)
    return PolicyBundle(
        directory=directory, env_id=str(manifest["env_id"]), robot=robot, task=task, control_hz=control_hz,
        observation_size=obs_size,
        layout=layout, action_size=act_size, action_low=low, action_high=high, safe_action=safe,
        recorded_observations=recorded_obs, recorded_actions=recorded_act,
        env_config=dict(env_config), vehicle_parameters=dict(vehicle_parameters), manifest=manifest,
        deployment=dict(deployment), cameras=cameras, recorded_images=recorded_images,
    )


def _cameras(observation: dict[str, Any]) -> tuple[CameraInput, ...]:
    """observation.images, checked: distinct names, positive sizes, uint8 RGB."""
    entries = observation.get("images") or []
    if not isinstance(entries, list):
        raise BundleError(f"policy.json: observation.images must be a list of cameras, got {type(entries).__name__}")
    cameras = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise BundleError(f"policy.json: observation.images[{i}] must be a JSON object, got {entry!r}")
        name, height, width = entry.get("name"), entry.get("height"), entry.get("width")
        if not isinstance(name, str) or not name or name == "state" or any(c.name == name for c in cameras):
            raise BundleError(f"policy.json: observation.images[{i}].name is {name!r}; allowed: a camera name, "
                              "distinct, not 'state'")
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 8192 for v in (height, width)):
            raise BundleError(f"policy.json: observation.images[{i}] ({name}) is {height}x{width}; allowed: "
                              "whole numbers of pixels in 1..8192")
        if (entry.get("dtype"), entry.get("encoding"), entry.get("channels")) != ("uint8", "rgb8", 3):
            raise BundleError(f"policy.json: observation.images[{i}] ({name}) must be uint8 rgb8 with 3 channels, got "
                              f"{entry.get('dtype')!r} {entry.get('encoding')!r} with {entry.get('channels')!r}")
        cameras.append(CameraInput(name, height, width))
    return tuple(cameras)


def _recorded_images(directory: Path, files: dict[str, Any], cameras: tuple[CameraInput, ...],
                     pairs: int) -> dict[str, np.ndarray]:
    """The recorded pairs' images from files.recorded_images: one uint8 (pairs, H, W, 3) array per camera."""
    path = directory / _bundle_file(files, "recorded_images", "recorded_images.npz")
    if not path.is_file() or not path.resolve().is_relative_to(directory.resolve()):
        raise BundleError(f"the bundle's recorded images {path} are not a file inside the bundle; a policy on camera "
                          "images is checked against its recorded pairs at load")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {camera.name: archive[camera.name] for camera in cameras}
    except Exception as error:  # noqa: BLE001 (a damaged archive fails in zipfile's, zlib's or numpy's own ways)
        raise BundleError(f"{path} cannot be read as the cameras' recorded images: "
                          f"{type(error).__name__}: {error}") from error
    for camera in cameras:
        array = arrays[camera.name]
        if array.dtype != np.uint8 or array.shape != (pairs, *camera.shape):
            raise BundleError(f"{path}: {camera.name} is {array.dtype} {array.shape}; policy.json declares uint8 "
                              f"{(pairs, *camera.shape)} (one image per recorded pair)")
    return arrays


def _mapping(parent: dict[str, Any], key: str, prefix: str = "", required: bool = True) -> dict[str, Any]:
    """`parent[key]` if it is a JSON object; absent or null gives {} unless required; BundleError otherwise."""
    value = parent.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        found = "nothing" if value is None else type(value).__name__
        raise BundleError(f"policy.json: {prefix}{key} must be a JSON object, got {found}")
    return value


def _onnx_file(files: dict[str, Any]) -> str:
    """files.onnx, checked (see _bundle_file)."""
    return _bundle_file(files, "onnx", "policy.onnx")


def _bundle_file(files: dict[str, Any], key: str, example: str) -> str:
    """files[key], checked: the relative name of a file inside the bundle (no absolute path, no '..'), so that
    the node reads nothing the bundle does not hold."""
    name = files.get(key)
    allowed = f"allowed: the relative name of a file inside the bundle, e.g. {example!r}"
    if not isinstance(name, str) or not name.strip():
        raise BundleError(f"policy.json: files.{key} is {name!r}; {allowed}")
    parts = PurePosixPath(name.replace("\\", "/")).parts  # a Windows separator is no way out either
    if PurePosixPath(name).is_absolute() or Path(name).is_absolute() or ".." in parts or "\0" in name:
        raise BundleError(f"policy.json: files.{key} is {name!r}, a path out of the bundle; {allowed}")
    return name


def _vector(values: Any, size: int, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise BundleError(f"{name} must be {size} finite numbers, got {values!r}")
    return array


def _first_non_finite(value: Any, path: str = "") -> tuple[str, float | str] | None:
    """(dotted path, value) of the first NaN or infinite number in a parsed JSON value, or None. An integer
    beyond float64's range counts as infinite: JSON reads it as a Python int, which no float conversion takes."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "the document", value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        return path or "the document", "an integer beyond float64's range"  # (str() of it may itself fail)
    if isinstance(value, dict):
        items = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for item_path, item in items:
        found = _first_non_finite(item, item_path)
        if found is not None:
            return found
    return None
