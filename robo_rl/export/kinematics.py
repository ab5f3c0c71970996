"""An arm's kinematic chain from its compiled MuJoCo model, as JSON for policy.json: what a deployment
target needs to compute the tool pose and Jacobian from joint positions (robo_rl_ros.core.kinematics)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import mujoco

from robo_rl.export.errors import ExportError


def arm_kinematics(model: mujoco.MjModel, spec: Any) -> dict[str, Any]:
    """The chain from the world to `spec.ee_site`: every body on the path with its pose in its parent
    (pos, quat w x y z) and its hinge joint (name, axis and anchor in the body frame, limits), the tool
    site's pose in its body, the arm joints' order and the gripper joint. ExportError for joints other
    than hinges on the path, or arm joints off it."""
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.ee_site)
    path, body = [], int(model.site_bodyid[site])
    while body != 0:
        path.append(body)
        body = int(model.body_parentid[body])
    links = []
    for body in reversed(path):
        joints = range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body])
        link: dict[str, Any] = {"body": model.body(body).name, "pos": model.body_pos[body].tolist(),
                                "quat": model.body_quat[body].tolist(), "joint": None}
        for j in joints:
            if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE or link["joint"] is not None:
                raise ExportError(f"body {link['body']!r}: only one hinge joint per body is supported")
            link["joint"] = {"name": model.joint(j).name, "axis": model.jnt_axis[j].tolist(),
                             "anchor": model.jnt_pos[j].tolist(), "range": model.jnt_range[j].tolist()}
        links.append(link)
    on_path = [link["joint"]["name"] for link in links if link["joint"]]
    if on_path != list(spec.joints):
        raise ExportError(f"the joints from the base to {spec.ee_site!r} are {on_path}, the arm's are {list(spec.joints)}")
    gripper = int(model.actuator_trnid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, spec.gripper_actuator), 0])
    return {
        "joints": list(spec.joints),
        "links": links,
        "tool": {"site": spec.ee_site, "pos": model.site_pos[site].tolist(), "quat": model.site_quat[site].tolist()},
        "gripper": {"joint": model.joint(gripper).name, "range": model.jnt_range[gripper].tolist()},
        "frames": "world frame; quaternions (w, x, y, z); joint angles in rad about the axis at the anchor",
    }


def arm_task_config(config: Any) -> dict[str, Any]:
    """An arm task config (sim.arm.env.ArmTaskConfig) as JSON: action scale, workspace, rates, ..."""
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return str(value) if isinstance(value, Path) else value
    return plain(dataclasses.asdict(config))
