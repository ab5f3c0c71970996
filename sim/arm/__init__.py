"""Robot arms in MuJoCo for manipulation tasks: models, their specifications and a
batched Cartesian impedance controller."""

from sim.arm.robot import PANDA_LIKE, ArmSpec, load_arm

__all__ = ["PANDA_LIKE", "ArmSpec", "load_arm"]
