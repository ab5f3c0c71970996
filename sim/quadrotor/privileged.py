"""What a quadrotor batch tells beyond the observation: the privileged observation of an asymmetric critic
(or a teacher) and each env's episode parameters (`info["params"]`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sim.quadrotor import episode_starts as starts

PRIVILEGED_PARAMETERS = 22  # rows of episode parameters in a privileged observation (PrivilegedObservation._privileged)


class PrivilegedObservation:
    """`QuadrotorBatch`'s privileged observation and episode parameters, read from its state and starts."""

    @property
    def privileged_size(self) -> int:
        """Length of `privileged_observation` rows."""
        return self.layout.size + 4 + PRIVILEGED_PARAMETERS

    def privileged_observation(self, ids: np.ndarray | None = None) -> Any:
        """What an asymmetric critic may see, (n, privileged_size): the observation without noise (its
        histories as observed), the rotor speeds, and the episode's parameters, each near 0 for the nominal vehicle: mass, inertia,
        per-rotor thrust, arm length and yaw torque as relative errors, the thrust curve's coefficients as
        fractions of the nominal maximum thrust (less the nominal's), the rotors' decay per control step when
        speeding up and slowing down, disturbance force and torque as fractions of their configured bounds,
        latency in control steps."""
        return self._privileged(None if ids is None else self.arrays.index(ids))

    def _privileged(self, rows: Any) -> Any:
        """`privileged_observation` of envs `rows` (all if None); on the torch path without host
        synchronization, so that it fuses into the compiled step. The native step's write_privileged writes
        the same rows."""
        xp, nominal = self.xp, self.params
        fields = [*self._state_fields(rows)]
        history, rotor_speed, thrust_scale, latency = self.history, self.rotor_speed, self.thrust_scale, self.latency
        curve, rise, fall = self.thrust_curve, self.decay_rise[None], self.decay_fall[None]
        state_history = self.state_history
        if xp is torch:  # the episode parameters as the physics holds them, feature-major
            physics = self.physics
            mass, inertia, force, torque = physics.mass[None], physics.inertia, physics.force, physics.torque
            arm, yaw = physics.arm_scale[None], physics.yaw_coefficients[:1]
            latency = latency.to(mass.dtype)
        else:
            p = starts.params_view(self.current_starts)
            mass, inertia, force, torque = p.mass[None], p.inertia.T, p.disturbance_force.T, p.disturbance_torque.T
            arm, yaw = p.arm_scale[None], p.yaw_torque_coefficients.T[:1]
            latency = latency.astype(np.float64)
        if rows is not None:
            history, state_history, rotor_speed, thrust_scale, mass, inertia, force, torque, arm, yaw, curve, rise, fall = (
                x[:, rows] for x in (history, state_history, rotor_speed, thrust_scale, mass, inertia, force, torque, arm,
                                     yaw, curve, rise, fall))
            latency = latency[rows]
        rise_per_step, fall_per_step = rise, fall
        for _ in range(self.substeps - 1):
            rise_per_step, fall_per_step = rise_per_step * rise, fall_per_step * fall
        inertia_rows = xp.concatenate([inertia[k : k + 1] / float(nominal.inertia[k]) for k in range(3)], 0)
        curve_rows = xp.concatenate([(curve[k : k + 1] - float(nominal.thrust_curve[k])) / nominal.thrust_max
                                     for k in range(3)], 0)
        hidden = [
            mass / nominal.mass - 1.0, thrust_scale - 1.0,
            force / self.constants.disturbance_bounds[0],
            torque / self.constants.disturbance_bounds[1],
            latency[None],
            inertia_rows - 1.0, arm - 1.0, yaw / float(nominal.yaw_torque_coefficients[0]) - 1.0, curve_rows,
            rise_per_step, fall_per_step,
        ]
        return xp.concatenate([*fields, history, state_history, rotor_speed, *hidden], 0).T

    def params_info(self, copy: bool = True) -> dict[str, np.ndarray]:
        """Every env's current episode parameters and target as numpy arrays (N, ...), for `info["params"]`.

        With copy=False the arrays are the live ones, overwritten when episodes restart.
        """
        if self._params_views[0] is not self.current_starts:  # live views, made once per array
            current = self.current_starts if self.xp is np else self.current_starts.cpu().numpy()
            views = dict(starts.params_view(current).as_dict(), target=starts.field(current, "target"))
            self._params_views = (self.current_starts, views)
        info = self._params_views[1]
        if self.xp is torch and self.current_starts.device.type != "cpu":
            self._params_views = (None, {})  # copies from the device: made again next time
        return {k: v.copy() for k, v in info.items()} if copy else dict(info)
