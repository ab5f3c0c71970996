"""Physics backends for the quadrotor: one MuJoCo MjData, a MuJoCo batch on C threads, and torch tensors.

All three take per-substep rotor thrusts (K, 4, N) [N] for one control step and expose the rigid-body
state as feature-major arrays: position (3, N) world, quaternion (4, N) wxyz body->world, linear
velocity (3, N) world, angular velocity (3, N) body (MuJoCo's free-joint conventions). Feature-major
(component axis first) lets every per-vehicle operation run as a contiguous loop over vehicles. The torch backend integrates the
same equations as MuJoCo's semi-implicit Euler for a free body whose inertial frame is its body frame,
so the paths agree to rounding (see tests/sim/test_quadrotor_paths.py); instead of contacts it has at most a
floor (`floor_contact`, for tasks that stand on the ground; the flying tasks terminate below `min_altitude`,
before contact).

`diverged` (N,) marks the simulations that became non-finite or huge during the last `advance`: MuJoCo resets
such a simulation to its initial state (hovering at the origin) and goes on, so its state alone does not show it.
The torch backend keeps a non-finite state as it is, and its `diverged` is None.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, NamedTuple

import mujoco
import mujoco.batch
import numpy as np
import torch

from sim.mujoco_warnings import UNSTABLE_WARNINGS
from sim.quadrotor.model import BODY_NAME, MOTOR_NAMES, ROTOR_SITES, QuadrotorParams
from sim.quadrotor.randomization import EpisodeParams


class MujocoSinglePhysics:
    """One MuJoCo MjData (N = 1), stepped substep by substep from Python."""

    xp = np

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.data = mujoco.MjData(model)
        self.num_envs = 1
        self._body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, BODY_NAME)
        self._motors = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in MOTOR_NAMES]
        self._rotors = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in ROTOR_SITES]
        self._rotor_positions = model.site_pos[self._rotors].copy()  # the nominal vehicle's
        self.diverged = np.zeros(1, dtype=bool)

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters (one row) into the model and the applied wrench."""
        self.model.site_pos[self._rotors] = _scaled_arms(self._rotor_positions, params.arm_scale[:1])[0]
        self.model.body_mass[self._body] = params.mass[0]
        self.model.body_inertia[self._body] = params.inertia[0]
        self.model.actuator_gear[self._motors, 5] = params.yaw_torque_coefficients[0]
        self.data.xfrc_applied[self._body] = np.concatenate([params.disturbance_force[0], params.disturbance_torque[0]])
        # quantities derived from mass, inertia and sites (e.g. the subtree mass that gravity acts on) follow
        mujoco.mj_setConst(self.model, self.data)

    def set_state(self, ids: np.ndarray, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray, angvel: np.ndarray) -> None:
        """Set the rigid-body state (rows of length 1) and recompute derived quantities."""
        self.data.qpos[:] = np.concatenate([pos[0], quat[0]])
        self.data.qvel[:] = np.concatenate([vel[0], angvel[0]])
        self.data.time = 0.0
        mujoco.mj_forward(self.model, self.data)

    def advance(self, thrust: np.ndarray) -> None:
        """Run K physics substeps with thrust[k, :, 0] as actuator controls."""
        before = self._unstable_count()
        for k in range(thrust.shape[0]):
            self.data.ctrl[:] = thrust[k, :, 0]
            mujoco.mj_step(self.model, self.data)
        self.diverged = np.array([self._unstable_count() > before])

    def _unstable_count(self) -> int:
        return sum(self.data.warning[w].number for w in UNSTABLE_WARNINGS)

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, quat, vel, angvel) as (k, 1) views of the MjData."""
        qpos, qvel = self.data.qpos[:, None], self.data.qvel[:, None]
        return qpos[:3], qpos[3:7], qvel[:3], qvel[3:6]


class MujocoBatchPhysics:
    """N MuJoCo simulations in one `mujoco.batch.Batch`: one C call per control step on `nthread` threads.

    Sensors are disabled (the tasks observe the state); enable them with `sensors=True`. Collision
    detection is skipped with `contacts=False`, for tasks that end before the vehicle can touch anything.
    Pipeline stages that cannot act on the model are skipped too (`inactive_stages`): same numbers, less work.
    """

    xp = np

    def __init__(self, model: mujoco.MjModel, num_envs: int, nthread: int = 0, sensors: bool = False,
                 contacts: bool = True):
        model = copy.copy(model)  # a deep copy: the caller's model keeps its flags
        if not sensors:
            model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_SENSOR
        if not contacts:
            model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        model.opt.disableflags |= inactive_stages(model)
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
        self._rotors = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in ROTOR_SITES])
        self._rotor_positions = model.site_pos[self._rotors].copy()
        self._site_pos = self.batch.expand("site_pos")
        self._ctrl_spec = int(mujoco.mjtState.mjSTATE_CTRL)
        self.diverged = np.zeros(num_envs, dtype=bool)

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters of simulations `ids` (per-simulation model fields and wrench)."""
        self._site_pos[np.ix_(ids, self._rotors)] = _scaled_arms(self._rotor_positions, params.arm_scale)
        self._mass[ids, self._body] = params.mass
        self._inertia[ids, self._body] = params.inertia
        self._gear[np.ix_(ids, self._motors, [5])] = params.yaw_torque_coefficients[:, :, None]
        self._xfrc[ids, self._body, :3] = params.disturbance_force
        self._xfrc[ids, self._body, 3:] = params.disturbance_torque
        # quantities derived from mass, inertia and sites (e.g. the subtree mass that gravity acts on) follow
        self.batch.set_const(ids)

    def set_state(self, ids: np.ndarray, pos: np.ndarray, quat: np.ndarray, vel: np.ndarray, angvel: np.ndarray) -> None:
        """Set the rigid-body state of simulations `ids`."""
        self._qpos[ids, :3] = pos
        self._qpos[ids, 3:7] = quat
        self._qvel[ids, :3] = vel
        self._qvel[ids, 3:6] = angvel

    def advance(self, thrust: np.ndarray) -> None:
        """Run K substeps of every simulation in C, thrust[k] applied as controls before substep k."""
        control = np.ascontiguousarray(thrust.transpose(2, 0, 1))  # the batch wants (N, K, nu)
        before = self._unstable_counts()
        self.batch.rollout(thrust.shape[0], control=control, control_spec=self._ctrl_spec, record=())
        self.diverged = self._unstable_counts() > before

    def _unstable_counts(self) -> np.ndarray:
        return self.batch.warning[:, UNSTABLE_WARNINGS, 1].sum(axis=1)

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos, quat, vel, angvel): (k, N) feature-major copies of the batch's state (read them again
        after stepping)."""
        # Copied once rather than viewed: the batch stores (N, 7) rows, and every task operation on the
        # transposed views would stride through memory (a copy costs less than the strides, ~25% of the
        # task's per-step work).
        qpos, qvel = np.ascontiguousarray(self._qpos.T), np.ascontiguousarray(self._qvel.T)
        return qpos[:3], qpos[3:7], qvel[:3], qvel[3:6]


def _scaled_arms(rotor_positions: np.ndarray, arm_scale: np.ndarray) -> np.ndarray:
    """Rotor positions (n, 4, 3) of n vehicles whose rotors lie `arm_scale` (n,) times as far out in the
    body's xy plane as `rotor_positions` (4, 3)."""
    scale = np.stack([arm_scale, arm_scale, np.ones_like(arm_scale)], -1)  # (n, 3)
    return rotor_positions[None] * scale[:, None]


