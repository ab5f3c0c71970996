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


def _link(link: dict) -> _Link:
    joint = link["joint"]
    return _Link(np.asarray(link["pos"], dtype=np.float64), quat_to_matrix(np.asarray(link["quat"], dtype=np.float64)),
                 None if joint is None else np.asarray(joint["axis"], dtype=np.float64),
                 np.zeros(3) if joint is None else np.asarray(joint["anchor"], dtype=np.float64))


class KinematicChain:
    """The arm from the world to its tool site; joint angles in the order of `joints`."""

    def __init__(self, description: dict):
        try:
            self.joints = tuple(str(n) for n in description["joints"])
            self._links = tuple(_link(link) for link in description["links"])
            limits = [link["joint"]["range"] for link in description["links"] if link["joint"] is not None]
            self.lower, self.upper = (np.array(x, dtype=np.float64) for x in zip(*limits))
            self._tool_pos = np.asarray(description["tool"]["pos"], dtype=np.float64)
            self._tool_rotation = quat_to_matrix(np.asarray(description["tool"]["quat"], dtype=np.float64))
            self.gripper_joint = str(description["gripper"]["joint"])
        except (KeyError, TypeError, ValueError) as error:
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
