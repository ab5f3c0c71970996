"""A robot, as the arm tasks see it: an MJCF plus the names of its arm joints, end-effector site and
gripper actuator. Tasks use only these names, so any MJCF that provides them (for example MuJoCo
Menagerie's Panda with a site added at the fingertips) can be pointed to in the config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco

from sim.errors import ConfigError

HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class ArmSpec:
    """Where a task finds the parts of a robot in its MJCF."""

    mjcf: Path
    joints: tuple[str, ...]  # arm joints, base to tip, one torque actuator each
    actuators: tuple[str, ...]  # the arm joints' torque actuators, same order
    ee_site: str  # the tool centre point
    gripper_actuator: str  # position actuator of the fingers (opening per finger)


PANDA_LIKE = ArmSpec(
    mjcf=HERE / "panda.xml",
    joints=tuple(f"joint{i}" for i in range(1, 8)),
    actuators=tuple(f"joint{i}" for i in range(1, 8)),
    ee_site="tcp",
    gripper_actuator="gripper",
)


def load_arm(spec: ArmSpec = PANDA_LIKE) -> mujoco.MjModel:
    """Compile `spec.mjcf` and check that every name the spec gives exists; ConfigError otherwise."""
    if not Path(spec.mjcf).is_file():
        raise ConfigError(f"arm MJCF {spec.mjcf} does not exist")
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    missing = [f"joint {n}" for n in spec.joints if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) < 0]
    missing += [f"actuator {n}" for n in (*spec.actuators, spec.gripper_actuator)
                if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) < 0]
    if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.ee_site) < 0:
        missing.append(f"site {spec.ee_site}")
    if missing:
        raise ConfigError(f"{spec.mjcf} lacks {', '.join(missing)}")
    if len(spec.joints) != len(spec.actuators):
        raise ConfigError("an arm spec needs one actuator per joint")
    return model
