"""One control tick of an arm policy (robo_rl/ArmReach, ArmPickCube), independent of ROS.

The policy moves the tool: action (dx, dy, dz) in [-1, 1] times the task's `action_scale` metres from
where the tool is, clipped to the task's workspace, and a gripper command in [-1, 1] (-1 open). The
tick turns that into joint positions for a position controller (ros2_control): damped least squares
on the tool Jacobian (position, and the orientation held since the policy started: all of it, or for a
5-DoF arm trained with orientation "axis" the direction of the tool's axis), joint limits,
and a limit on the joint change per tick (real arms abort on discontinuities). The observation's goal
is the task's: the reach point (`ArmSettings.goal`) for reach; for pick-cube, as in training, the point
`lift_height` above where the cube was when the policy started (the first tick that moves with an
object position). With a joint missing
from the joint state, non-finite values, or a state older than the timeout, it holds the last
command; it moves again on the first tick with a good state.

A policy on camera images (SERL's pixel tasks) reads the robot's own state (a subset of the arm fields, e.g.
tool position and velocity and gripper opening) and one RGB image per camera; the tick holds while a
camera's latest image is missing, of another size than the policy's, or older than `image_timeout`. Where
its fields need no object position (the cameras show the cube), none is waited for.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.inference import OnnxPolicy
from robo_rl_ros.core.kinematics import KinematicChain
from robo_rl_ros.core.safety import SafetyFilter
from robo_rl_ros.core.watchdog import StateWatchdog

ARM_FIELDS = {"tool_position": 3, "tool_velocity": 3, "gripper_opening": 1, "cube_position": 3,
              "cube_minus_tool": 3, "goal_minus_tool": 3}
OBJECT_FIELDS = ("cube_position", "cube_minus_tool")  # fields computed from the object's position
# A joint state this far outside a joint's range is not this arm's (degrees sent as radians, another arm's joint
# names, an encoder fault): the tick holds on it. Within it, real encoders and MuJoCo's soft limits overshoot.
JOINT_RANGE_TOLERANCE = 0.1  # [rad]
GRIPPER_RANGE_TOLERANCE = 0.25  # of the gripper's range
# A joint velocity beyond this is no arm's (the SO-100's and Panda's servos turn at most a few rad/s): a fault or a
# unit mistake, on which the tick holds as on a joint outside its range
MAX_JOINT_VELOCITY = 20.0  # [rad/s]
# An object farther than this outside the task's workspace is a bad pose (a mocap glitch, another frame)
OBJECT_WORKSPACE_TOLERANCE = 0.2  # [m]
# Each setting's range (low, high, whether low itself is allowed); the firmware app takes the same for the settings
# it shares (robo_rl.export.arm_firmware.ArmFirmwareSettings). Without upper bounds a deg/s max_joint_speed of 90,
# or a state_timeout of 1e9 (no watchdog), drove the arm.
SETTING_RANGES = {"state_timeout": (0.0, 1.0, False), "max_joint_speed": (0.0, 20.0, False),
                  "ik_damping": (1e-4, 1.0, True), "orientation_gain": (0.0, 10.0, True),
                  "orientation_weight": (0.0, 100.0, True), "image_timeout": (0.0, 1.0, False)}


def training_orientation_weight(env_config: dict) -> float:
    """The IK's weight of orientation against position [m/rad] that the training's Cartesian impedance implied,
    sqrt(rotation_stiffness / translation_stiffness) (its equilibrium minimises k_t |dp|^2 + k_r |dtheta|^2); 1.0
    for a task without those gains."""
    gains = env_config.get("gains") or {}
    try:
        weight = math.sqrt(float(gains["rotation_stiffness"]) / float(gains["translation_stiffness"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1.0
    return weight if math.isfinite(weight) else 1.0


@dataclasses.dataclass(frozen=True)
class ArmSettings:
    """What a deployment chooses (node parameters)."""

    goal: tuple[float, float, float]  # the reach point [m] (reach task; pick-cube derives its goal)
    state_timeout: float = 0.1  # [s]
    max_joint_speed: float = 1.0  # [rad/s]: the joint change per tick is at most this over the tick
    ik_damping: float = 0.05
    orientation_gain: float = 1.0
    # [m/rad] how much a radian of orientation error counts against a metre of position error in the IK's
    # least squares; None: the training's (`training_orientation_weight`), as the firmware app and the checks in
    # the loop take it (1.0 for the SO-ARM100's 0.1 took a pick-cube policy from 40% to 0%)
    orientation_weight: float | None = None
    image_timeout: float = 0.2  # [s] a policy on camera images holds when a camera's latest image is older

    def __post_init__(self) -> None:
        """ValueError naming the setting that cannot drive an arm: a NaN max_joint_speed made every command NaN,
        a negative one walked the joints past their limits while the arm stood still, a goal of 2 entries
        crashed the first tick, and a NaN goal kept the arm still without a word."""
        goal = np.asarray(self.goal, dtype=np.float64)
        if goal.shape != (3,) or not np.isfinite(goal).all():
            raise ValueError(f"goal must be 3 finite numbers [m], got {list(self.goal)}")
        for name, (low, high, low_allowed) in SETTING_RANGES.items():
            value = getattr(self, name)
            if value is None and name == "orientation_weight":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= value <= high \
                    or (value == low and not low_allowed):  # orientation_gain < 0 turns the tool away
                raise ValueError(f"{name} must be a number in {'[' if low_allowed else '('}{low:g}, {high:g}], "
                                 f"got {value!r}")


@dataclasses.dataclass(frozen=True)
class ArmTickResult:
    """What one tick decided."""

    moving: bool  # False: holding the last command
    reason: str
    joint_command: np.ndarray | None  # positions in the bundle's joint order (None before any state)
    gripper_command: float | None  # opening per finger [m]
    observation: np.ndarray | None
    action: np.ndarray | None = None  # the action applied (after the safety filter), None while holding
    images: dict[str, np.ndarray] | None = None  # a policy on camera images: the images it read, by camera


class ArmPolicyController:
    """A bundle's arm policy with observation assembly, differential IK, limits and a watchdog."""

    def __init__(self, bundle: PolicyBundle, settings: ArmSettings):
        if bundle.robot != "arm":
            raise BundleError(f"{bundle.directory}: policy.json has robot {bundle.robot!r}; this node drives robot 'arm'")
        if "kinematics" not in bundle.manifest:
            raise BundleError(f"{bundle.env_id} has no kinematics in policy.json (export it with robo-rl >= this version)")
        self.chain = KinematicChain(bundle.manifest["kinematics"])
        self.slices = {}
        for entry in bundle.layout:
            if ARM_FIELDS.get(entry.name) != entry.size:
                raise BundleError(f"observation field {entry.name!r} (size {entry.size}) is not an arm field: {ARM_FIELDS}")
            self.slices[entry.name] = entry.slice
        self.cameras = {camera.name: camera for camera in bundle.cameras}
        if not self.cameras and set(self.slices) != set(ARM_FIELDS):
            raise BundleError(f"the observation layout lacks the arm fields {sorted(set(ARM_FIELDS) - set(self.slices))}")
        task = bundle.env_config
        try:
            self.action_scale = float(task["action_scale"])
            self.workspace = np.array(task["workspace"], dtype=np.float64).T  # (2, 3)
            self.task = bundle.task  # policy.json's task: what the goal is (a point, or the lift above the cube)
            self.lift_height = float(task["lift_height"]) if self.task == "pick_cube" else 0.0
            self.needs_object = bool(set(OBJECT_FIELDS) & set(self.slices)) or (
                self.task == "pick_cube" and "goal_minus_tool" in self.slices)
        except (KeyError, TypeError, ValueError) as error:
            raise BundleError("policy.json training.env_config lacks the arm task's action_scale and workspace: "
                              f"{error!r}") from error
        # 5-DoF arms trained with orientation "axis" hold only the direction of the tool's axis (sim.arm.robot.ArmSpec)
        spec = task.get("spec")
        self.orientation_mode = spec.get("orientation", "full") if isinstance(spec, dict) else "full"
        if self.orientation_mode not in ("full", "axis"):
            raise BundleError(f"policy.json training.env_config.spec.orientation must be 'full' or 'axis', "
                              f"got {self.orientation_mode!r}")
        self.gripper_low, self.gripper_high = (float(x) for x in self.chain.gripper_range)
        self.orientation_weight = training_orientation_weight(task) if settings.orientation_weight is None \
            else float(settings.orientation_weight)
        self.bundle, self.settings = bundle, settings
        self.dt = 1.0 / bundle.control_hz
        self.policy = OnnxPolicy(bundle)
        self.action_filter = SafetyFilter(bundle.action_low, bundle.action_high, bundle.safe_action, np.inf)
        self.watchdog = StateWatchdog(settings.state_timeout)
        # pick-cube: set from the cube's position on the first tick that moves
        self.goal = np.full(3, np.nan) if self.task == "pick_cube" else np.asarray(settings.goal, dtype=np.float64)
        self.object_position = np.full(3, np.nan)
        self._object_received: float | None = None
        self._q: np.ndarray | None = None
        self._qdot = np.zeros(len(self.chain.joints))
        self._opening = 0.0
        self._invalid = "no joint state received yet"
        self._command: np.ndarray | None = None
        self._gripper: float | None = None
        self._orientation: np.ndarray | None = None
        self._moving = False
        self._images: dict[str, tuple[float, np.ndarray]] = {}  # camera -> (when received, RGB image)

    def goal_problem(self) -> str:
        """Why the settings' reach goal cannot be flown to ("" if it can, or if the task derives its goal): one
        outside the task's workspace is never reached (the SO-ARM100 was given the Panda's default 0.2 m beyond
        it), and the policy observes a goal it never trained on."""
        if self.task == "pick_cube":
            return ""
        goal = np.asarray(self.settings.goal, dtype=np.float64)
        beyond = float(np.max(np.maximum(self.workspace[0] - goal, goal - self.workspace[1])))
        if beyond > 1e-9:
            return (f"goal {goal.tolist()} lies {beyond:.3g} m outside the task's workspace "
                    f"{np.round(self.workspace.T, 4).tolist()} (x, y, z ranges [m])")
        return ""

    def new_episode(self) -> None:
        """The scene was put back at a start (a reset between training episodes): the next tick that moves
        starts from where the arm is, and pick-cube's goal is taken again from the cube's new start."""
        self._moving = False
        if self.task == "pick_cube":
            self.goal = np.full(3, np.nan)

    def update_joint_state(self, now: float, names: list[str], positions: list[float],
                           velocities: list[float] | None) -> bool:
        """Take a joint state (any order: matched by name); False, and nothing moves on it, if a joint
        is missing or a value is not finite."""
        index = {name: i for i, name in enumerate(names)}
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:  # the later entry was taken silently
            return self._invalidate(f"joint state names {', '.join(twice)} more than once")
        wanted = (*self.chain.joints, self.chain.gripper_joint)
        missing = [n for n in wanted if n not in index]
        if missing or len(positions) != len(names):
            return self._invalidate(f"joint state lacks {missing or 'positions'}")
        q = np.array([positions[index[n]] for n in self.chain.joints], dtype=np.float64)
        has_velocity = velocities is not None and len(velocities) == len(names)
        qdot = np.array([velocities[index[n]] for n in self.chain.joints] if has_velocity else np.zeros(len(q)))
        opening = float(positions[index[self.chain.gripper_joint]])
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qdot)) and np.isfinite(opening)):
            return self._invalidate("joint state contains NaN or Inf")
        outside = self._outside_range(q, opening)
        if outside:
            return self._invalidate(outside)
        fastest = int(np.argmax(np.abs(qdot)))
        if abs(qdot[fastest]) > MAX_JOINT_VELOCITY:
            return self._invalidate(f"joint state gives {self.chain.joints[fastest]} a velocity of {qdot[fastest]:.4g} "
                                    f"rad/s, beyond any arm's {MAX_JOINT_VELOCITY:g} rad/s")
        self._q, self._qdot, self._opening, self._invalid = q, qdot, opening, ""
        self.watchdog.feed(now)
        return True

    def _outside_range(self, q: np.ndarray, opening: float) -> str:
        """Which joint of the state lies outside its range by more than the tolerance ("" if none): the IK would
        otherwise start from a pose the arm cannot be in and command the joints towards their limits."""
        beyond = np.maximum(self.chain.lower - q, q - self.chain.upper)
        worst = int(np.argmax(beyond))
        if beyond[worst] > JOINT_RANGE_TOLERANCE:
            return (f"joint state puts {self.chain.joints[worst]} at {q[worst]:.4g} rad, outside its range "
                    f"[{self.chain.lower[worst]:.4g}, {self.chain.upper[worst]:.4g}] by more than {JOINT_RANGE_TOLERANCE:g} "
                    "rad (degrees, or another arm's joint?)")
        low, high = sorted((self.gripper_low, self.gripper_high))
        margin = GRIPPER_RANGE_TOLERANCE * (high - low)
        if not low - margin <= opening <= high + margin:
            return (f"joint state puts {self.chain.gripper_joint} at {opening:.4g}, outside the gripper's range "
                    f"[{low:.4g}, {high:.4g}] by more than {GRIPPER_RANGE_TOLERANCE:.0%} of it")
        return ""

    def update_image(self, camera: str, now: float, image: np.ndarray) -> str:
        """Take a camera's RGB (height, width, 3) uint8 image; "" if taken, else why not (a camera the policy
        does not read, or an image of another size: the cameras must give what the policy was trained on)."""
        expected = self.cameras.get(camera)
        if expected is None:
            return f"the policy reads no camera {camera!r}; it reads {sorted(self.cameras)}"
        if image.shape != expected.shape or image.dtype != np.uint8:
            return (f"camera {camera!r} gives {image.dtype} {image.shape[1]}x{image.shape[0]} images, the policy reads "
                    f"uint8 {expected.width}x{expected.height} (crop or resize it to that, e.g. with image_proc)")
        self._images[camera] = (now, image)
        return ""

    def _images_problem(self, now: float) -> str:
        """Why the cameras' latest images cannot be used now ("" if they can)."""
        for name in self.cameras:
            if name not in self._images:
                return f"no image from camera {name!r} yet"
            age = now - self._images[name][0]
            if not 0.0 <= age <= self.settings.image_timeout:  # < 0: the clock stepped back
                return f"the image from camera {name!r} is {age * 1e3:.0f} ms old"
        return ""

    def update_object(self, position: np.ndarray, now: float | None = None) -> None:
        """The latest object (cube) position, world frame, received at `now` (node clock [s]; None: a fixed
        position, which never ages)."""
        self.object_position = np.asarray(position, dtype=np.float64)
        self._object_received = now

    def _object_problem(self, now: float) -> str:
        """Why the object position cannot be used now ("" if it can): none, stale (the arm kept moving on the last
        pose when the pose stopped), or far outside the workspace (a cube at x = 1e308 was flown to)."""
        if not np.all(np.isfinite(self.object_position)):
            return "no object position"
        if self._object_received is not None and not 0.0 <= now - self._object_received <= self.settings.state_timeout:
            return f"object pose is {(now - self._object_received) * 1e3:.0f} ms old"  # < 0: the clock stepped back
        beyond = np.max(np.maximum(self.workspace[0] - self.object_position, self.object_position - self.workspace[1]))
        if beyond > OBJECT_WORKSPACE_TOLERANCE:
            return (f"object position {np.round(self.object_position, 3).tolist()} lies {beyond:.3g} m outside the "
                    "task's workspace")
        return ""

    def _invalidate(self, reason: str) -> bool:
        self._invalid = reason
        self.watchdog.clear()
        return False

    def observation(self, q: np.ndarray, qdot: np.ndarray, opening: float) -> np.ndarray:
        """The observation vector (float32) for joint positions and velocities and the gripper opening."""
        tool, _, jacobian = self.chain.forward(q)
        obs = np.empty(self.bundle.observation_size)
        s = self.slices
        values = {"tool_position": lambda: tool, "tool_velocity": lambda: jacobian[:3] @ qdot,
                  "gripper_opening": lambda: opening, "cube_position": lambda: self.object_position,
                  "cube_minus_tool": lambda: self.object_position - tool, "goal_minus_tool": lambda: self.goal - tool}
        for name, where in self.slices.items():
            obs[where] = values[name]()
        return obs.astype(np.float32)

    def tick(self, now: float, act: Callable[[np.ndarray], np.ndarray] | None = None) -> ArmTickResult:
        """Decide this tick's joint and gripper commands from the bundle's policy or, if given, from `act`
        (observation -> action in the policy's action space: a learner's exploring actor, a teleoperator),
        through the same safety filter, IK and limits."""
        reason = self._invalid or ("" if self.watchdog.is_fresh(now) else
                                   f"joint state is {self.watchdog.age(now) * 1e3:.0f} ms old")
        if not reason and self.needs_object:
            reason = self._object_problem(now)
        if not reason and self.cameras:
            reason = self._images_problem(now)
        if reason:
            self._moving = False
            return ArmTickResult(False, reason, self._command, self._gripper, None)
        q = self._q
        assert q is not None
        if self.needs_object and not np.all(np.isfinite(self.goal)):  # pick-cube: the lift goal above the cube's start
            self.goal = self.object_position + (0.0, 0.0, self.lift_height)
        if self._command is None or not self._moving:
            self._command = q.copy()  # start (or resume) from where the arm is
            self._orientation = self.chain.forward(q)[1] if self._orientation is None else self._orientation
        self._moving = True
        obs = self.observation(q, self._qdot, self._opening)
        images = {name: image for name, (_, image) in self._images.items()} if self.cameras else None
        filtered = self.action_filter(act(obs) if act is not None else
                                      self.policy(obs, images) if images else self.policy(obs))
        if filtered.rejected:  # hold, as the firmware does on a policy fault: the export's safe action (gripper 0)
            self._moving = False  # opened the gripper halfway and dropped a held cube
            return ArmTickResult(False, "the policy's action is not finite", self._command, self._gripper, obs)
        action = filtered.action
        tool, rotation, jacobian = self.chain.forward(q)
        target = np.clip(tool + self.action_scale * action[:3], self.workspace[0], self.workspace[1])
        orientation_error = self.settings.orientation_gain * _rotation_error(self._orientation, rotation)
        if self.orientation_mode == "axis":  # only about the held frame's x and y axes, as the training's impedance
            held = self._orientation[:, :2].T
            jacobian = np.vstack([jacobian[:3], held @ jacobian[3:]])
            orientation_error = held @ orientation_error
        weight = self.orientation_weight
        jacobian = np.vstack([jacobian[:3], weight * jacobian[3:]])
        error = np.concatenate([target - tool, weight * orientation_error])
        desired = q + limited_ik_step(jacobian, error, q, self.chain.lower, self.chain.upper, self.settings.ik_damping)
        step = self.settings.max_joint_speed * self.dt
        self._command = np.clip(desired, self._command - step, self._command + step)
        self._gripper = self.gripper_high + (self.gripper_low - self.gripper_high) * 0.5 * (action[3] + 1.0)
        return ArmTickResult(True, "", self._command.copy(), self._gripper, obs, action, images)


