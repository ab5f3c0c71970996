"""Take-off and landing: from standing on a pad, climb to hover 1 m above it, then land on a second pad nearby
and stay there."""

from __future__ import annotations

import math
from typing import Any

from sim.errors import ConfigError
from sim.quadrotor.config import InitialStateConfig, QuadrotorEnvConfig
from sim.quadrotor.tasks.base import QuadrotorTask, Rows, StepValues, squared_norm

CLIMB_HEIGHT = 1.0  # [m] above the start pad
CLIMB_SECONDS, HOLD_SECONDS, LAND_SECONDS = 1.5, 1.0, 2.0  # the reference's phases; the rest of the episode on the pad
PAD_RANGE = 0.3  # [m] the landing pad lies within this of the start pad, per horizontal axis
# [m] the reference ends this far below the floor height: standing on the floor then costs less than hovering
# just above it, so the position terms press the vehicle down onto the pad instead of holding it a hair above
TOUCHDOWN_DEPTH = 0.03
LANDED_SPEED = 0.1  # [m/s]
LANDED_CLEARANCE = 0.01  # [m] above the floor height
TIPPED_OVER_DEG = 30.0  # a vehicle on the floor tilted more than this has crashed


def _ramp(m: Any, time: Any, start: float, seconds: float) -> tuple[Any, Any]:
    """A smooth 0 -> 1 step over [start, start + seconds] (half a cosine) and its rate [1/s]."""
    phase = (time - start) * (1.0 / seconds)
    phase = m.where(phase < 0.0, 0.0, m.where(phase > 1.0, 1.0, phase))
    return 0.5 - 0.5 * m.cos(math.pi * phase), (0.5 * math.pi / seconds) * m.sin(math.pi * phase)


class TakeoffLand(QuadrotorTask):
    """Stand on the start pad (the config's `center`, at the floor), climb to `CLIMB_HEIGHT` above it, hold, fly
    to the landing pad (the episode's target, on the floor) and come down on it; success: standing still on it
    for the last `success_window_seconds` (a second: a vehicle that lifts off again in that time fails)."""

    name = "takeoff_land"
    env_id = "robo_rl/CrazyflieTakeoffLand-v0"
    reward_scales = {**QuadrotorTask.reward_scales, "proximity": 1.0,
                     "landed": 1.0}  # per step standing still on the landing pad

    def default_config(self) -> QuadrotorEnvConfig:
        """Standing still on the start pad on the floor, 6 s episodes: the reference lands by 4.5 s, success held
        for the last second."""
        config = super().default_config()
        config.floor_height = 0.006  # the MJCF frame's half-height: its centre of mass standing on the floor
        config.center = (0.0, 0.0, config.floor_height)
        config.min_altitude = -1.0  # the floor holds the vehicle; crashes are tip-overs (terminated below)
        config.initial_state = InitialStateConfig(position_range=0.0, max_tilt_deg=0.0, velocity_range=0.0,
                                                  angular_velocity_range=0.0, hover_fraction=1.0)
        config.episode_seconds = 6.0
        config.success_window_seconds = 1.0
        return config

    def validate(self, config: QuadrotorEnvConfig) -> None:
        """ConfigError without a floor to take off from and land on."""
        if config.floor_height is None:
            raise ConfigError("config.floor_height must be a height in [0, 1] m for the takeoff_land task (the "
                              "vehicle stands on the floor), got null")

    def targets(self, m: Any, u: Rows, config: QuadrotorEnvConfig) -> list[Any]:
        """The landing pad, within `PAD_RANGE` of the start pad, `TOUCHDOWN_DEPTH` below the floor height."""
        return [config.center[0] + (2.0 * u[0] - 1.0) * PAD_RANGE, config.center[1] + (2.0 * u[1] - 1.0) * PAD_RANGE,
                m.zeros_like(u[2]) + (config.center[2] - TOUCHDOWN_DEPTH)]

    def reference(self, m: Any, config: QuadrotorEnvConfig, target: Rows, time: Any) -> tuple[list[Any], list[Any]]:
        """Climb from the start pad, hold, then move to and descend onto the landing pad: smooth ramps."""
        climb, climb_rate = _ramp(m, time, 0.0, CLIMB_SECONDS)
        land, land_rate = _ramp(m, time, CLIMB_SECONDS + HOLD_SECONDS, LAND_SECONDS)
        hover = (config.center[0], config.center[1], config.center[2] + CLIMB_HEIGHT)
        position, velocity = [], []
        for k in range(3):
            lift = CLIMB_HEIGHT if k == 2 else 0.0
            position.append(config.center[k] + lift * climb + (target[k] - hover[k]) * land)
            velocity.append(lift * climb_rate + (target[k] - hover[k]) * land_rate)
        return position, velocity

    def _landed(self, m: Any, s: StepValues, config: QuadrotorEnvConfig) -> Any:
        """Standing on the floor, still."""
        return (s.position[2] < config.floor_height + LANDED_CLEARANCE) & (squared_norm(s.velocity) < LANDED_SPEED**2)

    def terminated(self, m: Any, s: StepValues, config: QuadrotorEnvConfig) -> Any:
        """The shared bounds, and tipping over on the floor."""
        on_floor = s.position[2] < config.floor_height + LANDED_CLEARANCE
        return super().terminated(m, s, config) | (on_floor & (s.uprightness < math.cos(math.radians(TIPPED_OVER_DEG))))

    def reward_terms(self, m: Any, s: StepValues, terminated: Any, config: QuadrotorEnvConfig) -> dict[str, Any]:
        """The shared terms, and `landed`: standing still on the landing pad."""
        terms = super().reward_terms(m, s, terminated, config)
        terms["landed"] = m.as_float(self.within_success(m, s, config))
        return terms

    def within_success(self, m: Any, s: StepValues, config: QuadrotorEnvConfig) -> Any:
        """Landed within `success_radius` of the landing pad (and level, as the shared criterion says)."""
        return super().within_success(m, s, config) & self._landed(m, s, config)
