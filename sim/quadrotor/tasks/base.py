"""What every quadrotor task is: `QuadrotorTask`, its defaults, targets, reference, named reward terms,
termination and success, written once against a math namespace (`sim.kernel_expr`) so that the eager step
runs them on arrays and the native step compiles them (`native_step.header`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Mapping, Sequence

from sim.quadrotor.config import QuadrotorEnvConfig
from sim.quadrotor.rotations import tilted_quats

Rows = Sequence[Any]  # one array (or traced row) per component, each over the batch


@dataclasses.dataclass
class StepValues:
    """What a task's reward terms, termination and success read of the state after a control step, as rows."""

    position: Rows  # 3 [m], world frame
    velocity: Rows  # 3 [m/s]
    angular_velocity: Rows  # 3 [rad/s], body frame
    position_error: Rows  # 3 [m]: position - reference
    velocity_error: Rows  # 3 [m/s]: velocity - reference velocity
    uprightness: Any  # cos(tilt): the body z axis's world z component
    command: Rows  # 4: the normalized thrusts applied this step
    previous_command: Rows  # 4: those of the step before
    hover_command: Rows  # 4: per rotor, the command that holds this episode's vehicle in the air (motor.hover_commands)


def squared_norm(rows: Rows) -> Any:
    """Sum of the squares of `rows`, in order."""
    total = rows[0] * rows[0]
    for row in rows[1:]:
        total = total + row * row
    return total


