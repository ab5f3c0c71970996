"""Physics backends for the quadrotor: one MuJoCo MjData, a MuJoCo batch on C threads, and torch tensors.

All three take per-substep rotor thrusts (N, K, 4) [N] for one control step and expose the rigid-body
state as arrays: position (N, 3) world, quaternion (N, 4) wxyz body->world, linear velocity (N, 3)
world, angular velocity (N, 3) body (MuJoCo's free-joint conventions). The torch backend integrates the
same equations as MuJoCo's semi-implicit Euler for a free body whose inertial frame is its body frame,
so the paths agree to rounding (see tests/sim/test_quadrotor_paths.py); it has no ground contact (the
tasks terminate below `min_altitude`, before contact).
"""

from __future__ import annotations

import copy
from typing import Any

import mujoco
import mujoco.batch
import numpy as np
import torch

from sim.quadrotor.model import BODY_NAME, MOTOR_NAMES, QuadrotorParams
from sim.quadrotor.randomization import EpisodeParams
from sim.quadrotor.rotations import quat_to_matrix


class MujocoSinglePhysics:
    """One MuJoCo MjData (N = 1), stepped substep by substep from Python."""

    xp = np

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.data = mujoco.MjData(model)
        self.num_envs = 1
        self._body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, BODY_NAME)
        self._motors = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in MOTOR_NAMES]

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters (one row) into the model and the applied wrench."""
        self.model.body_mass[self._body] = params.mass[0]
        self.model.body_inertia[self._body] = params.inertia[0]
        self.model.actuator_gear[self._motors, 5] = params.yaw_torque_coefficients[0]
        self.data.xfrc_applied[self._body] = np.concatenate([params.disturbance_force[0], params.disturbance_torque[0]])

    def set_state(self, ids: np.ndarray, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray, angvel: np.ndarray) -> None:
        """Set the rigid-body state (rows of length 1) and recompute derived quantities."""
        self.data.qpos[:] = np.concatenate([pos[0], quat[0]])
        self.data.qvel[:] = np.concatenate([vel[0], angvel[0]])
        self.data.time = 0.0
        mujoco.mj_forward(self.model, self.data)

    def advance(self, thrust: np.ndarray) -> None:
        """Run K physics substeps with thrust[0, k] as actuator controls."""
        for k in range(thrust.shape[1]):
            self.data.ctrl[:] = thrust[0, k]
            mujoco.mj_step(self.model, self.data)

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, quat, vel, angvel), each with a leading batch dimension of 1."""
        qpos, qvel = self.data.qpos[None], self.data.qvel[None]
        return qpos[:, :3], qpos[:, 3:7], qvel[:, :3], qvel[:, 3:6]


class MujocoBatchPhysics:
    """N MuJoCo simulations in one `mujoco.batch.Batch`: one C call per control step on `nthread` threads.

    Sensors are disabled (the tasks observe the state); enable them with `sensors=True`.
    """

    xp = np

    def __init__(self, model: mujoco.MjModel, num_envs: int, nthread: int = 0, sensors: bool = False):
        if not sensors:
            model = copy.copy(model)  # a deep copy: the caller's model keeps its flags
            model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_SENSOR
        self.model = model
        self.num_envs = num_envs
        self.batch = mujoco.batch.Batch(model, num_envs, nthread)
        self._body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, BODY_NAME)
        self._motors = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in MOTOR_NAMES])
        self._qpos = self.batch.bind("qpos")
        self._qvel = self.batch.bind("qvel")
        self._xfrc = self.batch.bind("xfrc_applied")
        self._mass = self.batch.expand("body_mass")
        self._inertia = self.batch.expand("body_inertia")
        self._gear = self.batch.expand("actuator_gear")
        self._ctrl_spec = int(mujoco.mjtState.mjSTATE_CTRL)

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters of simulations `ids` (per-simulation model fields and wrench)."""
        self._mass[ids, self._body] = params.mass
        self._inertia[ids, self._body] = params.inertia
        self._gear[np.ix_(ids, self._motors, [5])] = params.yaw_torque_coefficients[:, :, None]
        self._xfrc[ids, self._body, :3] = params.disturbance_force
        self._xfrc[ids, self._body, 3:] = params.disturbance_torque

    def set_state(self, ids: np.ndarray, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray, angvel: np.ndarray) -> None:
        """Set the rigid-body state of simulations `ids`."""
        self._qpos[ids, :3] = pos
        self._qpos[ids, 3:7] = quat
        self._qvel[ids, :3] = vel
        self._qvel[ids, 3:6] = angvel

    def advance(self, thrust: np.ndarray) -> None:
        """Run K substeps of every simulation in C, thrust[:, k] applied as controls before substep k."""
        self.batch.rollout(thrust.shape[1], control=thrust, control_spec=self._ctrl_spec, record=())

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, quat, vel, angvel): live views of the batch's state."""
        return self._qpos[:, :3], self._qpos[:, 3:7], self._qvel[:, :3], self._qvel[:, 3:6]



