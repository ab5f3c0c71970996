"""Forward kinematics and the tool Jacobian of an arm from the chain the export records in policy.json
(`kinematics`: bodies with poses in their parents and hinge joints, the tool site), numpy only."""

from __future__ import annotations

import dataclasses

import numpy as np

from robo_rl_ros.core.bundle import BundleError
from robo_rl_ros.core.rotations import quat_to_matrix, rotation_exp


@dataclasses.dataclass(frozen=True)
class _Link:
    pos: np.ndarray
    rotation: np.ndarray
    axis: np.ndarray | None  # hinge axis in the body frame, None for a fixed body
    anchor: np.ndarray


def _vector(value: object, size: int, name: str) -> np.ndarray:
    """`value` as `size` finite numbers; BundleError naming it otherwise."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (size,) or not np.all(np.isfinite(array)):
        raise BundleError(f"policy.json kinematics: {name} must be {size} finite numbers, got {value!r}")
    return array


def _unit_quaternion(value: object, name: str) -> np.ndarray:
    """`value` as a unit quaternion (w, x, y, z), as the export writes MuJoCo's; BundleError otherwise."""
    quat = _vector(value, 4, name)
    if not abs(np.linalg.norm(quat) - 1.0) <= 1e-3:
        raise BundleError(f"policy.json kinematics: {name} must be a unit quaternion (w, x, y, z), got {value!r}")
    return quat


def _link(link: dict, index: int) -> _Link:
    joint, where = link["joint"], f"links[{index}]"
    quat = _unit_quaternion(link["quat"], f"{where}.quat")
    axis = None if joint is None else _vector(joint["axis"], 3, f"{where}.joint.axis")
    if axis is not None and not np.linalg.norm(axis) > 0:
        raise BundleError(f"policy.json kinematics: {where}.joint.axis is zero; a hinge needs a direction")
    return _Link(_vector(link["pos"], 3, f"{where}.pos"), quat_to_matrix(quat), axis,
                 np.zeros(3) if joint is None else _vector(joint["anchor"], 3, f"{where}.joint.anchor"))


class KinematicChain:
    """The arm from the world to its tool site; joint angles in the order of `joints`."""

    def __init__(self, description: dict):
        try:
            self.joints = tuple(str(n) for n in description["joints"])
            self._links = tuple(_link(link, i) for i, link in enumerate(description["links"]))
            limits = [_vector(link["joint"]["range"], 2, f"links[{i}].joint.range")
                      for i, link in enumerate(description["links"]) if link["joint"] is not None]
            if not limits or any(not low <= high for low, high in limits):
                raise BundleError("policy.json kinematics: every hinge needs a range [low, high] with low <= high")
            self.lower, self.upper = (np.array(x, dtype=np.float64) for x in zip(*limits))
            self._tool_pos = _vector(description["tool"]["pos"], 3, "tool.pos")
            self._tool_rotation = quat_to_matrix(_unit_quaternion(description["tool"]["quat"], "tool.quat"))
            self.gripper_joint = str(description["gripper"]["joint"])
            self.gripper_range = _vector(description["gripper"]["range"], 2, "gripper.range")
        except BundleError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            raise BundleError(f"policy.json kinematics is incomplete: {error!r}") from error
        if sum(link.axis is not None for link in self._links) != len(self.joints):
            raise BundleError("policy.json kinematics: the chain's hinge joints do not match its joint list")

    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tool position (3,), tool rotation (3, 3) and the tool Jacobian (6, n: linear then angular,
        world frame) at joint angles `q`."""
        position, rotation = np.zeros(3), np.eye(3)
        axes, anchors = [], []
        k = 0
        for link in self._links:
            position = position + rotation @ link.pos
            rotation = rotation @ link.rotation
            if link.axis is not None:
                anchor = position + rotation @ link.anchor
                world_axis = rotation @ link.axis
                rotation = rotation @ rotation_exp(link.axis * q[k])
                position = anchor - rotation @ link.anchor
                axes.append(world_axis)
                anchors.append(anchor)
                k += 1
        tool = position + rotation @ self._tool_pos
        axes_array, anchors_array = np.array(axes), np.array(anchors)
        jacobian = np.vstack([np.cross(axes_array, tool - anchors_array).T, axes_array.T])
        return tool, rotation @ self._tool_rotation, jacobian