def inactive_stages(model: mujoco.MjModel) -> int:
    """MuJoCo disable bits of the pipeline stages that contribute nothing for `model` as configured: the
    constraint solver when contacts are off and nothing else makes constraints (equality, joint limits,
    friction loss, tendons), and passive forces when there are no springs, dampers, fluid or gravity
    compensation. Skipping them leaves every number unchanged and saves ~10% of a quadrotor step."""
    bits = mujoco.mjtDisableBit
    flags = 0
    contacts_off = bool(model.opt.disableflags & bits.mjDSBL_CONTACT)
    if (contacts_off and model.neq == 0 and model.ntendon == 0 and not model.jnt_limited.any()
            and not model.dof_frictionloss.any()):
        flags |= bits.mjDSBL_CONSTRAINT
    if (model.ntendon == 0 and model.ngravcomp == 0 and not model.jnt_stiffness.any() and not model.dof_damping.any()
            and model.opt.density == 0 and model.opt.viscosity == 0):
        flags |= bits.mjDSBL_SPRING | bits.mjDSBL_DAMPER
    return int(flags)


class TorchPhysics:
    """N quadrotors as torch tensors on any device: MuJoCo's Euler free-body step, vectorized.

    State and parameters are stored feature-major ((13, N) and (k, N) buffers; `state()` returns views
    of them) and the step is written on per-vehicle scalars, so that torch.compile fuses a whole
    control step into one vectorized loop over vehicles.
    """

    xp = torch
    diverged = None  # a non-finite state stays in the state, where the batch finds it

    def __init__(self, params: QuadrotorParams, num_envs: int, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, allocate_rows: Callable[..., torch.Tensor] | None = None,
                 floor_height: float | None = None):
        """`allocate_rows` lays out the state and parameter arrays (shape -> an uninitialized tensor, e.g. in
        the native step's kernel layout); None: contiguous tensors. `floor_height`: see `floor_contact`."""
        self.num_envs = num_envs
        self.floor_height = floor_height
        self.device = torch.device(device)
        self.dtype = dtype
        self.timestep = params.timestep
        self.gravity = params.gravity
        self.rotor_x = tuple(float(x) for x in params.rotor_positions[:, 0])
        self.rotor_y = tuple(float(y) for y in params.rotor_positions[:, 1])
        kw = dict(device=self.device, dtype=dtype)

        def rows(value: torch.Tensor) -> torch.Tensor:
            return value if allocate_rows is None else allocate_rows(*value.shape).copy_(value)

        buffer = torch.zeros(13, num_envs, **kw)  # position 3, quaternion 4, velocity 3, angular velocity 3
        buffer[3] = 1.0
        self.buffer = rows(buffer)
        self.mass = rows(torch.full((num_envs,), params.mass, **kw))
        self.inertia = rows(torch.as_tensor(params.inertia, **kw)[:, None].repeat(1, num_envs))
        self.yaw_coefficients = rows(torch.as_tensor(params.yaw_torque_coefficients, **kw)[:, None].repeat(1, num_envs))
        self.force = rows(torch.zeros(3, num_envs, **kw))
        self.torque = rows(torch.zeros(3, num_envs, **kw))
        self.arm_scale = rows(torch.ones(num_envs, **kw))

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(value), device=self.device, dtype=self.dtype)

    def set_params(self, ids: np.ndarray, params: EpisodeParams) -> None:
        """Write episode parameters for envs `ids`."""
        index = torch.as_tensor(ids, device=self.device)
        self.mass[index] = self._tensor(params.mass)
        self.inertia[:, index] = self._tensor(params.inertia).T
        self.yaw_coefficients[:, index] = self._tensor(params.yaw_torque_coefficients).T
        self.force[:, index] = self._tensor(params.disturbance_force).T
        self.torque[:, index] = self._tensor(params.disturbance_torque).T
        self.arm_scale[index] = self._tensor(params.arm_scale)

    def set_state(self, ids: np.ndarray, pos: Any, quat: Any, vel: Any, angvel: Any) -> None:
        """Set the rigid-body state of envs `ids`."""
        index = torch.as_tensor(ids, device=self.device)
        self.buffer[:, index] = self._tensor(np.concatenate([pos, quat, vel, angvel], 1)).T

    def advance(self, thrust: torch.Tensor) -> None:
        """Run K substeps of semi-implicit Euler with per-substep rotor thrusts (K, 4, N)."""
        state = tuple(self.buffer.unbind(0))
        constants = SubstepConstants.of(self.mass, tuple(self.inertia.unbind(0)), tuple(self.force.unbind(0)),
                                        self.gravity, self.timestep)
        for k in range(thrust.shape[0]):
            state = free_body_substep(
                state, tuple(thrust[k].unbind(0)), constants, tuple(self.yaw_coefficients.unbind(0)),
                self.rotor_x, self.rotor_y, self.arm_scale, tuple(self.torque.unbind(0)), self.timestep,
            )
            if self.floor_height is not None:
                state = floor_contact(state, self.floor_height)
        self.buffer = torch.stack(state, 0)

    def state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(pos, quat, vel, angvel) as (k, N) views of the state buffer."""
        buffer = self.buffer
        return buffer[0:3], buffer[3:7], buffer[7:10], buffer[10:13]


Scalars = tuple[torch.Tensor, ...]


def floor_contact(state: Scalars, floor_height: float) -> Scalars:
    """The state after a substep where a vehicle's centre of mass went below `floor_height` (the height at which
    it stands on the floor): held at that height, not moving down, not sliding and not turning (the native step
    does the same at the end of each substep). The vehicle leaves the floor when its thrust lifts it."""
    px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz = state
    below = pz < floor_height
    zero = torch.zeros_like(pz)

    def stopped(value: torch.Tensor) -> torch.Tensor:
        return torch.where(below, zero, value)

    return (px, py, torch.where(below, zero + floor_height, pz), qw, qx, qy, qz, stopped(vx), stopped(vy),
            torch.where(below & (vz < 0), zero, vz), stopped(wx), stopped(wy), stopped(wz))


class SubstepConstants(NamedTuple):
    """Per-vehicle factors of `free_body_substep` that stay fixed over a control step, (N,) each."""

    h_over_mass: torch.Tensor  # h / m: velocity change per newton of rotor thrust
    velocity_change: Scalars  # h (f / m - g e_z): the velocity change from the disturbance force and gravity
    h_over_inertia: Scalars  # h / I, per body axis
    gyroscopic: Scalars  # h (I_y - I_z) / I_x, h (I_z - I_x) / I_y, h (I_x - I_y) / I_z

    @classmethod
    def of(cls, mass: torch.Tensor, inertia: Scalars, force: Scalars, gravity: float, h: float) -> SubstepConstants:
        """The factors for masses, principal inertias and world disturbance forces (N,) at timestep h."""
        ix, iy, iz = inertia
        h_over_mass = h / mass
        h_over_inertia = (h / ix, h / iy, h / iz)
        return cls(
            h_over_mass,
            (force[0] * h_over_mass, force[1] * h_over_mass, force[2] * h_over_mass - h * gravity),
            h_over_inertia,
            ((iy - iz) * h_over_inertia[0], (iz - ix) * h_over_inertia[1], (ix - iy) * h_over_inertia[2]),
        )


def free_body_substep(
    state: Scalars, thrust: Scalars, constants: SubstepConstants, yaw_coefficients: Scalars,
    rotor_x: tuple[float, ...], rotor_y: tuple[float, ...], arm_scale: torch.Tensor, torque: Scalars, h: float,
) -> Scalars:
    """One MuJoCo-Euler step of N rigid quadrotors, on per-vehicle component tensors of shape (N,).

    state = (px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz); rotor thrust acts along body z at
    (rotor_x, rotor_y) times `arm_scale` (N,) with reaction yaw torque yaw_coefficients * thrust; `torque` is a world-frame
    disturbance (the force's is in `constants`). Accelerations at the current state, then v += h a,
    w += h alpha, p += h v_new, q = normalize(q) * exp(h w_new / 2), as mj_Euler does for a free joint.
    Written in the native kernel's order of operations (Euler's equations with the gyroscopic term as
    h (I_y - I_z) / I_x w_y w_z, the normalization folded into the rotation's quaternion), so that the
    two paths round alike.
    """
    px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz = state
    tx, ty, tz = torque
    dvx, dvy, dvz = constants.velocity_change
    hix, hiy, hiz = constants.h_over_inertia
    kx, ky, kz = constants.gyroscopic
    r00, r01, r02 = 1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)
    r10, r11, r12 = 2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)
    r20, r21, r22 = 2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)
    total = thrust[0] + thrust[1] + thrust[2] + thrust[3]
    # body torque: rotor moments r x (0, 0, T), reaction yaw torque, world disturbance rotated to body
    bx = arm_scale * sum(t * y for t, y in zip(thrust, rotor_y)) + r00 * tx + r10 * ty + r20 * tz
    by = -(arm_scale * sum(t * x for t, x in zip(thrust, rotor_x))) + r01 * tx + r11 * ty + r21 * tz
    bz = sum(t * c for t, c in zip(thrust, yaw_coefficients)) + r02 * tx + r12 * ty + r22 * tz
    lift = total * constants.h_over_mass
    vx, vy, vz = vx + (r02 * lift + dvx), vy + (r12 * lift + dvy), vz + (r22 * lift + dvz)
    # Euler's equations: I dw/dt = b - w x (I w), i.e. dw_x/dt = b_x / I_x + (I_y - I_z) / I_x w_y w_z, ...
    wx, wy, wz = wx + (hix * bx + kx * (wy * wz)), wy + (hiy * by + ky * (wz * wx)), wz + (hiz * bz + kz * (wx * wy))
    px, py, pz = px + h * vx, py + h * vy, pz + h * vz
    rate = torch.sqrt(wx * wx + wy * wy + wz * wz)
    half_angle = 0.5 * h * rate
    inv_norm = torch.rsqrt(qw * qw + qx * qx + qy * qy + qz * qz)
    scale = torch.where(rate > 0, torch.sin(half_angle) / rate.clamp_min(1e-30), torch.full_like(rate, 0.5 * h))
    scale = scale * inv_norm
    c, ex, ey, ez = torch.cos(half_angle) * inv_norm, scale * wx, scale * wy, scale * wz
    return (
        px, py, pz,
        qw * c - qx * ex - qy * ey - qz * ez,
        qw * ex + qx * c + qy * ez - qz * ey,
        qw * ey - qx * ez + qy * c + qz * ex,
        qw * ez + qx * ey - qy * ex + qz * c,
        vx, vy, vz, wx, wy, wz,
    )  # fmt: skip
