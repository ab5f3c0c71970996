"""Same-step autoreset on the torch path: ended episodes restart inside the (compiled) control step."""

from __future__ import annotations

from typing import Any

import torch

from sim.quadrotor import episode_starts as starts
from sim.quadrotor import motor
from sim.quadrotor.observation import STATE_HISTORY_FIELDS


class InStepRestart:
    """`QuadrotorBatch`'s restart of ended episodes as elementwise selects, part of its step: each env restarts
    from its next episode's start (`episode_starts.draw`), the start `reset` would give it, with no host
    synchronization. The native step does the same in C++ (native_step.cpp)."""

    def _autoreset(self, done: Any, noise: Any) -> Any:
        """Restart the envs where `done` from their next episodes' starts, as elementwise selects (no host
        synchronization, fused into the compiled step); returns every env's observation after it."""
        physics, hover = self.physics, self.constants.hover_command
        fresh = starts.draw(torch, self.start_key, self._env_ids, self.episode + 1, self.params, self.config)
        self.episode = torch.where(done, self.episode + 1, self.episode)
        self.current_starts = torch.where(done[:, None], fresh.T.contiguous(), self.current_starts)  # env-major
        decays = fresh.clone()  # the motor time constants as the batch holds them: per-substep decay factors
        rise, fall = motor.lag_factors(torch, self.params.timestep, starts.field(fresh, "motor_tau_rise", 0),
                                       starts.field(fresh, "motor_tau_fall", 0))
        starts.field(decays, "motor_tau_rise", 0)[...] = rise
        starts.field(decays, "motor_tau_fall", 0)[...] = fall
        decays = decays.to(physics.dtype)

        def start(name: str) -> Any:
            return starts.field(decays, name, feature_axis=0)

        def restart(fresh: Any, current: Any) -> Any:
            return torch.where(done, fresh, current)

        state = torch.cat([start(name) for name, _ in starts.START_FIELDS[:4]], 0)
        physics.buffer = restart(state, physics.buffer)
        self.targets = restart(start("target"), self.targets)
        physics.mass = restart(start("mass"), physics.mass)
        physics.inertia = restart(start("inertia"), physics.inertia)
        physics.yaw_coefficients = restart(start("yaw_torque_coefficients"), physics.yaw_coefficients)
        physics.force = restart(start("disturbance_force"), physics.force)
        physics.torque = restart(start("disturbance_torque"), physics.torque)
        self.thrust_scale = restart(start("thrust_scale"), self.thrust_scale)
        self.thrust_curve = restart(start("thrust_curve"), self.thrust_curve)
        physics.arm_scale = restart(start("arm_scale"), physics.arm_scale)
        self.decay_rise = restart(start("motor_tau_rise"), self.decay_rise)
        self.decay_fall = restart(start("motor_tau_fall"), self.decay_fall)
        self.latency = restart(start("latency_steps").to(self.latency.dtype), self.latency)
        zero = torch.zeros_like(self.steps)
        self.steps = restart(zero, self.steps)
        self.success_count = restart(zero, self.success_count)
        self.rotor_speed = restart(torch.full_like(self.rotor_speed, self.constants.hover_rotor_speed), self.rotor_speed)
        if self.config.action_history:  # (an empty history keeps its strides: no recompilation)
            self.history = restart(torch.full_like(self.history, hover), self.history)
        self.pending = restart(torch.full_like(self.pending, hover), self.pending)
        self.previous_action = restart(torch.full_like(self.previous_action, hover), self.previous_action)
        state = self._observed_state(*self._state_fields(None), noise)
        observed = state[STATE_HISTORY_FIELDS]
        self.last_observed = observed
        if self.config.state_history:
            fresh = torch.cat([observed] * self.config.state_history, 0)
            self.state_history = torch.where(done, fresh, self.state_history)
        return self._assemble(state, self.history, self.state_history)