class TorchPhysics:
    """N quadrotors as torch tensors on any device: MuJoCo's Euler free-body step, vectorized."""

    xp = torch

    def __init__(self, params: QuadrotorParams, num_envs: int, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.dtype = dtype
        self.timestep = params.timestep
        kw = dict(device=self.device, dtype=dtype)
        rotors = torch.as_tensor(params.rotor_positions, **kw)
        self._rotor_x, self._rotor_y = rotors[:, 0], rotors[:, 1]
        self._gravity = torch.tensor([0.0, 0.0, -params.gravity], **kw)
        self.pos = torch.zeros(num_envs, 3, **kw)
        self.quat = torch.zeros(num_envs, 4, **kw)
        self.quat[:, 0] = 1.0
        self.vel = torch.zeros(num_envs, 3, **kw)
        self.angvel = torch.zeros(num_envs, 3, **kw)
        self.mass = torch.full((num_envs, 1), params.mass, **kw)
        self.inertia = torch.as_tensor(params.inertia, **kw).repeat(num_envs, 1)
        self.yaw_coefficients = torch.as_tensor(params.yaw_torque_coefficients, **kw).repeat(num_envs, 1)
        self.force = torch.zeros(num_envs, 3, **kw)
        self.torque = torch.zeros(num_envs, 3, **kw)

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(value), device=self.device, dtype=self.dtype)

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters for envs `ids`."""
        index = torch.as_tensor(ids, device=self.device)
        self.mass[index] = self._tensor(params.mass)[:, None]
        self.inertia[index] = self._tensor(params.inertia)
        self.yaw_coefficients[index] = self._tensor(params.yaw_torque_coefficients)
        self.force[index] = self._tensor(params.disturbance_force)
        self.torque[index] = self._tensor(params.disturbance_torque)

    def set_state(self, ids: np.ndarray, pos: Any, quat: Any, vel: Any, angvel: Any) -> None:
        """Set the rigid-body state of envs `ids`."""
        index = torch.as_tensor(ids, device=self.device)
        self.pos[index] = self._tensor(pos)
        self.quat[index] = self._tensor(quat)
        self.vel[index] = self._tensor(vel)
        self.angvel[index] = self._tensor(angvel)

    def advance(self, thrust: torch.Tensor) -> None:
        """Run K substeps of semi-implicit Euler with per-substep rotor thrusts (N, K, 4)."""
        state = (self.pos, self.quat, self.vel, self.angvel)
        for k in range(thrust.shape[1]):
            state = free_body_substep(
                *state, thrust[:, k], self.mass, self.inertia, self.yaw_coefficients, self._rotor_x,
                self._rotor_y, self.force, self.torque, self._gravity, self.timestep,
            )
        self.pos, self.quat, self.vel, self.angvel = state

    def state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(pos, quat, vel, angvel) tensors."""
        return self.pos, self.quat, self.vel, self.angvel


def free_body_substep(
    pos: torch.Tensor, quat: torch.Tensor, vel: torch.Tensor, angvel: torch.Tensor, thrust: torch.Tensor,
    mass: torch.Tensor, inertia: torch.Tensor, yaw_coefficients: torch.Tensor, rotor_x: torch.Tensor,
    rotor_y: torch.Tensor, force: torch.Tensor, torque: torch.Tensor, gravity: torch.Tensor, h: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One MuJoCo-Euler step of a rigid quadrotor: accelerations at the current state, then
    v += h a, omega += h alpha, p += h v_new, q = normalize(q) * exp(h omega_new / 2)."""
    rotation = quat_to_matrix(torch, quat)
    total_thrust = thrust.sum(-1, keepdim=True)
    body_torque = torch.stack(
        [thrust @ rotor_y, -(thrust @ rotor_x), (thrust * yaw_coefficients).sum(-1)], -1
    ) + torch.einsum("nji,nj->ni", rotation, torque)
    acceleration = rotation[:, :, 2] * total_thrust / mass + force / mass + gravity
    momentum = inertia * angvel
    angular_acceleration = (body_torque - torch.linalg.cross(angvel, momentum)) / inertia
    vel = vel + h * acceleration
    angvel = angvel + h * angular_acceleration
    pos = pos + h * vel
    rate = torch.sqrt((angvel * angvel).sum(-1, keepdim=True))
    half_angle = 0.5 * h * rate
    axis_scale = torch.where(rate > 0, torch.sin(half_angle) / rate.clamp_min(1e-30), torch.full_like(rate, 0.5 * h))
    rotation_quat = torch.cat([torch.cos(half_angle), axis_scale * angvel], -1)
    quat = quat / torch.sqrt((quat * quat).sum(-1, keepdim=True))
    quat = quat_multiply(quat, rotation_quat)
    return pos, quat, vel, angvel


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b of (N, 4) wxyz quaternions."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], -1)  # fmt: skip