def limited_ik_step(jacobian: np.ndarray, error: np.ndarray, q: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    damping: float, passes: int = 3) -> np.ndarray:
    """The joint change that best reduces `error` (damped least squares on `jacobian`'s rows) without leaving
    the joint limits: a joint the step would take past a limit stops there and the others solve again for
    what is left, as a joint limit stops one joint of an arm under Cartesian impedance and not the rest."""
    step = np.zeros(len(q))
    free = np.ones(len(q), dtype=bool)
    for _ in range(passes):
        columns = jacobian * free
        remaining = error - jacobian[:, ~free] @ step[~free]
        solved = columns.T @ np.linalg.solve(columns @ columns.T + damping ** 2 * np.eye(len(error)), remaining)
        step[free] = solved[free]
        over = free & ((q + step < lower) | (q + step > upper))
        if not over.any():
            break
        step[over] = np.clip(q + step, lower, upper)[over] - q[over]
        free &= ~over
    return np.clip(q + step, lower, upper) - q


def _rotation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Rotation vector (world frame) from `current` to `target`."""
    delta = target @ current.T
    angle = float(np.arccos(np.clip((np.trace(delta) - 1.0) / 2.0, -1.0, 1.0)))
    axis = np.array([delta[2, 1] - delta[1, 2], delta[0, 2] - delta[2, 0], delta[1, 0] - delta[0, 1]])
    return axis / 2.0 if angle < 1e-9 else axis * angle / (2.0 * np.sin(angle))
