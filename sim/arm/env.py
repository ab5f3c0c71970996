"""Batched arm tasks under the gymnasium VectorEnv API: reach a point, and pick and lift a cube.

N arms in one persistent `mujoco.batch.Batch`, driven by `BatchedImpedanceController` (SERL style):
the action is a tool displacement (dx, dy, dz) in [-1, 1] scaled by `action_scale` metres per control
step plus a gripper command in [-1, 1] (-1 open, +1 closed); the target is clipped to `workspace`, the
tool points down. Observation (named fields, `layout`): tool position, tool velocity, gripper opening,
cube position, cube minus tool, goal minus tool (the goal is the reach point, or the lift height above the
cube's start). The task (`sim.arm.tasks`, one module each) draws the goal and gives the named reward terms
(`info["reward_terms"]`), their scales and success: reach, the tool within 2 cm of the reach point; pick-cube,
the cube `lift_height` above its start. Episodes truncate at `episode_seconds`; one terminates if its
simulation blew up (MuJoCo's non-finite state warnings; `info["diverged"]`) and, with `end_on_success`, at
its first success.
Same-step autoreset as the quadrotor envs (`info["final_obs"]`, `info["_final_obs"]`).

Domain randomization (`randomization`, off by default): per episode, friction of the cube and finger
pads, cube size and mass, impedance stiffness and action latency; the drawn values are in
`info["params"]` at reset and on steps where episodes restarted.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import mujoco
import mujoco.batch
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from sim.arm.cameras import AppearanceLayout, CameraConfig, camera_ids, draw_appearance
from sim.arm.controller import BatchedImpedanceController, ImpedanceGains, load_impedance_arm
from sim.arm.tasks import arm_task_named
from sim.arm.robot import PANDA_LIKE, SO_ARM100_LIKE, ArmSpec, load_arm
from sim.errors import ConfigError
from sim.mujoco_warnings import UNSTABLE_WARNINGS
from sim.observation import (ObservationField, ObservationLayout, copy_observation, observation_row,
                             set_observation_rows)
from sim.validation import Interval, at_least_zero, check_batch_size, check_ranges, coerce, merge, positive

HOME = PANDA_LIKE.home  # the Panda-class arm's start: tool about 0.49 m above the table, pointing down


# Per robot, the task geometry and controller settings that differ from ArmTaskConfig's (Panda-class)
# defaults: `robot=` picks a row, further overrides apply on top.
ROBOTS: dict[str, dict[str, Any]] = {
    "panda_like": {},
    "so_arm100": {
        "spec": SO_ARM100_LIKE, "action_scale": 0.01,
        # inside what the 0.25 m of upper arm and forearm reach with the tool pointing down
        "workspace": ((0.1, 0.3), (-0.15, 0.15), (0.0, 0.2)), "cube_x": (0.15, 0.23), "cube_y": (-0.08, 0.08),
        "reach_box": ((0.14, 0.22), (-0.08, 0.08), (0.03, 0.1)), "lift_height": 0.06,
        "gains": ImpedanceGains(translation_stiffness=2000.0, rotation_stiffness=20.0, null_damping=0.05,
                                effective_mass=0.3),
    },
}


@dataclasses.dataclass
class ArmRandomization:
    """Per-episode domain randomization of the arm tasks, each drawn uniformly from (low, high)."""

    enabled: bool = False
    friction_scale: tuple[float, float] = (0.7, 1.3)  # sliding friction of the cube and the finger pads
    cube_half_size: tuple[float, float] = (0.018, 0.024)  # [m]
    cube_mass: tuple[float, float] = (0.03, 0.15)  # [kg]
    stiffness_scale: tuple[float, float] = (0.8, 1.2)  # impedance stiffness (damping keeps its ratio)
    latency_steps: tuple[int, int] = (0, 1)  # control steps from an action to its effect

    def validate(self) -> None:
        """Raise ConfigError naming the first bad range (each must also lie in `ARM_RANGES`)."""
        for f in dataclasses.fields(self):
            if f.name == "enabled":
                continue
            low, high = getattr(self, f.name)
            if not 0 <= low <= high or (f.name != "latency_steps" and low == 0):
                raise ConfigError(f"randomization.{f.name} must be a range 0 < low <= high, got {(low, high)}")


PARAM_NAMES = ("friction_scale", "cube_half_size", "cube_mass", "stiffness_scale", "latency_steps")


Box = tuple[tuple[float, float], tuple[float, float], tuple[float, float]]  # (low, high) of x, y, z [m]


@dataclasses.dataclass
class ArmTaskConfig:
    """One arm task. Positions in metres in the world frame (the robot base at the origin)."""

    task: str = "pick_cube"
    control_hz: float = 50.0
    substeps: int = 10  # physics steps of 2 ms per control step
    episode_seconds: float = 3.0
    action_scale: float = 0.02  # [m] tool displacement per control step at |action| = 1
    workspace: Box = ((0.25, 0.75), (-0.3, 0.3), (0.0, 0.45))
    cube_x: tuple[float, float] = (0.4, 0.6)
    cube_y: tuple[float, float] = (-0.15, 0.15)
    reach_box: Box = ((0.35, 0.65), (-0.2, 0.2), (0.05, 0.35))
    lift_height: float = 0.1
    success_radius: float = 0.02
    dense: bool = True
    # True: an episode terminates at its first success, as a real robot's does when a success detector ends it
    # (HIL-SERL); with dense false its reward is then 1 at that step and 0 before
    end_on_success: bool = False
    gains: ImpedanceGains = dataclasses.field(default_factory=ImpedanceGains)
    randomization: ArmRandomization = dataclasses.field(default_factory=ArmRandomization)
    cameras: CameraConfig = dataclasses.field(default_factory=CameraConfig)
    spec: ArmSpec = PANDA_LIKE

    @property
    def episode_steps(self) -> int:
        """Control steps before truncation."""
        return int(round(self.episode_seconds * self.control_hz))

    def validate(self, timestep: float | None = None) -> None:
        """Raise ConfigError naming the first bad field: its type, a non-finite number, one outside
        `ARM_RANGES`, or (given the model's physics `timestep`) substeps that do not make a control step."""
        coerce(self, ArmTaskConfig, "config")
        arm_task_named(self.task)  # ConfigError naming the known tasks
        check_ranges(self, ARM_RANGES, ARM_RANGE_PAIRS, "config")
        if timestep is not None and abs(self.substeps * timestep * self.control_hz - 1.0) > 1e-6:
            raise ConfigError(f"substeps={self.substeps} of {timestep} s do not make one {self.control_hz} Hz control step")
        if self.episode_steps < 1:
            raise ConfigError(f"config.episode_seconds must last at least one control step, got {self.episode_seconds:g}")
        self._check_inside_workspace()
        self.randomization.validate()
        self.cameras.validate()
        if self.cameras.enabled:  # the names against the arm's MJCF, before anything is built
            camera_ids(load_arm(self.spec), self.cameras.names, Path(self.spec.mjcf).name)


    def _check_inside_workspace(self) -> None:
        """ConfigError unless the cube's start area and the reach task's goals lie inside the workspace the tool is
        held to: a cube at x = 2.6 m or goals 5 m away gave episodes no action could succeed in, without a word."""
        (x_low, x_high), (y_low, y_high), _ = self.workspace
        for name, (low, high), (w_low, w_high) in (("cube_x", self.cube_x, (x_low, x_high)),
                                                   ("cube_y", self.cube_y, (y_low, y_high))):
            if not w_low <= low <= high <= w_high:
                raise ConfigError(f"config.{name} {[low, high]} must lie inside the workspace's {[w_low, w_high]} m")
        for axis, (low, high), (w_low, w_high) in zip("xyz", self.reach_box, self.workspace):
            if not w_low <= low <= high <= w_high:
                raise ConfigError(f"config.reach_box's {axis} range {[low, high]} must lie inside the workspace's "
                                  f"{[w_low, w_high]} m")


def check_home_in_joint_ranges(spec: ArmSpec, model: mujoco.MjModel) -> None:
    """ConfigError unless the arm's home pose (where every episode starts) lies within its joints' ranges."""
    for name, angle in zip(spec.joints, spec.home):
        joint = model.joint(name)
        low, high = (float(v) for v in model.jnt_range[joint.id])
        if bool(model.jnt_limited[joint.id]) and not low <= angle <= high:
            raise ConfigError(f"config.spec.home puts {name} at {angle:g} rad, outside its range [{low:g}, {high:g}]")


# What each number of an arm config may be, by field path (see sim.validation): wide enough for any
# experiment, narrow enough that the simulation and rewards stay finite and a step costs what it should.
ARM_RANGES: dict[str, Interval] = {
    "control_hz": Interval(5.0, 500.0, unit="Hz"),
    "substeps": Interval(1, 100),
    "episode_seconds": positive(3600.0, "s"),
    "action_scale": positive(1.0, "m"),
    "workspace": Interval(-10.0, 10.0, unit="m"),
    "cube_x": Interval(-10.0, 10.0, unit="m"),
    "cube_y": Interval(-10.0, 10.0, unit="m"),
    "reach_box": Interval(-10.0, 10.0, unit="m"),
    "lift_height": positive(10.0, "m"),
    "success_radius": positive(10.0, "m"),
    "gains.translation_stiffness": at_least_zero(1e5, "N/m"),
    "gains.rotation_stiffness": at_least_zero(1e4, "N m/rad"),
    "gains.translation_damping_ratio": at_least_zero(100.0),
    "gains.rotation_damping_ratio": at_least_zero(100.0),
    "gains.null_damping": at_least_zero(1000.0, "N m s/rad"),
    "gains.effective_mass": positive(1000.0, "kg"),
    "randomization.friction_scale": positive(100.0),
    "randomization.cube_half_size": positive(0.5, "m"),
    "randomization.cube_mass": positive(100.0, "kg"),
    "randomization.stiffness_scale": positive(100.0),
    "randomization.latency_steps": at_least_zero(50),
    "cameras.width": Interval(8, 2048, unit="px"),
    "cameras.height": Interval(8, 2048, unit="px"),
    "cameras.workers": at_least_zero(256),
    "cameras.randomization.light_position": at_least_zero(5.0, "m"),
    "cameras.randomization.light_intensity": at_least_zero(10.0),
    "cameras.randomization.ambient": Interval(0.0, 1.0),
    "cameras.randomization.colour": Interval(0.0, 1.0),
    "cameras.randomization.camera_position": at_least_zero(1.0, "m"),
    "cameras.randomization.camera_rotation": Interval(0.0, 90.0, unit="deg"),
    "cameras.randomization.fovy_scale": Interval(0.1, 3.0),
    "spec.home": Interval(-10.0, 10.0, unit="rad"),
}
ARM_RANGE_PAIRS = ("workspace", "cube_x", "cube_y", "reach_box", "randomization.friction_scale",
                   "randomization.cube_half_size", "randomization.cube_mass", "randomization.stiffness_scale",
                   "randomization.latency_steps", "cameras.randomization.light_intensity", "cameras.randomization.ambient",
                   "cameras.randomization.fovy_scale")


def make_arm_config(task: str = "pick_cube", robot: str = "panda_like", config: ArmTaskConfig | Mapping | None = None,
                    **overrides: Any) -> ArmTaskConfig:
    """The one place where an arm config is made and checked: a full `ArmTaskConfig`, or the robot's task
    defaults (`ROBOTS`), updated by overrides (nested dicts, as Hydra gives them) through the config merge
    every env shares (`sim.validation.merge`); every number held to `ARM_RANGES` (the substeps check needs
    the model: `validate`)."""
    if not isinstance(robot, str) or robot not in ROBOTS:
        raise ConfigError(f"unknown robot {robot!r}; known: {', '.join(ROBOTS)}")
    if isinstance(config, Mapping):
        overrides, config = {**config, **overrides}, None
    elif config is not None and not isinstance(config, ArmTaskConfig):
        raise ConfigError(f"config must be a mapping of ArmTaskConfig fields, got {type(config).__name__}")
    result = merge(config or ArmTaskConfig(task=task, **ROBOTS[robot]), overrides)
    result.validate()
    return result


def arm_layout() -> ObservationLayout:
    """Observation layout of the arm tasks."""
    return ObservationLayout((
        ObservationField("tool_position", 3, "m", "tool centre point, world frame"),
        ObservationField("tool_velocity", 3, "m/s", "tool centre point velocity, world frame"),
        ObservationField("gripper_opening", 1, "m", "opening of one finger (0 closed, 0.04 open)"),
        ObservationField("cube_position", 3, "m", "cube centre, world frame"),
        ObservationField("cube_minus_tool", 3, "m", "cube centre minus tool centre point"),
        ObservationField("goal_minus_tool", 3, "m", "reach point (reach) or lift goal above the cube start (pick) minus tool"),
    ))


class ArmVectorEnv(VectorEnv):
    """N arms on one task, stepped together; see the module docstring."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task: str = "pick_cube", num_envs: int = 16, nthread: int = 0,
                 config: ArmTaskConfig | dict | None = None, backend: str = "mujoco_batch", robot: str = "panda_like",
                 **overrides: Any):
        if backend != "mujoco_batch":
            raise ConfigError(f"the arm tasks run on backend 'mujoco_batch' only, not {backend!r}")
        check_batch_size(num_envs, nthread)
        config = make_arm_config(task, robot, config, **overrides)
        self.model = load_impedance_arm(config.spec, config.gains)
        config.validate(self.model.opt.timestep)
        check_home_in_joint_ranges(config.spec, self.model)
        self.config, self.num_envs = config, num_envs
        self.task = arm_task_named(config.task)
        self.batch = mujoco.batch.Batch(self.model, num_envs, nthread, persistent=True)
        self.controller = BatchedImpedanceController(self.batch, self.model, config.spec, config.gains)
        self._qpos, self._qvel = self.batch.bind("qpos"), self.batch.bind("qvel")
        self._ctrl = self.batch.bind("ctrl")
        self._gripper = self.model.actuator(config.spec.gripper_actuator).id
        self._gripper_range = self.model.actuator_ctrlrange[self._gripper]
        self._arm_qpos = np.array([self.model.jnt_qposadr[self.model.joint(n).id] for n in config.spec.joints])
        self._finger_qpos = self.model.jnt_qposadr[self.model.actuator_trnid[self._gripper, 0]]
        cube_joint = self.model.joint("cube")
        self._cube_qpos, self._cube_qvel = cube_joint.qposadr[0], cube_joint.dofadr[0]
        # per-simulation model fields that the randomization writes
        self._cube_geom, self._cube_body = self.model.geom("cube").id, self.model.body("cube").id
        self._grip_geoms = np.array([self._cube_geom, *(self.model.geom(g).id for g in ("left_pad", "right_pad"))])
        self._friction = self.batch.expand("geom_friction")
        self._geom_size, self._geom_rbound = self.batch.expand("geom_size"), self.batch.expand("geom_rbound")
        self._geom_aabb = self.batch.expand("geom_aabb")
        self._body_mass, self._body_inertia = self.batch.expand("body_mass"), self.batch.expand("body_inertia")
        self._nominal_friction = self.model.geom_friction[self._grip_geoms, 0].copy()
        self.nominal_params = {"friction_scale": 1.0, "cube_half_size": float(self.model.geom_size[self._cube_geom, 0]),
                               "cube_mass": float(self.model.body_mass[self._cube_body]), "stiffness_scale": 1.0,
                               "latency_steps": 0}
        self.params = {k: np.full(num_envs, v, dtype=np.int64 if k == "latency_steps" else np.float64)
                       for k, v in self.nominal_params.items()}
        rand = config.randomization
        self._max_latency = int(rand.latency_steps[1]) if rand.enabled else 0
        self._pending = np.zeros((self._max_latency + 1, num_envs, 4))  # actions, newest first
        self._workspace = np.array(config.workspace).T  # (2, 3)
        self.layout = arm_layout()
        self.policy_layout = self.layout  # what the policy's vector holds (with cameras, `cameras.state_fields`)
        state_space = gym.spaces.Box(-np.inf, np.inf, (self.layout.size,), np.float32)
        self.cameras = config.cameras if config.cameras.enabled else None
        self._render_pool: Any = None
        if self.cameras is None:
            self.single_observation_space: gym.Space = state_space
        else:
            self._start_cameras(self.cameras, state_space)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._rng = np.random.default_rng()
        self._appearance_rng = np.random.default_rng()
        self.steps = np.zeros(num_envs, dtype=np.int64)
        self.target = np.zeros((num_envs, 3))
        self.goal = np.zeros((num_envs, 3))
        self.cube_start = np.zeros((num_envs, 3))

    def _start_cameras(self, cameras: CameraConfig, state_space: gym.spaces.Box) -> None:
        """Check the camera names against the model, start the render workers, make the observation a Dict:
        "state" and one uint8 (height, width, 3) image per camera."""
        from sim.arm.render_pool import RenderPool

        try:
            self.policy_layout, self._state_index = self.layout.subset(cameras.state_fields)
        except ValueError as error:
            raise ConfigError(f"cameras.state_fields: {error}") from None
        self._appearance_layout = AppearanceLayout(len(cameras.names), self.model.ngeom)
        self._render_pool = RenderPool(self.model, self.num_envs, cameras, cameras.workers)
        image = gym.spaces.Box(0, 255, (cameras.height, cameras.width, 3), np.uint8)
        state_space = gym.spaces.Box(-np.inf, np.inf, (self.policy_layout.size,), np.float32)
        self.single_observation_space = gym.spaces.Dict({"state": state_space, **{name: image for name in cameras.names}})

    def close(self, **kwargs: Any) -> None:
        """Stop the render workers, if any."""
        if self._render_pool is not None:
            self._render_pool.close()
            self._render_pool = None
        super().close(**kwargs)

    # ----------------------------------------------------------------- episodes
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset every env (seeded: cube placement and reach points, and with cameras their appearance)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._appearance_rng = np.random.default_rng([seed, 1])  # its own stream: states do not depend on it
        self._reset(np.arange(self.num_envs))
        self._warnings_seen = self._instability_warnings()
        return self._with_images(self._observe()), {"params": {k: v.copy() for k, v in self.params.items()}}

    def _reset(self, ids: np.ndarray) -> None:
        config, n = self.config, len(ids)
        self._randomize(ids)
        self.batch.reset(ids=ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
        self._qpos[np.ix_(ids, self._arm_qpos)] = config.spec.home
        self._qpos[ids, self._finger_qpos] = self._gripper_range[1]
        cube = np.stack([self._rng.uniform(*config.cube_x, n), self._rng.uniform(*config.cube_y, n),
                         self.params["cube_half_size"][ids]], axis=1)
        self._qpos[ids, self._cube_qpos:self._cube_qpos + 3] = cube
        self._qpos[ids, self._cube_qpos + 3:self._cube_qpos + 7] = (1.0, 0.0, 0.0, 0.0)
        self._ctrl[ids, self._gripper] = self._gripper_range[1]
        self.batch.forward(ids=ids, stage=mujoco.mjtStage.mjSTAGE_VEL)
        tool, _ = self.controller.tool_pose()
        self.target[ids] = tool[ids]
        self.cube_start[ids] = cube
        self.goal[ids] = self.task.goals(self._rng, cube, config)
        self.steps[ids] = 0
        self._pending[:, ids] = (0.0, 0.0, 0.0, -1.0)  # before the first action: stay, gripper open
        if self._render_pool is not None:
            self._render_pool["appearance"][ids] = draw_appearance(
                self._appearance_rng, n, self._appearance_layout, self.cameras.randomization)

    def _randomize(self, ids: np.ndarray) -> None:
        """Draw the episode parameters of envs `ids` (nominal when randomization is off) and write them
        into their simulations and controllers."""
        rand, n = self.config.randomization, len(ids)
        for name, nominal in self.nominal_params.items():
            if not rand.enabled:
                value = np.full(n, nominal)
            elif name == "latency_steps":
                value = self._rng.integers(rand.latency_steps[0], rand.latency_steps[1] + 1, n)
            else:
                value = self._rng.uniform(*getattr(rand, name), n)
            self.params[name][ids] = value
        p = {k: v[ids] for k, v in self.params.items()}
        cube, body = self._cube_geom, self._cube_body
        self._friction[np.ix_(ids, self._grip_geoms, [0])] = (self._nominal_friction * p["friction_scale"][:, None])[:, :, None]
        half = p["cube_half_size"]
        self._geom_size[ids, cube] = half[:, None]
        self._geom_rbound[ids, cube] = np.sqrt(3.0) * half
        self._geom_aabb[ids, cube, 3:] = half[:, None]
        self._body_mass[ids, body] = p["cube_mass"]
        self._body_inertia[ids, body] = (2.0 / 3.0 * p["cube_mass"] * half**2)[:, None]  # solid cube
        if rand.enabled:  # the constants MuJoCo derives from masses and sizes (e.g. the contacts' inverse weights)
            self.batch.set_const(ids)
        self.controller.set_stiffness_scale(ids, p["stiffness_scale"])

    # ----------------------------------------------------------------- stepping
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Move every tool target by its action, run the controller for one control step, autoreset."""
        actions = np.asarray(actions, dtype=np.float64)
        if actions.shape != (self.num_envs, 4):
            raise ValueError(f"actions must have shape ({self.num_envs}, 4), got {actions.shape}")
        if not np.isfinite(actions).all():
            raise ValueError(f"actions must be finite, got NaN or Inf in env(s) "
                             f"{np.flatnonzero(~np.isfinite(actions).all(axis=1)).tolist()}")
        actions = np.clip(actions, -1.0, 1.0)
        if self._max_latency:  # each env acts on its action of latency_steps control steps ago
            self._pending = np.concatenate([actions[None], self._pending[:-1]])
            actions = self._pending[self.params["latency_steps"], np.arange(self.num_envs)]
        tool, _ = self.controller.tool_pose()  # SERL: displacement from where the tool is, not where it was sent
        self.target = np.clip(tool + self.config.action_scale * actions[:, :3], self._workspace[0], self._workspace[1])
        low, high = self._gripper_range
        self._ctrl[:, self._gripper] = high + (low - high) * 0.5 * (actions[:, 3] + 1.0)
        self.controller.step(self.target, self.config.substeps)
        self.steps += 1
        obs = self._observe()
        reward, success, terms = self._reward(obs)
        # MuJoCo resets a simulation whose state blew up (and only warns): such an episode ends here
        diverged = self._instability_warnings() > self._warnings_seen
        terminated = diverged | (success & self.config.end_on_success)
        truncated = (self.steps >= self.config.episode_steps) & ~terminated
        info: dict[str, Any] = {"is_success": success & ~diverged, "reward_terms": terms, "diverged": diverged}
        done = terminated | truncated
        observation = self._with_images(obs)
        if done.any():
            ids = np.flatnonzero(done)
            info["final_obs"] = copy_observation(observation)
            info["_final_obs"] = done.copy()
            self._reset(ids)
            set_observation_rows(observation, ids, self._with_images(self._observe(), ids))
            info["params"] = {k: v.copy() for k, v in self.params.items()}
        self._warnings_seen = self._instability_warnings()
        return observation, reward, terminated, truncated, info

    def _instability_warnings(self) -> np.ndarray:
        """Per simulation, how often MuJoCo found its positions, velocities or accelerations non-finite or huge."""
        return self.batch.warning[:, UNSTABLE_WARNINGS, 1].sum(axis=1)

    def description(self) -> dict[str, Any]:
        """What a deployment target needs to know about this env, JSON-ready: the kind of robot and task and the
        control rate (export adds the config and the kinematic chain)."""
        return {"robot": "arm", "task": self.config.task, "control_hz": self.config.control_hz}

    def expert_actions(self, obs: Any, noise: float = 0.0, rng: np.random.Generator | None = None) -> np.ndarray:
        """The task's scripted expert's actions (N, 4) for observations (N, obs) of this env, with Gaussian
        `noise` (std) on the tool displacement. With cameras the expert reads the simulator's full state (where
        the cube is), so `obs` must be the env's current observation."""
        state = self._observe() if isinstance(obs, Mapping) else obs
        actions = self.task.expert(np.asarray(state), self.layout, self.config.action_scale, self.params["cube_half_size"])
        if noise > 0:
            actions[:, :3] += (rng or np.random.default_rng()).normal(0.0, noise, (len(actions), 3))
        return np.clip(actions, -1.0, 1.0)

    def render_frame(self, index: int = 0, width: int = 480, height: int = 360) -> np.ndarray:
        """An RGB image (height, width, 3) of simulation `index` from a fixed camera (MuJoCo's offscreen
        renderer: set MUJOCO_GL=egl or osmesa on a machine without a display)."""
        from sim.rendering import offscreen_renderer

        if getattr(self, "_renderer", None) is None or self._renderer.width != width or self._renderer.height != height:
            self._render_model = copy.copy(self.model)
            self._render_data = mujoco.MjData(self._render_model)
            self._renderer = offscreen_renderer(self._render_model, height, width)
            self._camera = mujoco.MjvCamera()
            extent = self.model.stat.extent  # framed on the robot's size
            self._camera.lookat[:] = (*self.model.stat.center[:2], 0.3 * extent)
            self._camera.distance = 1.4 * extent
            self._camera.azimuth, self._camera.elevation = 150.0, -20.0
        model, data = self._render_model, self._render_data
        cube = self._cube_geom
        model.geom_size[cube] = self._geom_size[index, cube]  # this episode's randomized cube
        data.qpos[:], data.qvel[:] = self._qpos[index], self._qvel[index]
        mujoco.mj_forward(model, data)
        self._renderer.update_scene(data, self._camera)
        return self._renderer.render()

    def observation(self) -> Any:
        """Every simulation's observation of its current state, as reset and step return it."""
        return self._with_images(self._observe())

    def _with_images(self, state: np.ndarray, ids: np.ndarray | None = None) -> Any:
        """The observation: `state` alone, or with cameras a dict of it and the cameras' images of
        simulations `ids` (all if None; the other rows' images are left as they were)."""
        if self._render_pool is None:
            return state
        pool = self._render_pool
        rows = slice(None) if ids is None else ids
        pool["qpos"][rows] = self._qpos[rows]
        pool["geom_size"][rows] = self._geom_size[rows]
        images = pool.render(ids)
        return {"state": state[:, self._state_index],
                **{name: images[:, k].copy() for k, name in enumerate(self.cameras.names)}}

    def _observe(self) -> np.ndarray:
        tool, _ = self.controller.tool_pose()
        cube = self._qpos[:, self._cube_qpos:self._cube_qpos + 3]
        velocity = self.controller.tool_velocity()
        opening = self._qpos[:, self._finger_qpos:self._finger_qpos + 1]
        return np.concatenate([tool, velocity, opening, cube, cube - tool, self.goal - tool], axis=1).astype(np.float32)

    def _reward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        terms, success = self.task.terms(obs, self.layout, self.cube_start, self.config)
        return self.task.reward(terms, success, self.config.dense), success, terms


class ArmEnv(gym.Env):
    """One arm on a task: `ArmVectorEnv` with a single simulation, under the plain gymnasium Env API."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, task: str = "pick_cube", config: ArmTaskConfig | dict | None = None,
                 render_mode: str | None = None, robot: str = "panda_like", **overrides: Any):
        self.vector = ArmVectorEnv(task, num_envs=1, nthread=1, config=config, robot=robot, **overrides)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(round(self.vector.config.control_hz))}
        self.observation_space = self.vector.single_observation_space
        self.action_space = self.vector.single_action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Start an episode (seeded cube placement / reach point, and with cameras their appearance)."""
        super().reset(seed=seed)
        obs, info = self.vector.reset(seed=seed)
        return observation_row(obs, 0), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """One control step; at the time limit returns the episode's last observation (no autoreset)."""
        obs, reward, terminated, truncated, info = self.vector.step(np.asarray(action, dtype=np.float64)[None])
        last = observation_row(info["final_obs"] if terminated[0] or truncated[0] else obs, 0)
        return last, float(reward[0]), bool(terminated[0]), bool(truncated[0]), {
            "is_success": bool(info["is_success"][0]),
            "reward_terms": {k: float(v[0]) for k, v in info["reward_terms"].items()}}

    def render(self) -> np.ndarray | None:
        """An RGB frame of the scene, if render_mode is "rgb_array"."""
        return self.vector.render_frame(0) if self.render_mode == "rgb_array" else None

    def close(self) -> None:
        """Stop the render workers, if any."""
        self.vector.close()
