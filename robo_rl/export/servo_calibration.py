"""Which servo drives which joint of an arm, and how a joint value maps to servo position steps.

A bus-servo arm (SO-ARM100: Feetech STS3215, 4096 steps per turn) reports and takes positions in steps. A
`ServoJoint` ties one joint of the bundle's kinematics (the arm joints, then the gripper joint) to a servo
id and a linear map, steps = zero_steps + steps_per_unit * value (value in rad for a hinge, in m of opening
per finger for the gripper; a negative `steps_per_unit` is a servo mounted the other way round), and bounds
the steps the servo may be sent. The firmware's generated configuration, the simulated servo bus and the
host's bus client all take their numbers from here.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Sequence

from robo_rl.export.errors import ExportError
from robo_rl.export.feetech import MAX_ID, POSITION_STEPS_PER_TURN

STEPS_PER_RADIAN = POSITION_STEPS_PER_TURN / (2.0 * math.pi)
CENTRE_STEPS = POSITION_STEPS_PER_TURN // 2  # the middle of a servo's travel
GRIPPER_TRAVEL_STEPS = 1024  # a quarter turn of the gripper servo opens the fingers fully
MIN_RANGE_STEPS = 16  # a joint whose whole range spans fewer servo steps cannot be commanded (steps_per_unit 1e-9)


@dataclasses.dataclass(frozen=True)
class ServoJoint:
    """One joint on the bus: steps = zero_steps + steps_per_unit * value, sent within [min_steps, max_steps]."""

    joint: str
    servo_id: int
    zero_steps: int
    steps_per_unit: float
    min_steps: int
    max_steps: int

    def __post_init__(self) -> None:
        """ExportError naming the field that no servo can take: a zero steps_per_unit divided by zero on the first
        reading, NaN read NaN positions, swapped bounds sent a joint to the far end, and 1.5 or True as an id or a
        step became invalid C."""
        for name in ("servo_id", "zero_steps", "min_steps", "max_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ExportError(f"servo {self.servo_id!r} ({self.joint}): {name} must be a whole number, got {value!r}")
            object.__setattr__(self, name, int(value))  # NumPy's integers as Python's: the JSON record takes those
        if not 0 <= self.servo_id <= MAX_ID:
            raise ExportError(f"servo {self.servo_id} ({self.joint}): servo_id must lie in [0, {MAX_ID}]")
        if isinstance(self.steps_per_unit, bool) or not isinstance(self.steps_per_unit, numbers.Real) \
                or not math.isfinite(self.steps_per_unit) or self.steps_per_unit == 0:
            raise ExportError(f"servo {self.servo_id} ({self.joint}): steps_per_unit must be a finite non-zero number, "
                              f"got {self.steps_per_unit!r}")
        object.__setattr__(self, "steps_per_unit", float(self.steps_per_unit))
        if not 0 <= self.min_steps < self.max_steps <= POSITION_STEPS_PER_TURN - 1:
            raise ExportError(f"servo {self.servo_id} ({self.joint}): bounds [{self.min_steps}, {self.max_steps}] must "
                              f"be increasing and lie in [0, {POSITION_STEPS_PER_TURN - 1}]")

    def to_steps(self, value: float) -> int:
        """The goal position for a joint value, rounded to a step and clipped to the servo's bounds."""
        steps = round(self.zero_steps + self.steps_per_unit * float(value))
        return min(max(steps, self.min_steps), self.max_steps)

    def to_value(self, steps: float) -> float:
        """The joint value of a position in steps (rad or m)."""
        return (float(steps) - self.zero_steps) / self.steps_per_unit

    def to_json(self) -> dict[str, Any]:
        """The fields, JSON-ready."""
        return dataclasses.asdict(self)


