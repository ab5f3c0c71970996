"""The robo-rl pick-cube scene as a position-controlled arm, as a robot's joint position interface presents it.

One simulation of `ArmVectorEnv` (its MJCF, seeded cube placement and home pose; randomization as the
config says) with the task's Cartesian impedance, gravity compensation and null-space damping switched
off, whose arm joints are driven by a joint-space PD controller on the arm's torque actuators,
tau = Kp (q_cmd - q) - Kd qdot + bias(q, qdot), clamped to the joints' torque limits: this stands in for a robot's joint position interface (ros2_control's `position`
command interface). The gripper's position actuator takes the commanded opening per finger. Commands
are held until replaced; before the first one the arm holds its home pose and the gripper is open.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np

from sim.arm.env import ArmVectorEnv
from sim.arm.robot import HERE as ARM_ASSETS


@dataclasses.dataclass(frozen=True)
class JointGains:
    """PD gains per arm joint, in the spec's joint order: stiffness [N m/rad] and damping [N m s/rad]."""

    kp: tuple[float, ...]
    kd: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class ArmState:
    """What the robot's joint_state_broadcaster and a cube tracker would report."""

    time: float  # [s] of simulated time since the reset
    names: tuple[str, ...]  # arm joints (spec order), then both finger joints
    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray
    cube_position: np.ndarray
    cube_quaternion: np.ndarray  # (w, x, y, z)
    lift: float  # [m] the cube's height above its start
    success: bool  # lifted by the task's lift height


def local_env_config(env_config: dict) -> dict:
    """`env_config` with its recorded robot MJCF found in this checkout's sim/arm if the recorded path
    (absolute, from the training machine) does not exist here."""
    config = dict(env_config)
    spec = config.get("spec")
    if isinstance(spec, dict) and not Path(spec["mjcf"]).is_file():
        config["spec"] = {**spec, "mjcf": str(ARM_ASSETS / Path(spec["mjcf"]).name)}
    return config