class QuadrotorTask:
    """A quadrotor task, MuJoCo Playground style: `default_config`, targets and reference, named reward terms
    (the config's `reward_scales` weigh them), termination and the success criterion, in one class.

    Hover, reach and figure-eight share the reward, termination and success below and differ in their
    defaults, targets and reference. Every method taking `m` runs on arrays (`ArrayMath`) and is traced into
    the native step's C++ (`CppMath`), so it may use only `m`'s functions, arithmetic, comparisons and the
    mask operators &, | and ~ (no Python branches on row values).
    """

    name: ClassVar[str]
    env_id: ClassVar[str]  # the gymnasium id it is registered under
    # RLtools' SAC hover reward shape: norms rather than squares for position and velocity, so the pull
    # towards the target stays constant down to millimetres (with learning-to-fly's squares, 0.1 m cost
    # 0.025 per step and trained policies settled 0.15 m off target), and a constant that keeps every
    # step alive worth more than any error inside the arena. The position weight is twice RLtools' for
    # the 0.1 m success radius.
    reward_scales: ClassVar[Mapping[str, float]] = {
        "position": 0.0,  # |p - p_ref|^2 [m^2]
        "distance": -2.0,  # |p - p_ref| [m]
        "proximity": 0.0,  # exp(-|p - p_ref|^2 / success_radius^2): a bump, steepest at the success radius
        "orientation": -0.5,  # 1 - cos(tilt)
        "velocity": 0.0,  # |v - v_ref|^2 [m^2/s^2]
        "speed": -0.1,  # |v - v_ref| [m/s]
        "angular_velocity": 0.0,  # |omega|^2 [rad^2/s^2]
        "action": -0.2,  # sum_i (a_i - a_hover,i)^2, a_hover,i the command that holds the drawn vehicle
        "action_rate": 0.0,  # sum_i (a_i - a_i,prev)^2: reported, not rewarded by default
        "alive": 1.1,  # per step survived
        "termination": 0.0,  # on the step that terminates (ending the alive stream is the penalty)
    }

    @property
    def term_names(self) -> tuple[str, ...]:
        """The reward terms, in the order the native step writes them."""
        return tuple(self.reward_scales)

    def default_config(self) -> QuadrotorEnvConfig:
        """This task's default configuration."""
        return QuadrotorEnvConfig(task=self.name, reward_scales=dict(self.reward_scales))

    def validate(self, config: QuadrotorEnvConfig) -> None:
        """ConfigError if `config` lacks what this task needs (the shared checks are config.validate's)."""

    # ------------------------------------------------------------- targets
    def targets(self, m: Any, u: Rows, config: QuadrotorEnvConfig) -> list[Any]:
        """Each episode's target point, 3 rows, from 3 rows of uniform numbers in [0, 1): the centre."""
        return [m.zeros_like(u[k]) + config.center[k] for k in range(3)]

    def reference(self, m: Any, config: QuadrotorEnvConfig, target: Rows, time: Any) -> tuple[list[Any], list[Any]]:
        """Reference position and velocity (3 rows each) at episode time `time` [s]: the target, at rest."""
        zero = m.zeros_like(time)
        return list(target), [zero, zero, zero]

    # ------------------------------------------- reward, termination, success
    def terminated(self, m: Any, s: StepValues, config: QuadrotorEnvConfig) -> Any:
        """Whether the episode ends here (the batch adds non-finite states): out of the box around the
        reference, below the floor, or spinning or flying off faster than any recovery."""
        out = (m.abs(s.position_error[0]) > config.max_position_error) | \
              (m.abs(s.position_error[1]) > config.max_position_error) | \
              (m.abs(s.position_error[2]) > config.max_position_error)
        return (out | (s.position[2] < config.min_altitude) | (squared_norm(s.velocity) > config.max_speed**2)
                | (squared_norm(s.angular_velocity) > config.max_angular_speed**2))

    def reward_terms(self, m: Any, s: StepValues, terminated: Any, config: QuadrotorEnvConfig) -> dict[str, Any]:
        """The named reward terms (`reward_scales`' keys, in their order), each a row."""
        dist2 = squared_norm(s.position_error)
        vel_err2 = squared_norm(s.velocity_error)
        return {
            "position": dist2,
            "distance": m.sqrt(dist2),
            "proximity": m.exp(dist2 * (-1.0 / config.success_radius**2)),
            "orientation": 1.0 - s.uprightness,
            "velocity": vel_err2,
            "speed": m.sqrt(vel_err2),
            "angular_velocity": squared_norm(s.angular_velocity),
            # around this vehicle's own hover command: around the nominal vehicle's, a weaker or heavier draw
            # paid for the thrust that holds it and learned to hover low
            "action": squared_norm([c - h for c, h in zip(s.command, s.hover_command)]),
            "action_rate": squared_norm([c - p for c, p in zip(s.command, s.previous_command)]),
            "alive": m.ones_like(dist2),
            "termination": m.as_float(terminated),
        }

    def within_success(self, m: Any, s: StepValues, config: QuadrotorEnvConfig) -> Any:
        """Whether this step meets the success criterion (success: it held for `success_window_seconds`):
        within `success_radius` of the reference and tilted less than `success_max_tilt_deg`."""
        return ((squared_norm(s.position_error) < config.success_radius**2)
                & (s.uprightness > math.cos(math.radians(config.success_max_tilt_deg))))

    # ------------------------------------------------------ initial states
    def initial_states(self, xp: Any, u: Mapping[str, Any], config: QuadrotorEnvConfig) -> tuple[Any, Any, Any, Any]:
        """Initial (position, quaternion, velocity, angular velocity), feature-major (k, n), around the start
        point, learning-to-fly style, from uniforms `u` (named by `episode_starts.UNIFORM_FIELDS`). The
        native step draws the same in C++ (draw_starts)."""
        init = config.initial_state
        zero = u["at_rest"] * 0.0
        center = xp.concatenate([zero + c for c in config.center], 0)
        at_rest = u["at_rest"] < init.hover_fraction  # (1, n): exactly at rest at the start point
        pos = center + (2.0 * u["position"] - 1.0) * init.position_range
        quat = tilted_quats(xp, u["tilt_axis"], u["tilt_angle"][0], math.radians(init.max_tilt_deg))
        vel = (2.0 * u["velocity"] - 1.0) * init.velocity_range
        angvel = (2.0 * u["angular_velocity"] - 1.0) * init.angular_velocity_range
        identity = xp.concatenate([zero + 1.0, zero, zero, zero], 0)
        return (xp.where(at_rest, center, pos), xp.where(at_rest, identity, quat), xp.where(at_rest, 0.0, vel),
                xp.where(at_rest, 0.0, angvel))
