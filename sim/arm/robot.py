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
    home: tuple[float, ...] = ()  # arm joint positions at the start of an episode, tool pointing down
    # what the controller holds of the tool's orientation: "full" (6+ DoF arms) or "axis" (only the
    # direction of the tool's z axis, for 5-DoF arms, which cannot also hold its yaw everywhere)
    orientation: str = "full"


PANDA_LIKE = ArmSpec(
    mjcf=HERE / "panda.xml",
    joints=tuple(f"joint{i}" for i in range(1, 8)),
    actuators=tuple(f"joint{i}" for i in range(1, 8)),
    ee_site="tcp",
    gripper_actuator="gripper",
    home=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785),  # tool about 0.49 m above the table
)

SO_ARM100_LIKE = ArmSpec(
    mjcf=HERE / "so_arm100.xml",
    joints=("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"),
    actuators=("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"),
    ee_site="tcp",
    gripper_actuator="gripper",
    home=(0.0, -1.57, 1.57, 1.57, 0.0),  # Menagerie's home: tool 0.19 m out, 0.075 m above the table
    orientation="axis",
)


def load_arm(spec: ArmSpec = PANDA_LIKE) -> mujoco.MjModel:
    """Compile `spec.mjcf` and check that every name the spec gives exists; ConfigError otherwise."""
    if not Path(spec.mjcf).is_file():
        raise ConfigError(f"arm MJCF {spec.mjcf} does not exist")
    try:
        model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    except ValueError as error:  # MuJoCo's parse and compile errors
        raise ConfigError(f"arm MJCF {spec.mjcf} does not compile: {' '.join(str(error).split())}") from None
    missing = [f"joint {n}" for n in spec.joints if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) < 0]
    missing += [f"actuator {n}" for n in (*spec.actuators, spec.gripper_actuator)
                if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) < 0]
    if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.ee_site) < 0:
        missing.append(f"site {spec.ee_site}")
    if missing:
        raise ConfigError(f"{spec.mjcf} lacks {', '.join(missing)}")
    if len(spec.joints) != len(spec.actuators):
        raise ConfigError("an arm spec needs one actuator per joint")
    if len(spec.home) != len(spec.joints):
        raise ConfigError(f"an arm spec needs a home position per joint ({len(spec.joints)}), got {len(spec.home)}")
    if spec.orientation not in ("full", "axis"):
        raise ConfigError(f"arm spec orientation must be 'full' or 'axis', got {spec.orientation!r}")
    return model