def default_calibration(kinematics: dict[str, Any], first_id: int = 1) -> tuple[ServoJoint, ...]:
    """An SO-ARM100's servos as assembled and calibrated by its builders: ids first_id.. along the chain and
    then the gripper, the middle of every hinge's range at the servo's centre step, one step per
    2 pi / 4096 rad, bounds at the joint's limits; the gripper's fingers closed at the centre and fully open
    a quarter turn on. ExportError if the kinematics lack a chain or a joint's range exceeds a turn."""
    try:
        hinges = [link["joint"] for link in kinematics["links"] if link["joint"] is not None]
        gripper_joint, (gripper_low, gripper_high) = kinematics["gripper"]["joint"], kinematics["gripper"]["range"]
    except (KeyError, TypeError, ValueError) as error:
        raise ExportError(f"policy.json kinematics lacks the arm chain or gripper: {error!r}") from None
    if first_id < 0 or first_id + len(hinges) > MAX_ID:
        raise ExportError(f"servo ids {first_id}..{first_id + len(hinges)} must lie in [0, {MAX_ID}]")
    joints = []
    for i, hinge in enumerate(hinges):
        zero = round(CENTRE_STEPS - STEPS_PER_RADIAN * 0.5 * sum(hinge["range"]))
        low, high = (zero + STEPS_PER_RADIAN * x for x in hinge["range"])
        if low < 0 or high > POSITION_STEPS_PER_TURN - 1:
            raise ExportError(f"joint {hinge['name']!r} range {hinge['range']} rad exceeds one servo turn")
        joints.append(ServoJoint(hinge["name"], first_id + i, zero, STEPS_PER_RADIAN, math.ceil(low), math.floor(high)))
    if not gripper_high > gripper_low:
        raise ExportError(f"gripper range {[gripper_low, gripper_high]} must be increasing")
    per_metre = GRIPPER_TRAVEL_STEPS / (gripper_high - gripper_low)
    joints.append(ServoJoint(gripper_joint, first_id + len(hinges), round(CENTRE_STEPS - per_metre * gripper_low),
                             per_metre, CENTRE_STEPS, CENTRE_STEPS + GRIPPER_TRAVEL_STEPS))
    return tuple(joints)


def check_calibration(calibration: Sequence[ServoJoint], kinematics: dict[str, Any]) -> None:
    """ExportError unless the calibration names every joint of the kinematics (arm joints in order, then the
    gripper) with distinct ids in [0, MAX_ID] and bounds inside one turn."""
    try:
        expected = [*kinematics["joints"], kinematics["gripper"]["joint"]]
    except (KeyError, TypeError) as error:
        raise ExportError(f"policy.json kinematics lacks the joints or the gripper: {error!r}") from None
    names = [j.joint for j in calibration]
    if names != expected:
        raise ExportError(f"the servo calibration's joints are {names}, the bundle's are {expected}")
    ids = [j.servo_id for j in calibration]
    if len(set(ids)) != len(ids) or not all(0 <= i <= MAX_ID for i in ids):
        raise ExportError(f"servo ids {ids} must be distinct and in [0, {MAX_ID}]")
    for j in calibration:
        j.__post_init__()  # a calibration built with dataclasses.replace or object.__setattr__ is checked again
    ranges = joint_ranges(kinematics)
    for j in calibration:
        low, high = sorted(float(x) for x in ranges[j.joint])
        values = sorted((j.to_value(j.min_steps), j.to_value(j.max_steps)))
        step = 1.0 / abs(j.steps_per_unit)  # rounding to whole steps moves a bound by up to one
        if values[0] < low - step or values[1] > high + step:
            raise ExportError(f"servo {j.servo_id} ({j.joint}): bounds [{j.min_steps}, {j.max_steps}] steps are joint "
                              f"values [{values[0]:.4g}, {values[1]:.4g}], beyond the joint's range [{low:.4g}, "
                              f"{high:.4g}] (zero_steps, the sign of steps_per_unit or the bounds?): the firmware "
                              "trusts readings within them")
        if (high - low) * abs(j.steps_per_unit) < MIN_RANGE_STEPS:
            raise ExportError(f"servo {j.servo_id} ({j.joint}): steps_per_unit {j.steps_per_unit:g} spans the joint's "
                              f"range [{low:.4g}, {high:.4g}] in {(high - low) * abs(j.steps_per_unit):.3g} steps, under "
                              f"{MIN_RANGE_STEPS}: it could not be commanded")


def joint_ranges(kinematics: dict[str, Any]) -> dict[str, Sequence[float]]:
    """Each joint's range of the bundle's kinematics (rad for a hinge, m of opening for the gripper), by name."""
    try:
        ranges = {link["joint"]["name"]: link["joint"]["range"] for link in kinematics["links"]
                  if link["joint"] is not None}
        ranges[kinematics["gripper"]["joint"]] = kinematics["gripper"]["range"]
    except (KeyError, TypeError) as error:
        raise ExportError(f"policy.json kinematics lacks the joints' ranges: {error!r}") from None
    return ranges