class SimulatedArm:
    """The pick-cube scene, one physics step at a time, with joint position commands."""

    def __init__(self, env_config: dict, gains: JointGains, seed: int):
        self.env = ArmVectorEnv(num_envs=1, nthread=1, config=local_env_config(env_config))
        self.config, model = self.env.config, self.env.model
        spec = self.config.spec
        if len(gains.kp) != len(spec.joints) or len(gains.kd) != len(spec.joints):
            raise ValueError(f"joint gains need one value per arm joint ({len(spec.joints)})")
        self.kp, self.kd = np.asarray(gains.kp, dtype=np.float64), np.asarray(gains.kd, dtype=np.float64)
        self.joints = tuple(spec.joints)
        fingers = [model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] == mujoco.mjtJoint.mjJNT_SLIDE]
        self.names = (*self.joints, *fingers)
        self._qpos_adr = np.array([model.jnt_qposadr[model.joint(n).id] for n in self.names])
        self._dof_adr = np.array([model.jnt_dofadr[model.joint(n).id] for n in self.names])
        self._arm_dofs = self._dof_adr[:len(self.joints)]
        self._actuators = np.array([model.actuator(n).id for n in spec.actuators])
        self.lower = np.array([model.jnt_range[model.joint(n).id][0] for n in self.joints])
        self.upper = np.array([model.jnt_range[model.joint(n).id][1] for n in self.joints])
        self._gripper = model.actuator(spec.gripper_actuator).id
        self.gripper_range = tuple(float(x) for x in model.actuator_ctrlrange[self._gripper])
        self._gripper_qpos = int(model.jnt_qposadr[model.actuator_trnid[self._gripper, 0]])
        self.torque = np.ones(len(self.joints) + 1, dtype=bool)  # arm joints, then the gripper: all on
        self._qpos, self._qvel, self._ctrl = self.env.batch.bind("qpos"), self.env.batch.bind("qvel"), self.env.batch.bind("ctrl")
        self._bias = self.env.batch.bind("qfrc_bias")
        # the robot as its MJCF describes it: without the task controller's gravity compensation and joint damping
        self.env.batch.expand("body_gravcomp")[0] = 0.0
        self.env.batch.expand("dof_damping")[0, self._arm_dofs] -= self.config.gains.null_damping
        self._actuator_force = self.env.batch.bind("qfrc_actuator")
        self.dt = float(model.opt.timestep)
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        """The seeded episode start: arm at home, gripper open, cube placed as the task places it."""
        self.env.reset(seed=self.seed)
        self.env.controller.set_stiffness_scale(np.arange(1), np.zeros(1))  # no pull towards a tool target
        self.steps = 0
        self.arm_command = np.array(self.config.spec.home, dtype=np.float64)
        self.gripper_command = self.gripper_range[1]
        self.succeeded_at: float | None = None

    @property
    def time(self) -> float:
        """Seconds of simulated time since the reset."""
        return self.steps * self.dt

    def command_arm(self, positions: np.ndarray) -> None:
        """New joint position targets (spec order), clipped to the joint limits; held until replaced."""
        self.arm_command = np.clip(np.asarray(positions, dtype=np.float64), self.lower, self.upper)

    def command_gripper(self, opening: float) -> None:
        """New finger opening [m] (per finger), clipped to the actuator's range; held until replaced."""
        self.gripper_command = float(np.clip(opening, *self.gripper_range))

    def set_torque(self, enabled: Sequence[bool]) -> None:
        """Switch the drive of each arm joint, then of the gripper, on or off (as a servo's torque enable; all
        on after construction, and a reset keeps the setting): a joint whose drive is off gets no torque at
        all, neither the PD's nor the gravity compensation, and hangs limp on its own friction and damping."""
        flags = np.asarray(enabled, dtype=bool)
        if flags.shape != self.torque.shape:
            raise ValueError(f"torque needs one flag per arm joint and one for the gripper ({len(self.torque)})")
        self.torque = flags.copy()

    def step(self) -> None:
        """One physics step (the MJCF's timestep) under the joint PD controller."""
        q, qdot = self._qpos[0, self._qpos_adr[:len(self.joints)]], self._qvel[0, self._arm_dofs]
        tau = self.kp * (self.arm_command - q) - self.kd * qdot + self._bias[0, self._arm_dofs]
        self._ctrl[0, self._actuators] = np.where(self.torque[:-1], tau, 0.0)  # MuJoCo clamps it to the torque limits
        # a limp gripper: its position actuator aimed at where the finger is pushes with no force
        self._ctrl[0, self._gripper] = self.gripper_command if self.torque[-1] else self._qpos[0, self._gripper_qpos]
        self.env.batch.step(nstep=1, stage=mujoco.mjtStage.mjSTAGE_VEL)
        self.steps += 1
        if self.succeeded_at is None and self._lift() >= self.config.lift_height:
            self.succeeded_at = self.time

    def _lift(self) -> float:
        cube = self.env._cube_qpos
        return float(self._qpos[0, cube + 2] - self.env.cube_start[0, 2])

    def state(self) -> ArmState:
        """The current joint state, cube pose and task success."""
        cube = self.env._cube_qpos
        lift = self._lift()
        return ArmState(self.time, self.names, self._qpos[0, self._qpos_adr].copy(), self._qvel[0, self._dof_adr].copy(),
                        self._actuator_force[0, self._dof_adr].copy(), self._qpos[0, cube:cube + 3].copy(),
                        self._qpos[0, cube + 3:cube + 7].copy(), lift, lift >= self.config.lift_height)

    @property
    def cameras(self) -> tuple[str, ...]:
        """The cameras the scene renders (its config's `cameras.names` when they are on, else none)."""
        return tuple(self.config.cameras.names) if self.config.cameras.enabled else ()

    def images(self) -> dict[str, np.ndarray]:
        """What each camera sees now: uint8 RGB (height, width, 3) by camera, rendered exactly as the env renders
        its observation's images."""
        if not self.cameras:
            return {}
        observation = self.env.observation()
        return {name: observation[name][0] for name in self.cameras}

    def set_pose(self, positions: Sequence[float], cube_position: Sequence[float],
                 cube_quaternion: Sequence[float]) -> None:
        """Put the scene in a pose: joint positions in `names` order, the cube's position and orientation (w, x,
        y, z), velocities zero; e.g. to render what the cameras see in a pose a robot reported."""
        positions = np.asarray(positions, dtype=np.float64)
        if positions.shape != (len(self.names),):
            raise ValueError(f"positions needs one value per joint of {list(self.names)}, got {positions.shape}")
        cube = self.env._cube_qpos
        self._qpos[0, self._qpos_adr] = positions
        self._qpos[0, cube:cube + 3] = cube_position
        self._qpos[0, cube + 3:cube + 7] = cube_quaternion
        self._qvel[0] = 0.0
        self.env.batch.forward(ids=np.arange(1), stage=mujoco.mjtStage.mjSTAGE_VEL)

    def close(self) -> None:
        """Stop the scene's render workers, if any."""
        self.env.close()
