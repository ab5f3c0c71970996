"""Cartesian impedance control of many arms at once, SERL-style, running inside MuJoCo's step.

`load_impedance_arm` adds to a robot's MJCF (through `mujoco.MjSpec`, so any arm that an `ArmSpec`
describes works) six Cartesian actuators on the tool centre point: three translational, measured from a
reference site at the world origin, and three rotational, measured from a reference site that holds the
tool's home orientation (pointing down). Each is a spring-damper on its axis,

    F = Kp (x_d - x) - Dp v,    T = Kr (0 - rotvec) - Dr w,

that MuJoCo maps to joint torques through the site Jacobian (tau = J^T [F; T]) at every physics substep,
in C, on the batch's threads: one `Batch.step(nstep=substeps)` per control step, no Python in the inner
loop. Gravity is compensated through the arm's actuators (`gravcomp` on the arm's bodies, applied via the
actuators and clamped by each joint's torque limits, like the bias feed-forward of a real arm's torque
interface); the null space is damped by extra joint damping. 5-DoF arms (`orientation="axis"`) get the two
rotational actuators about the tool's x and y axes only: they hold the direction of the tool's z axis
and leave its yaw free.

Compared with computing the same law in numpy every substep, this ran pick-cube 1.5x faster (the numpy
version spent a third of the time outside MuJoCo and made every substep a separate, cache-cold pass over
all simulations).
"""

from __future__ import annotations

import dataclasses

import mujoco
import mujoco.batch
import numpy as np

from sim.arm.robot import ArmSpec, load_arm

TRANSLATION = ("tool_x", "tool_y", "tool_z")
ROTATION = ("tool_rx", "tool_ry", "tool_rz")


@dataclasses.dataclass(frozen=True)
class ImpedanceGains:
    """Stiffness and damping of the tool in space. With the defaults the Panda-class tool covers 3 mm of a
    2 cm step in the first 20 ms control step and 17 mm within five (at 600 N/m it crept 3 mm per step)."""

    translation_stiffness: float = 6000.0  # [N/m]
    rotation_stiffness: float = 300.0  # [N m/rad]
    translation_damping_ratio: float = 1.0
    rotation_damping_ratio: float = 1.0
    null_damping: float = 2.0  # [N m s/rad] on every arm joint
    effective_mass: float = 2.0  # [kg] the arm's apparent mass at the tool, for the damping (rotation: 5% of it)

    def damping(self, stiffness: float | np.ndarray, ratio: float, mass: float) -> float | np.ndarray:
        """Damping for a critically damped (ratio 1) second-order response of `mass`."""
        return 2.0 * ratio * np.sqrt(stiffness * mass)


def home_tool_rotation(model: mujoco.MjModel, arm: ArmSpec) -> np.ndarray:
    """The tool's orientation (3, 3) with the arm at `arm.home`."""
    data = mujoco.MjData(model)
    for joint, q in zip(arm.joints, arm.home):
        data.qpos[model.jnt_qposadr[model.joint(joint).id]] = q
    mujoco.mj_kinematics(model, data)
    return data.site_xmat[model.site(arm.ee_site).id].reshape(3, 3).copy()


def load_impedance_arm(arm: ArmSpec, gains: ImpedanceGains = ImpedanceGains()) -> mujoco.MjModel:
    """Compile `arm.mjcf` (checked by `load_arm`) with the Cartesian impedance actuators, gravity
    compensation and null-space damping added; the arm's own torque actuators stay, at zero."""
    plain = load_arm(arm)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, home_tool_rotation(plain, arm).ravel())
    spec = mujoco.MjSpec.from_file(str(arm.mjcf))
    spec.worldbody.add_site(name="impedance_origin", group=5)
    spec.worldbody.add_site(name="impedance_orientation", quat=quat, group=5)
    rotations = ROTATION if arm.orientation == "full" else ROTATION[:2]
    for axis, name in enumerate((*TRANSLATION, *rotations)):
        gear = np.zeros(6)
        gear[axis] = 1.0
        actuator = spec.add_actuator(name=name, trntype=mujoco.mjtTrn.mjTRN_SITE, target=arm.ee_site,
                                     refsite="impedance_origin" if axis < 3 else "impedance_orientation", gear=gear)
        actuator.gaintype, actuator.biastype = mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtBias.mjBIAS_AFFINE
        actuator.ctrllimited = False  # set_stiffness_scale writes the gains
    torque_limits = plain.actuator_ctrlrange[[plain.actuator(name).id for name in arm.actuators]]
    for name in arm.actuators:  # the joints' limits clamp the sum of motor, impedance and gravity torques
        spec.actuator(name).ctrllimited = False
    for joint_name, limits in zip(arm.joints, torque_limits):
        joint = spec.joint(joint_name)
        damping = np.array(joint.damping)  # (linear, polynomial terms): only the linear one
        damping[0] += gains.null_damping
        joint.damping = damping
        joint.actgravcomp = True
        joint.actfrclimited, joint.actfrcrange = True, limits
    _compensate_gravity(spec.joint(arm.joints[0]).parent)
    return spec.compile()


