"""A privileged model-based expert for a quadrotor batch: the command each simulated vehicle should get now.

It reads what no deployed policy can: each vehicle's true state, its drawn parameters (mass, inertia, rotor
offsets, thrust curve, rotor rise and fall constants, yaw torque, wind) and the commands still waiting in its
latency queue. With those it

1. predicts the state at which the command it gives now starts to act, by stepping the vehicle's own model
   through the queued commands (the latency disappears from the control problem);
2. asks for an acceleration towards the task's reference at that time (the reference's own acceleration and a
   damped position loop, the wind's force cancelled, tilt and thrust limited) and for the attitude that gives
   it (a tilt loop that turns the thrust axis onto the wanted one the shortest way, the heading left free: the
   tasks do not score it). Both loops run
   faster on a vehicle whose rotors follow a command within `attitude_lag_limit` (30 ms): a 20 rad/s attitude
   loop let a lag-free Crazyflie drift out of the box while it righted itself from a steep start, and a faster
   one flies the slow-rotor Crazyflies worse (bench/RESULTS.md, session 46);
3. allocates thrust and torques to the four rotors through the vehicle's own mixer and inverts each rotor's
   first-order lag over one control step, so that the rotor speeds reach what is asked where the lag allows.

The collective thrust never asks for less than `min_collective` of the weight: rotors that spin down with a
300 ms fall constant cannot come back in time to catch the vehicle, and cut to zero during a recovery from a
steep start they lost it. On rotors slower than `lead_lag_from` (50 ms) it also asks for at least
`collective_lead` of the thrust the wanted acceleration needs, not only its share along the tilted thrust axis:
while the vehicle rights itself from a steep, falling start, those rotors spin up for the thrust it needs once
upright (the light Crazyflies with 150 ms rotors fell through the floor of the box before). It needs no training
and flies every vehicle of the family distribution (bench/RESULTS.md, session 42), so `robo_rl.distill
teacher=expert` fits a deployable student to its labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from sim.kernel_expr import ArrayMath
from sim.quadrotor import motor
from sim.quadrotor.physics import SubstepConstants, free_body_substep
from sim.quadrotor.rotations import quat_to_matrix

if TYPE_CHECKING:
    from sim.quadrotor.core import QuadrotorBatch

State = tuple[torch.Tensor, ...]  # (px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz), each (N,)


@dataclass(frozen=True)
class ExpertGains:
    """The expert's loop and thrust settings (measured on the family distribution and the named vehicles:
    bench/RESULTS.md, sessions 42 and 46)."""

    position_frequency: float = 2.0  # [rad/s] natural frequency of the position loop at `attitude_frequency`
    position_damping: float = 0.9
    attitude_frequency: float = 20.0  # [rad/s] roll and pitch loop of a vehicle with slow rotors
    fast_attitude_frequency: float = 40.0  # [rad/s] the same for rotors without lag
    attitude_lag_limit: float = 0.03  # [s] rotors this slow or slower (the slower of rise and fall) get
    # `attitude_frequency`; faster ones linearly more, up to `fast_attitude_frequency` without lag
    max_position_frequency: float = 3.0  # [rad/s] the position loop follows the attitude loop's, up to this
    attitude_damping: float = 0.9
    yaw_rate_frequency: float = 5.0  # [rad/s] the yaw rate is damped at 2x this; the heading is not held
    max_tilt_deg: float = 40.0  # the horizontal acceleration asked for is limited to this tilt
    min_vertical_acceleration: float = 0.3  # [g] the least upward acceleration asked for (falling is not recovery)
    min_collective: float = 0.9  # the least collective thrust asked for, as a fraction of the weight
    collective_lead: float = 0.8  # on slow rotors, the least collective as a share of the whole thrust asked for
    lead_lag_from: float = 0.05  # [s] rotors faster than this get no lead; from `lead_lag_full` on, all of it
    lead_lag_full: float = 0.1
    max_thrust_fraction: float = 0.95  # of the most the rotors (and the firmware limit) give: room for torque

    def __post_init__(self) -> None:
        if not self.attitude_lag_limit > 0 or not self.lead_lag_full > self.lead_lag_from:
            raise ValueError(f"ExpertGains: attitude_lag_limit must be > 0 (got {self.attitude_lag_limit}) and "
                             f"lead_lag_full > lead_lag_from (got {self.lead_lag_full} <= {self.lead_lag_from})")


class ModelExpert:
    """The expert's commands for every env of a torch-backend `QuadrotorBatch` (its own device and dtype)."""

    def __init__(self, batch: QuadrotorBatch, gains: ExpertGains | None = None):
        if batch.xp is not torch:
            raise ValueError("the model expert reads the torch backend's state (backend='torch'); "
                             "this batch steps MuJoCo")
        self.batch = batch
        self.gains = gains or ExpertGains()
        physics = batch.physics
        kw = dict(device=physics.device, dtype=physics.dtype)
        self._rotor_x = torch.tensor(physics.rotor_x, **kw)[None]
        self._rotor_y = torch.tensor(physics.rotor_y, **kw)[None]
        self._envs = torch.arange(batch.num_envs, device=physics.device)

    @torch.no_grad()
    def __call__(self) -> torch.Tensor:
        """Commands (N, 4) in [0, 1] for the batch's current state: what each env should be sent now."""
        b, g = self.batch, self.gains
        physics = b.physics
        state, speed = self.predicted_state()
        px, py, pz, qw, qx, qy, qz, vx, vy, vz, wx, wy, wz = state
        at = b.steps + b.latency.to(b.steps.dtype)  # when the command given now starts to act
        position_error, velocity_error = b.reference_errors(torch.stack([px, py, pz]), torch.stack([vx, vy, vz]),
                                                            b.targets, at)
        mass, gravity = physics.mass, physics.gravity
        curve = b.thrust_curve
        rotor_max = b.thrust_scale * (curve[0] + curve[1] + curve[2])  # (4, N) [N] at full speed
        most = g.max_thrust_fraction * rotor_max.sum(0) * min(1.0, float(b.constants.command_max))

        lag = self._rotor_lag()
        w_a = self._attitude_frequency(lag)
        w_p = (g.position_frequency * w_a / g.attitude_frequency).clamp_max(max(g.max_position_frequency,
                                                                                g.position_frequency))
        z_p = g.position_damping
        accel = (self._reference_acceleration(at) - (w_p * w_p) * position_error - (2.0 * z_p * w_p) * velocity_error
                 - physics.force / mass)
        vertical = torch.minimum((accel[2] + gravity).clamp_min(g.min_vertical_acceleration * gravity), most / mass)
        horizontal = torch.sqrt(accel[0] ** 2 + accel[1] ** 2)
        allowed = vertical * math.tan(math.radians(g.max_tilt_deg))
        shrink = torch.where(horizontal > allowed, allowed / horizontal.clamp_min(1e-9), torch.ones_like(horizontal))
        wanted = torch.stack([accel[0] * shrink, accel[1] * shrink, vertical], 1)  # (N, 3), world

        rotation = quat_to_matrix(torch, torch.stack([qw, qx, qy, qz])).T.reshape(-1, 3, 3)  # body to world
        thrust_axis = wanted / wanted.norm(dim=1, keepdim=True)
        attitude_error = self._tilt_error(rotation, thrust_axis)
        collective = (wanted * rotation[:, :, 2]).sum(1) * mass
        lead = g.collective_lead * ((lag - g.lead_lag_from) / (g.lead_lag_full - g.lead_lag_from)).clamp(0.0, 1.0)
        collective = torch.maximum(collective, lead * wanted.norm(dim=1) * mass)
        collective = torch.minimum(torch.maximum(collective, g.min_collective * mass * gravity), most)

        z_a, w_y = g.attitude_damping, g.yaw_rate_frequency
        zero = torch.zeros_like(w_a)
        stiffness = torch.stack([w_a * w_a, w_a * w_a, zero], 1)
        damping = torch.stack([2.0 * z_a * w_a, 2.0 * z_a * w_a, zero + 2.0 * w_y], 1)
        rate = torch.stack([wx, wy, wz], 1)
        inertia = physics.inertia.T
        torque = (inertia * (-stiffness * attitude_error - damping * rate)
                  + torch.linalg.cross(rate, inertia * rate, dim=1))

        arm = physics.arm_scale[:, None]
        mixer = torch.stack([torch.ones_like(physics.yaw_coefficients.T), self._rotor_y * arm, -self._rotor_x * arm,
                             physics.yaw_coefficients.T], 1)  # (N, 4 outputs, 4 rotors)
        wrench = torch.cat([collective[:, None], torque], 1)
        rotor_thrust = torch.linalg.solve(mixer, wrench[:, :, None])[:, :, 0]
        rotor_thrust = torch.minimum(rotor_thrust.clamp_min(0.0), rotor_max.T)
        return self._command_for(rotor_thrust, speed).nan_to_num(0.0)

    @staticmethod
    def _tilt_error(rotation: torch.Tensor, thrust_axis: torch.Tensor) -> torch.Tensor:
        """Each env's roll and pitch error (N, 3), body frame, zero about the body's z axis: the rotation that turns
        its thrust axis (the third column of `rotation`, (N, 3, 3) body to world) onto `thrust_axis` (N, 3, unit)
        the shortest way, its length the sine of the angle between them up to 90 degrees and 1 beyond.

        A whole attitude for the error (the wanted thrust axis with the heading of the body's x axis) is 180 degrees
        from the body's when a steep vehicle's x axis lies in the plane of its tilt and the wanted thrust axis leans
        the other way (on its side, nose up or down, braking), and the vee map's error is zero there: the loop held
        such a Crazyflie on its side until it left the box (bench/RESULTS.md, session 50)."""
        body_z = rotation[:, :, 2]
        axis = torch.linalg.cross(body_z, thrust_axis, dim=1)  # world frame; its length is the angle's sine
        sine = axis.norm(dim=1)
        within_right_angle = torch.atan2(sine, (body_z * thrust_axis).sum(1)) < 0.5 * math.pi
        scale = torch.where(within_right_angle, sine, torch.ones_like(sine)) / sine.clamp_min(1e-9)
        return -(rotation.transpose(1, 2) @ (axis * scale[:, None])[:, :, None])[:, :, 0]

    def _rotor_lag(self) -> torch.Tensor:
        """Each env's slower rotor time constant (N,) [s]: of rising and falling speed, the one that takes longer."""
        b = self.batch
        return motor.lag_time_constant(torch, b.physics.timestep, torch.maximum(b.decay_rise, b.decay_fall))

    def _attitude_frequency(self, lag: torch.Tensor) -> torch.Tensor:
        """Each env's roll and pitch loop frequency (N,) for rotor lag `lag` (N,) [s]: `attitude_frequency` from
        `attitude_lag_limit` on, linearly faster below, up to `fast_attitude_frequency` without lag."""
        g = self.gains
        fast_share = (1.0 - lag / g.attitude_lag_limit).clamp(0.0, 1.0)
        return g.attitude_frequency + (g.fast_attitude_frequency - g.attitude_frequency) * fast_share

    def _reference_acceleration(self, at: torch.Tensor) -> torch.Tensor:
        """The task reference's acceleration (3, N) at control step `at` (N,): its velocity's change over the step
        around it (zero for a fixed target)."""
        b = self.batch
        dt = b.config.control_dt
        targets = [b.targets[k] for k in range(3)]
        _, ahead = b.task.reference(ArrayMath(torch), b.config, targets, (at + 0.5) * dt)
        _, behind = b.task.reference(ArrayMath(torch), b.config, targets, (at - 0.5) * dt)
        return (torch.stack(ahead) - torch.stack(behind)) / dt

    def predicted_state(self) -> tuple[State, torch.Tensor]:
        """Each env's rigid-body state and rotor speeds (4, N) when the command sent now starts to act: its model
        stepped through the commands its latency still holds back (the current state at no latency); in the
        batch's native kernel where it steps with one (NativeStep.predict, the same steps in one pass)."""
        b = self.batch
        if b.native is not None:  # the same steps in the batch's own kernel
            state, speed = b.native.predict()
            return tuple(state.unbind(0)), speed
        state = tuple(b.physics.buffer.unbind(0))
        speed = b.rotor_speed.clone()
        latency = b.latency
        for step in range(b.constants.max_latency):
            queued = b.pending[(latency - 1 - step).clamp_min(0), :, self._envs].T  # (4, N): acts at this step
            stepped, stepped_speed = self._model_step(state, speed, queued)
            waiting = step < latency
            state = tuple(torch.where(waiting, new, old) for new, old in zip(stepped, state))
            speed = torch.where(waiting, stepped_speed, speed)
        return state, speed

    def _model_step(self, state: State, speed: torch.Tensor, command: torch.Tensor) -> tuple[State, torch.Tensor]:
        """One control step of every env's own model from `state` and rotor `speed` under `command` (4, N)."""
        b, physics = self.batch, self.batch.physics
        command = motor.motor_command(torch, command, b.constants.command_max, b.constants.command_cutoff)
        setpoint = motor.rotor_speed_setpoint(torch, command, b.constants.thrust_curve)
        thrust, speed = motor.rotor_thrust_substeps(torch, speed, setpoint, b.decay_rise, b.decay_fall, b.substeps,
                                                    b.thrust_curve, b.thrust_scale)
        constants = SubstepConstants.of(physics.mass, tuple(physics.inertia.unbind(0)), tuple(physics.force.unbind(0)),
                                        physics.gravity, physics.timestep)
        for substep in thrust.unbind(0):
            state = free_body_substep(state, tuple(substep.unbind(0)), constants,
                                      tuple(physics.yaw_coefficients.unbind(0)), physics.rotor_x, physics.rotor_y,
                                      physics.arm_scale, tuple(physics.torque.unbind(0)), physics.timestep)
        return state, speed

    def _command_for(self, rotor_thrust: torch.Tensor, speed: torch.Tensor) -> torch.Tensor:
        """Commands (N, 4) that bring each rotor from `speed` (4, N) to the speed giving `rotor_thrust` (N, 4) [N]
        on its own thrust curve within one control step, as far as its first-order lag allows."""
        b = self.batch
        c0, c1, c2 = (row[:, None] for row in b.thrust_curve)
        lift = (rotor_thrust / b.thrust_scale.T - c0).clamp_min(0.0)
        # the root of c2 w^2 + c1 w - lift in the form that also holds for a linear or a purely quadratic curve
        root = c1 + torch.sqrt((c1 * c1 + 4.0 * c2 * lift).clamp_min(0.0))
        target = (2.0 * lift / root.clamp_min(1e-9)).clamp(0.0, 1.0)
        now = speed.T
        rising = target >= now
        remaining = torch.where(rising, (b.decay_rise ** b.substeps)[:, None], (b.decay_fall ** b.substeps)[:, None])
        setpoint = (target - now * remaining) / (1.0 - remaining).clamp_min(1e-6)
        setpoint = torch.where(remaining < 0.999, setpoint, rising.to(setpoint.dtype)).clamp(0.0, 1.0)
        n0, n1, n2 = (float(c) for c in b.constants.thrust_curve)  # the firmware inverts the nominal curve
        return ((n0 + setpoint * (n1 + n2 * setpoint)) / (n0 + n1 + n2)).clamp(0.0, 1.0)