def _compensate_gravity(body: mujoco.MjsBody) -> None:
    body.gravcomp = 1.0
    for child in body.bodies:
        _compensate_gravity(child)


class BatchedImpedanceController:
    """Drives the arms of `batch` (persistent, of a model from `load_impedance_arm(spec, gains)`) towards
    tool positions, holding the tool's home orientation."""

    def __init__(self, batch: mujoco.batch.Batch, model: mujoco.MjModel, spec: ArmSpec,
                 gains: ImpedanceGains = ImpedanceGains()):
        self.batch, self.spec, self.gains = batch, spec, gains
        self._site = model.site(spec.ee_site).id
        names = (*TRANSLATION, *(ROTATION if spec.orientation == "full" else ROTATION[:2]))
        try:
            ids = np.array([model.actuator(name).id for name in names])
        except KeyError as error:
            raise ValueError("the model has no impedance actuators: load it with load_impedance_arm") from error
        self._translation, self._rotation = ids[:3], ids[3:]
        self._site_xpos, self._site_xmat = batch.bind("site_xpos"), batch.bind("site_xmat")
        self._ctrl, self._actuator_velocity = batch.bind("ctrl"), batch.bind("actuator_velocity")
        self._gain, self._bias = batch.expand("actuator_gainprm"), batch.expand("actuator_biasprm")
        n = self._ctrl.shape[0]
        self.set_stiffness_scale(np.arange(n), np.ones(n))

    def set_stiffness_scale(self, ids: np.ndarray, scale: np.ndarray) -> None:
        """Scale the stiffness of arms `ids` by `scale` (n,) from the configured gains; damping keeps its ratio."""
        gains, mass = self.gains, self.gains.effective_mass
        scale = np.asarray(scale, dtype=np.float64)[:, None]
        for actuators, stiffness, ratio, m in ((self._translation, gains.translation_stiffness,
                                                gains.translation_damping_ratio, mass),
                                               (self._rotation, gains.rotation_stiffness,
                                                gains.rotation_damping_ratio, 0.05 * mass)):
            k = stiffness * scale
            rows = np.ix_(ids, actuators)
            self._gain[rows + (0,)] = k
            self._bias[rows + (1,)] = -k
            self._bias[rows + (2,)] = -gains.damping(k, ratio, m)

    def tool_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Current tool positions (N, 3) and rotation matrices (N, 3, 3), as of the last computed stage."""
        return self._site_xpos[:, self._site].copy(), self._site_xmat[:, self._site].reshape(-1, 3, 3).copy()

    def tool_velocity(self) -> np.ndarray:
        """Tool linear velocities (N, 3), world frame, as of the last computed stage."""
        return self._actuator_velocity[:, self._translation].copy()

    def step(self, target_pos: np.ndarray, substeps: int, ids: np.ndarray | None = None) -> None:
        """Hold targets (N, 3) for `substeps` physics steps (of simulations `ids`, default all), leaving
        the kinematics current at the new state."""
        self._ctrl[:, self._translation] = target_pos
        self._ctrl[:, self._rotation] = 0.0
        self.batch.step(ids=ids, nstep=substeps, stage=mujoco.mjtStage.mjSTAGE_VEL)

