"""The quadrotor task on a batch of N vehicles, independent of the physics backend.

`QuadrotorBatch` owns everything between the policy and the rigid body: action latency, the rotor model,
the reference, observation (with noise), the named reward terms, termination, truncation and success.
It is written once for numpy and torch arrays (`xp`), so the single MuJoCo env, the MuJoCo batch and
the torch batch share the same task semantics; only `physics` differs.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping

import numpy as np
import torch

from sim.errors import ConfigError
from sim.noise import NoiseTable
from sim.quadrotor import motor, native_step
from sim.quadrotor.arrays import ArrayBackend
from sim.quadrotor.autoreset import InStepRestart
from sim.quadrotor.privileged import PrivilegedObservation
from sim.quadrotor.config import QuadrotorEnvConfig, RandomizationConfig, vehicle_from_config
from sim.quadrotor.model import QuadrotorParams, load_model, place_floor, thrust_to_weight
from sim.quadrotor.observation import STATE_HISTORY_FIELDS, STATE_HISTORY_SIZE, limited_position_error, quadrotor_layout
from sim.quadrotor.physics import MujocoBatchPhysics, MujocoSinglePhysics, TorchPhysics
from sim.quadrotor import episode_starts as starts
from sim.quadrotor.randomization import EpisodeParams, at_difficulty, nominal_params
from sim.quadrotor.rotations import quat_to_matrix
from sim.kernel_expr import ArrayMath
from sim.quadrotor.tasks import StepValues, task_named
from sim.validation import check_batch_size

BACKENDS = ("mujoco", "mujoco_batch", "torch")


@dataclasses.dataclass(frozen=True)
class StepConstants:
    """The numbers a control step is compiled with (Python floats, not arrays: constants of the torch path's
    compiled transition and of the native step's generated header)."""

    thrust_curve: tuple[float, float, float]  # the nominal command-to-thrust curve's coefficients
    hover_command: float  # the nominal vehicle's hover thrust, a fraction of thrust_max
    hover_rotor_speed: float
    command_max: float  # what the motors get for an action, as the flight firmware limits it (motor.command_limits)
    command_cutoff: float
    reward_scales: dict[str, float]  # the nonzero ones
    success_window_steps: int
    max_latency: int  # control steps of action latency the batch can hold
    disturbance_bounds: tuple[float, float]  # what the privileged observation divides disturbances by


@dataclasses.dataclass
class StepResult:
    """Arrays (N, ...) of one control step.

    With autoreset, `observation` is what the policy sees next: where an episode ended, the first
    observation of the one that restarted; the ended episode's last observation is in `final_observation`
    (rows of envs that did not finish are unspecified there).
    """

    observation: Any
    reward: Any
    terminated: Any
    truncated: Any
    is_success: Any
    reward_terms: Mapping[str, Any]  # name -> (N,) values
    final_observation: Any = None  # with autoreset: last observations of the episodes that ended
    privileged_observation: Any = None  # with privileged=True and autoreset: of the state after the restart
    final_privileged_observation: Any = None  # ... and of the ended episodes' last states (their rows only)
    any_done: bool | None = None  # whether some episode ended, where the step knows it without a reduction
    ended: Any = None  # terminated | truncated, where the step made it (N,)

    def any_episode_ended(self) -> bool:
        """Whether some episode ended in this step: the step's own report where it made one, else from the flags."""
        if self.any_done is not None:
            return self.any_done
        return bool(self.episode_ended().any())

    def episode_ended(self) -> Any:
        """terminated | truncated (N,): the step's own where it made it."""
        return self.ended if self.ended is not None else self.terminated | self.truncated


class QuadrotorBatch(InStepRestart, PrivilegedObservation):
    """N quadrotor episodes of one task on one physics backend ("mujoco", "mujoco_batch" or "torch").

    The start of each episode is a function of the seed, the env and the episode's index
    (`episode_starts.draw`), so with `autoreset=True` (torch backend only) `step` restarts finished episodes
    inside the same kernel, from the same starts as `reset` would give them, and returns the ended
    episodes' last observations in `StepResult.final_observation`. With `privileged=True` that step also
    returns the privileged observations before and after the restart.

    `compile` runs each torch control step as one kernel: "native" is a generated C++ loop over vehicles
    (`sim.quadrotor.native_step`; float32 on a CPU, built with g++), "inductor" is torch.compile (any
    device), True picks "native" where it can run (and falls back, with a warning, if the kernel does not
    build) and "inductor" elsewhere; False steps eagerly.
    """

    def __init__(self, config: QuadrotorEnvConfig, num_envs: int, backend: str = "mujoco", *,
                 nthread: int = 0, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                 seed: int | None = None, compile: bool | str = False, autoreset: bool = False,
                 privileged: bool = False):
        check_batch_size(num_envs, nthread)
        _check_arguments(backend, num_envs, autoreset, device, dtype, compile)
        self.autoreset = autoreset
        self.privileged = privileged
        self.num_envs = num_envs
        self.model = load_model(vehicle_from_config(config))
        self.params = QuadrotorParams.from_model(self.model)
        full = config.randomization
        # the ranges as drawn at the configured difficulty (every path and the native step read these)
        config = dataclasses.replace(config, randomization=at_difficulty(config.randomization, self.params))
        self.config = config
        self.constants = step_constants(config, self.params, full)
        self.task = task_named(config.task)
        substeps = config.control_dt / self.params.timestep
        if abs(substeps - round(substeps)) > 1e-6 or round(substeps) < 1:
            raise ConfigError(
                f"control_hz={config.control_hz} must divide the physics rate {1 / self.params.timestep:g} Hz"
            )
        self.substeps = int(round(substeps))
        self.layout = quadrotor_layout(config.action_history, config.state_history)
        self.compile = self._compile_mode(compile, backend, device, dtype)
        # the native step reads the arrays the batch keeps in place: they are made in its kernel's layout
        allocate_rows = native_step.row_allocator(device, dtype) if self.compile == "native" else None
        if backend != "torch" and config.floor_height is not None:
            place_floor(self.model, config.floor_height)
        if backend == "mujoco":
            self.physics: Any = MujocoSinglePhysics(self.model)
        elif backend == "mujoco_batch":
            # Episodes end below min_altitude; if no geom can reach the floor before that, contacts
            # cannot occur during an episode and their detection is skipped (the torch path has none).
            contacts = config.min_altitude <= self.params.reach or config.floor_height is not None
            self.physics = MujocoBatchPhysics(self.model, num_envs, nthread, contacts=contacts)
        else:
            self.physics = TorchPhysics(self.params, num_envs, device, dtype, allocate_rows, config.floor_height)
        self.xp = self.physics.xp
        self.arrays = ArrayBackend(self.xp, device if self.xp is torch else None, dtype, allocate_rows)
        self.noise, self.noise_std = self._observation_noise(allocate_rows)
        self.episode = self.arrays.index(np.full(num_envs, -1))  # index of each env's current episode
        self._env_ids = self.arrays.arange(num_envs)
        self._has_reset = False
        self.seed(seed)
        # every env's current start, env-major (N, START_SIZE) float64 (params_info reads it): the native
        # step writes a restarted env's start as one contiguous row (feature-major, that is ~37 scattered
        # cache lines per restart, and the step ran 1.2x slower at 8192 envs)
        zeros = np.zeros((num_envs, 3))
        current = starts.pack(nominal_params(self.params, num_envs), zeros,
                              np.tile([1.0, 0.0, 0.0, 0.0], (num_envs, 1)), zeros, zeros, zeros)
        self.current_starts = self.arrays.float64(current)
        self._params_views: tuple[Any, dict[str, np.ndarray]] = (None, {})  # params_info's arrays, by array
        self._allocate_task_state()
        self.native: native_step.NativeStep | None = None
        if self.compile == "native":
            try:
                self.native = native_step.NativeStep(self)
            except native_step.BuildError as error:
                if compile == "native":
                    raise
                warnings.warn(f"{error}\nstepping through torch.compile instead", RuntimeWarning, stacklevel=2)
                self.compile = "inductor"
        if self.compile == "inductor":
            # One fused loop over vehicles per control step (seconds to compile the first time).
            self._transition = torch.compile(self._transition, dynamic=False)

    def _observation_noise(self, allocate_rows: Any) -> tuple[NoiseTable | None, Any]:
        """The noise table and per-field standard deviations (18, 1) of the observation, or (None, None)."""
        noise = self.config.randomization.observation_noise
        stds = np.repeat([noise.position, noise.orientation, noise.velocity, noise.angular_velocity], [3, 9, 3, 3])
        if not (self.config.randomization.enabled and stds.any()):
            return None, None
        if self.xp is torch:
            table = NoiseTable(18, self.num_envs, device=self.physics.device, dtype=self.physics.dtype,
                               allocate_rows=allocate_rows)
        else:
            table = NoiseTable(18, self.num_envs)
        return table, self.arrays.array(stds[:, None])

    def _allocate_task_state(self) -> None:
        """The per-env task state, feature-major like the physics state: (components, N)."""
        n, hover, config, array = self.num_envs, self.params.hover_command, self.config, self.arrays.array
        self.targets = array(np.zeros((3, n)))
        self.steps = array(np.zeros(n))  # control steps since reset, as float for xp arithmetic
        self.rotor_speed = array(np.full((4, n), self.params.hover_rotor_speed))
        self.history = array(np.full((4 * config.action_history, n), hover))  # newest first
        self.pending = array(np.full((self.constants.max_latency + 1, 4, n), hover))  # commands, newest first
        self.previous_action = array(np.full((4, n), hover))
        # the observed velocity errors and body rates of past steps, newest first, and of the last observation
        self.state_history = array(np.zeros((STATE_HISTORY_SIZE * config.state_history, n)))
        self.last_observed = array(np.zeros((STATE_HISTORY_SIZE, n)))
        self.success_count = array(np.zeros(n))
        self.latency = self.arrays.index(np.zeros(n, dtype=np.int64))
        self.thrust_scale = array(np.ones((4, n)))
        self.thrust_curve = array(np.tile(self.params.thrust_curve[:, None], (1, n)))  # the plant's, per env
        self.decay_rise = array(np.ones(n))
        self.decay_fall = array(np.ones(n))

    @staticmethod
    def _compile_mode(compile: bool | str, backend: str, device: str | torch.device, dtype: torch.dtype) -> str | None:
        """"native", "inductor" or None (eager) for the `compile` argument ("native" where it cannot run
        is refused by `NativeStep`)."""
        if compile not in (False, True, "native", "inductor"):
            raise ConfigError(f"compile must be true, false, 'native' or 'inductor', got {compile!r}")
        if compile is False or backend != "torch":
            return None
        if compile is True:
            return "native" if native_step.available(device, dtype) else "inductor"
        return compile

    def seed(self, seed: int | None) -> None:
        """Reseed the episode starts (and count episodes from 0 again) and the observation noise; ConfigError for a
        seed that is not a whole number >= 0 (1.5 and "a" were NumPy's TypeError about SeedSequence)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ConfigError(f"seed must be a whole number >= 0 or None, got {seed!r}")
        self.rng = np.random.default_rng(seed)
        self.seed_key = int(self.rng.integers(0, 2**63 - 1))
        # the key as the step's kernels read it: a tensor, so that a new seed recompiles nothing
        self.start_key = self.arrays.index([self.seed_key]) if self.xp is torch else self.seed_key
        self.episode[...] = -1
        if self.noise is not None:
            self.noise.seed(self.rng)

    # ------------------------------------------------------------------ reset
    def reset(self, ids: np.ndarray | None = None, options: Mapping[str, Any] | None = None) -> Any:
        """Start new episodes in envs `ids` (all if None) and return their first observations (len(ids), obs_dim).

        options: "initial_state" {position, quaternion, velocity, angular_velocity} arrays (n, k) or (k,)
        to start from a given state; "target" (3,) or (n, 3) to fix the target; "params" {name: array} to
        set episode parameters (fields of `EpisodeParams`, (n, k), (k,) or scalars) instead of drawing them.
        """
        ids = np.arange(self.num_envs) if ids is None else np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n == 0:
            return self.observe(ids, restart=True)
        options = dict(options or {})
        unknown = set(options) - {"initial_state", "target", "params"}
        if unknown:
            raise ConfigError(f"unknown reset options {sorted(unknown)}; valid: initial_state, target, params")
        columns = self.arrays.index(ids)
        # the episodes' numbers and the reset flag change only once the options are accepted: a refused reset
        # changed the next draws, and a refused first one let step() run on states never set
        episodes = np.asarray(self.episode[columns].cpu() if self.xp is torch else self.episode[columns]) + 1
        start = starts.draw(np, self.seed_key, ids, episodes, self.params, self.config).T.copy()  # rows (n, START_SIZE)
        if "initial_state" in options:
            for name, value in zip(starts.START_FIELDS[:4], _explicit_state(options["initial_state"], n, self.config.center)):
                starts.field(start, name[0])[:] = value
        if "target" in options:
            starts.field(start, "target")[:] = _finite_rows(options["target"], n, 3, "reset options['target']")
        if "initial_state" in options or "target" in options:
            self._check_inside_bounds(start)
        if "params" in options:
            self._set_params(start, options["params"])
            _check_physical(start, self.params.gravity)
        self.episode[columns] += 1
        self._has_reset = True
        self.current_starts[columns] = self.arrays.float64(start)
        params = starts.params_view(start)
        pos, quat, vel, angvel, targets = (starts.field(start, name) for name, _ in starts.START_FIELDS[:5])
        self.physics.set_params(ids, params)
        self.physics.set_state(ids, pos, quat, vel, angvel)
        rise, fall = self._lag_factors(params)
        hover = self.params.hover_command
        for array, value in (  # rows (n, ...) of host values, written as columns (..., n)
            (self.targets, targets),
            (self.steps, np.zeros(n)),
            (self.rotor_speed, np.full((n, 4), self.params.hover_rotor_speed)),
            (self.history, np.full((n, 4 * self.config.action_history), hover)),
            (self.pending, np.full((n, self.constants.max_latency + 1, 4), hover)),
            (self.previous_action, np.full((n, 4), hover)),
            (self.success_count, np.zeros(n)),
            (self.latency, params.latency_steps),
            (self.thrust_scale, params.thrust_scale),
            (self.thrust_curve, params.thrust_curve),
            (self.decay_rise, rise),
            (self.decay_fall, fall),
        ):
            value = np.moveaxis(np.asarray(value), 0, -1)
            array[..., columns] = self.arrays.array(value).to(array.dtype) if self.xp is torch else value
        return self.observe(None if n == self.num_envs else ids, restart=True)

    def _check_inside_bounds(self, start: np.ndarray) -> None:
        """ConfigError where given starts (rows (n, START_SIZE)) lie where the episode ends at its first step: beyond
        max_position_error of the task's reference, below min_altitude, faster than max_speed or max_angular_speed.
        The config's starts are checked so (config.check_starts_inside_bounds); given ones were one-step episodes."""
        config = self.config
        pos, vel, angvel, targets = (starts.field(start, name) for name in ("position", "velocity", "angular_velocity",
                                                                            "target"))
        reference, _ = self.task.reference(ArrayMath(np), config, [targets[:, k] for k in range(3)], np.zeros(len(start)))
        error = float(np.max(np.abs(pos - np.stack(reference, 1))))
        if not error <= config.max_position_error:
            raise ConfigError(f"reset options: the start lies {error:.4g} m from the task's reference (the target) on an "
                              f"axis, beyond max_position_error {config.max_position_error:g} m, where episodes end")
        if not float(np.min(pos[:, 2])) >= config.min_altitude:
            raise ConfigError(f"reset options: initial_state['position'] z {float(np.min(pos[:, 2])):.4g} m lies below "
                              f"min_altitude {config.min_altitude:g} m, where episodes end")
        for name, value, limit in (("velocity", vel, config.max_speed), ("angular_velocity", angvel,
                                                                          config.max_angular_speed)):
            fastest = float(np.max(np.linalg.norm(value, axis=1)))
            if not fastest <= limit:
                raise ConfigError(f"reset options: initial_state[{name!r}] of norm {fastest:.4g} lies above "
                                  f"max_{'speed' if name == 'velocity' else 'angular_speed'} {limit:g}, where episodes end")

    def _set_params(self, start: np.ndarray, params: Mapping[str, Any]) -> None:
        """Overwrite episode parameters in starts (n, START_SIZE) with given values, checked like a config."""
        n = len(start)
        unknown = set(params) - set(starts.PARAM_NAMES)
        if unknown:
            raise ConfigError(f"unknown reset params {sorted(unknown)}; valid: {', '.join(starts.PARAM_NAMES)}")
        for name, value in params.items():
            size = starts.field(start, name).shape[1:]
            try:
                value = np.broadcast_to(np.asarray(value, dtype=np.float64), (n, *size))
            except (TypeError, ValueError) as error:
                raise ConfigError(f"reset params[{name!r}] must be a number or have shape {size} or {(n, *size)}") from error
            if not np.isfinite(value).all():
                raise ConfigError(f"reset params[{name!r}] must be finite")
            if name in _POSITIVE_PARAMS and not (value > 0).all():
                raise ConfigError(f"reset params[{name!r}] must be > 0, got {value.min():g}")
            if name in _NON_NEGATIVE_PARAMS and not (value >= 0).all():
                raise ConfigError(f"reset params[{name!r}] must be >= 0, got {value.min():g}")
            if name == "latency_steps" and not (np.all(value == np.round(value)) and value.min() >= 0
                                                and value.max() <= self.constants.max_latency):
                raise ConfigError(f"reset params['latency_steps'] must be whole steps in [0, {self.constants.max_latency}] "
                                  "(randomization.latency_steps bounds the batch's latency)")
            starts.field(start, name)[:] = value

    def _lag_factors(self, params: EpisodeParams) -> tuple[np.ndarray, np.ndarray]:
        return motor.lag_factors(np, self.params.timestep, params.motor_tau_rise, params.motor_tau_fall)

    # ------------------------------------------------------------------- step
    def step(self, action: Any) -> StepResult:
        """Advance all envs one control step with normalized thrust commands (N, 4) in [0, 1]."""
        if not self._has_reset:  # every backend: mujoco_batch stepped unseeded states and ended every episode
            raise RuntimeError("call reset() before the first step")
        action = self._check_action(action, finite=self.native is None)  # the native step checks its own
        noise = final_noise = None
        if self.native is not None:  # reads the noise table's windows itself, from their offset
            if self.noise is not None:
                offset = (self.noise.step_offset if self.autoreset else self.noise.window_offset)(self.rng)
                return self.native(action, offset)
            return self.native(action, None)
        if self.noise is not None:
            if self.autoreset:
                noise, final_noise = self.noise.step_windows(self.rng)
            else:
                noise = self.noise.window(self.rng)
        return self._transition(self._feature_major(action), noise, final_noise)

    def _transition(self, action: Any, noise: Any, final_noise: Any = None) -> StepResult:
        """One control step from feature-major actions (4, N) (see `_feature_major`); with autoreset,
        `final_noise` is the noise of the ended episodes' last observations."""
        # No host synchronization in here: on the torch path this whole method is one compiled kernel.
        xp = self.xp
        command = motor.motor_command(xp, action, self.constants.command_max, self.constants.command_cutoff)
        applied = command
        if self.constants.max_latency:
            self.pending = xp.concatenate([command[None], self.pending[:-1]], 0)
            applied = self.pending[0]
            for lag in range(1, self.constants.max_latency + 1):
                applied = xp.where(self.latency == lag, self.pending[lag], applied)
        setpoint = motor.rotor_speed_setpoint(xp, applied, self.constants.thrust_curve)
        thrust, self.rotor_speed = motor.rotor_thrust_substeps(
            xp, self.rotor_speed, setpoint, self.decay_rise, self.decay_fall, self.substeps, self.thrust_curve,
            self.thrust_scale,
        )
        self.physics.advance(thrust)
        if self.config.action_history:
            self.history = xp.concatenate([command, self.history[:-4]], 0)
        self.steps = self.steps + 1.0
        result = self._evaluate(command, final_noise if self.autoreset else noise)
        self.previous_action = command
        if self.autoreset:
            result.final_observation = result.observation
            if self.privileged:
                result.final_privileged_observation = self._privileged(None)
            result.observation = self._autoreset(result.terminated | result.truncated, noise)
            if self.privileged:
                result.privileged_observation = self._privileged(None)
        return result

    def _check_action(self, action: Any, finite: bool = True) -> Any:
        """Actions (N, 4) as an array of the backend, validated: shape and (with `finite`) finite values."""
        if self.xp is np:
            action = np.asarray(action, dtype=np.float64)
        else:
            action = torch.as_tensor(action, device=self.physics.device, dtype=self.physics.dtype)
        if tuple(action.shape) != (self.num_envs, 4):
            raise ValueError(f"action must have shape ({self.num_envs}, 4), got {tuple(action.shape)}")
        if not finite:
            return action
        if self.xp is np:
            if not np.isfinite(action).all():
                raise ValueError("action contains NaN or Inf")
            return action
        # NaN and Inf propagate into the sum (one pass instead of isfinite's two); only a non-finite sum,
        # which huge finite actions can also give, needs the exact check
        if not bool(torch.isfinite(action.sum())) and not bool(torch.isfinite(action).all()):
            raise ValueError("action contains NaN or Inf")
        return action

    def _feature_major(self, action: Any) -> Any:
        """Actions (N, 4) as a contiguous (4, N) array for `_transition`.

        Made feature-major before the (compiled) step: read transposed inside it, the (N, 4) layout makes
        torch.compile tile its loops over the 4 actions, which leaves them on one thread.
        """
        if self.xp is np:
            return np.ascontiguousarray(action.T)
        return torch.stack(action.unbind(1))  # a gather by columns: 4x faster than .T.contiguous() on a CPU

    def _evaluate(self, command: Any, noise: Any) -> StepResult:
        xp, config, task, m = self.xp, self.config, self.task, ArrayMath(self.xp)
        pos, quat, vel, angvel = self.physics.state()
        rotation = quat_to_matrix(xp, quat)
        pos_err, vel_err = self.reference_errors(pos, vel, self.targets, self.steps)
        values = StepValues(pos, vel, angvel, pos_err, vel_err, rotation[8], command, self.previous_action,
                            self._hover_commands(m))
        finite = xp.isfinite(pos).all(0) & xp.isfinite(vel).all(0) & xp.isfinite(angvel).all(0)
        if self.physics.diverged is not None:  # MuJoCo put a diverged simulation back at its initial state
            finite = finite & ~self.physics.diverged
        terminated = ~finite | task.terminated(m, values, config)
        terms = task.reward_terms(m, values, terminated, config)
        reward = xp.zeros_like(terms["alive"])
        for name, scale in self.constants.reward_scales.items():
            reward = reward + scale * terms[name]
        truncated = (self.steps >= config.episode_steps) & ~terminated
        within = task.within_success(m, values, config) & ~terminated
        self.success_count = xp.where(within, self.success_count + 1.0, xp.zeros_like(self.success_count))
        is_success = (self.success_count >= max(self.constants.success_window_steps, 1)) & ~terminated
        state = self._observed_state(pos_err, rotation, vel_err, angvel, noise)
        if self.config.state_history:  # the last observation's values enter the history
            self.state_history = xp.concatenate([self.last_observed, self.state_history[:-STATE_HISTORY_SIZE]], 0)
        self.last_observed = state[STATE_HISTORY_FIELDS]
        obs = self._assemble(state, self.history, self.state_history)
        return StepResult(obs, reward, terminated, truncated, is_success, terms)

    def _hover_commands(self, m: ArrayMath) -> list[Any]:
        """Per rotor, the command that holds each env's vehicle in the air (4 rows; motor.hover_commands)."""
        mass = self.physics.mass if self.xp is torch else starts.params_view(self.current_starts).mass
        return motor.hover_commands(m, mass, list(self.thrust_scale), list(self.thrust_curve),
                                    self.constants.thrust_curve, float(self.params.gravity))

    def tracking_errors(self) -> tuple[Any, Any]:
        """Position and velocity errors (3, N) of the current state to the task's reference (the hover target, the
        reach target, the figure-eight's moving point), unlimited and without observation noise."""
        pos, _, vel, _ = self.physics.state()
        return self.reference_errors(pos, vel, self.targets, self.steps)

    def reference_errors(self, pos: Any, vel: Any, targets: Any, steps: Any) -> tuple[Any, Any]:
        """Position and velocity errors (3, n) of `pos` and `vel` to the task's reference at control step `steps` of
        each episode."""
        xp = self.xp
        ref_pos, ref_vel = self.task.reference(ArrayMath(xp), self.config, [targets[k] for k in range(3)],
                                               steps * self.config.control_dt)
        return pos - xp.stack(ref_pos, 0), vel - xp.stack(ref_vel, 0)

    # ------------------------------------------------------------ observation
    def observe(self, ids: np.ndarray | None = None, restart: bool = False) -> Any:
        """Observations (N, obs_dim) of the current state, or only of envs `ids` (len(ids), obs_dim). With
        `restart` (an episode's first observation), the state history starts over from it."""
        rows = self._rows(ids)
        noise = None if self.noise is None else self.noise.rows(self.rng, rows)
        state = self._observed_state(*self._state_fields(rows), noise)
        if restart:
            observed = state[STATE_HISTORY_FIELDS]
            self.last_observed[:, rows] = observed
            if self.config.state_history:
                self.state_history[:, rows] = self.xp.concatenate([observed] * self.config.state_history, 0)
        return self._assemble(state, self.history[:, rows], self.state_history[:, rows])

    def _rows(self, ids: np.ndarray | None) -> Any:
        return self.arrays.arange(self.num_envs) if ids is None else self.arrays.index(ids)

    def _state_fields(self, rows: Any) -> tuple[Any, Any, Any, Any]:
        """Noise-free position error, rotation entries, velocity error and body rates (k, n) of envs `rows`
        (all if None)."""
        xp = self.xp
        pos, quat, vel, angvel = self.physics.state()
        targets, steps = self.targets, self.steps
        if rows is not None:
            pos, quat, vel, angvel, targets = (x[:, rows] for x in (pos, quat, vel, angvel, targets))
            steps = steps[rows]
        pos_err, vel_err = self.reference_errors(pos, vel, targets, steps)
        return pos_err, quat_to_matrix(xp, quat), vel_err, angvel

    def _observed_state(self, pos_err: Any, rotation: Any, vel_err: Any, angvel: Any, noise: Any) -> Any:
        """The state fields as observed, feature-major (18, n): `noise` standard normal (18, n) or None; the
        position error, noise included (as a deployment's estimate), limited to `position_error_limit`."""
        xp = self.xp
        state = xp.concatenate([pos_err, rotation, vel_err, angvel], 0)
        if noise is not None:
            state = state + noise * self.noise_std
        if self.config.position_error_limit:
            limited = limited_position_error(ArrayMath(xp), [state[k] for k in range(3)],
                                             self.config.position_error_limit)
            state = xp.concatenate([xp.stack(limited, 0), state[3:]], 0)
        return state

    def _assemble(self, state: Any, history: Any, state_history: Any) -> Any:
        """Observations (n, obs_dim), a transposed view of a feature-major array: the observed state, the action
        history and the state history (rows of n envs)."""
        parts = [state]
        if self.config.action_history:
            parts.append(history)
        if self.config.state_history:
            parts.append(state_history)
        return self.xp.concatenate(parts, 0).T if len(parts) > 1 else state.T

TORCH_DTYPES = (torch.float32, torch.float64)  # float16 loses a 2 ms step's position change of a hovering vehicle


def _check_arguments(backend: str, num_envs: int, autoreset: bool, device: Any = "cpu",
                     dtype: Any = torch.float32, compile: bool | str = False) -> None:
    """ConfigError unless the backend is known and can run `num_envs` envs (with `autoreset`), and, on the torch
    backend, `device` is a torch device this machine has and `dtype` one of TORCH_DTYPES (torch's own errors named
    neither the option nor what is allowed, and float16 stepped silently wrong physics); the MuJoCo backends take
    no device, dtype or compile mode but the defaults."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; known backends: {', '.join(BACKENDS)}")
    if backend == "mujoco" and num_envs != 1:
        raise ConfigError("the single MuJoCo backend runs exactly one env")
    if autoreset and backend != "torch":
        raise ConfigError("autoreset inside the step is implemented for the torch backend only")
    if backend != "torch":
        # the MuJoCo backends step float64 arrays on the CPU: a device, dtype or compile mode there was ignored
        ignored = {name: value for name, value, ok in (
            ("device", device, str(device) == "cpu" or (isinstance(device, torch.device) and device.type == "cpu")),
            ("dtype", dtype, dtype == torch.float32), ("compile", compile, compile is False))
            if not ok}
        if ignored:
            raise ConfigError(f"{', '.join(f'{k}={v!r}' for k, v in ignored.items())}: only the torch backend takes "
                              f"{' and '.join(ignored)}; the {backend} backend steps MuJoCo in float64 on the CPU")
        return
    if dtype not in TORCH_DTYPES:
        raise ConfigError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    try:
        placed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device={device!r} is not a torch device; give cpu, cuda or cuda:<index>") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if placed.type == "cuda" and (placed.index or 0) >= count:
        raise ConfigError(f"device={device!r}: this machine has {count} CUDA devices; give cpu"
                          + (f" or cuda:0 to cuda:{count - 1}" if count else ""))
    try:
        torch.empty(0, device=placed)
    except (RuntimeError, AssertionError) as error:  # e.g. mps on a machine without it
        raise ConfigError(f"device={device!r} cannot hold tensors here ({error}); give cpu") from None


def step_constants(config: QuadrotorEnvConfig, params: QuadrotorParams, full: RandomizationConfig) -> StepConstants:
    """The constants of `config`'s control step (its randomization at the drawn difficulty; `full` at difficulty
    1) for the nominal vehicle `params`; ConfigError if the flight firmware's thrust clamp leaves no thrust to
    hover with."""
    randomization = config.randomization
    command_max, command_cutoff = motor.command_limits(float(params.thrust_max), config.firmware_thrust_max,
                                                       config.firmware_thrust_min)
    hover_command = float(params.hover_command)
    if command_max <= hover_command:
        raise ConfigError(f"config.firmware_thrust_max={config.firmware_thrust_max:g} N cannot hover this vehicle "
                          f"(it needs more than {hover_command * float(params.thrust_max):.4g} N per motor)")
    return StepConstants(
        thrust_curve=tuple(float(c) for c in params.thrust_curve), hover_command=hover_command,
        hover_rotor_speed=float(params.hover_rotor_speed), command_max=command_max, command_cutoff=command_cutoff,
        reward_scales={k: float(v) for k, v in config.reward_scales.items() if v != 0.0},
        success_window_steps=int(round(config.success_window_seconds * config.control_hz)),
        max_latency=int(randomization.latency_steps[1]) if randomization.enabled else 0,
        # the bounds at full difficulty, so that the privileged observation's meaning does not change as a
        # curriculum raises the difficulty
        disturbance_bounds=(max(full.disturbance_force, 1e-12), max(full.disturbance_torque, 1e-12)))


# reset params that are physical magnitudes: a zero or negative one gave NaN or -inf rewards on some backends and
# ran on (MuJoCo) on others
_POSITIVE_PARAMS = ("mass", "inertia", "arm_scale")
_NON_NEGATIVE_PARAMS = ("thrust_scale", "motor_tau_rise", "motor_tau_fall")


def _finite_rows(value: Any, n: int, size: int, name: str) -> np.ndarray:
    """`value` as (n, size) finite float64 rows (given as (size,) or (n, size)); ConfigError naming `name` otherwise."""
    try:
        rows = np.broadcast_to(np.asarray(value, dtype=np.float64), (n, size)).copy()
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{name} must have shape ({size},) or ({n}, {size})") from error
    if not np.isfinite(rows).all():
        raise ConfigError(f"{name} must be finite numbers")
    return rows


def _check_physical(start: np.ndarray, gravity: float) -> None:
    """ConfigError unless every episode's parameters in `start` (n, START_SIZE) describe a vehicle that can lift
    itself (reset params may set mass, thrust curve and thrust scale apart)."""
    ratio = thrust_to_weight(starts.field(start, "thrust_curve"), starts.field(start, "mass").reshape(len(start)), gravity,
                             starts.field(start, "thrust_scale"))
    if not (ratio > 1.0).all():
        raise ConfigError(f"reset params give a vehicle of thrust-to-weight {np.min(ratio):.3g}, and <= 1 cannot lift "
                          "itself (mass, thrust_curve and thrust_scale together)")


def _explicit_state(state: Mapping[str, Any], n: int, center: Any) -> tuple[np.ndarray, ...]:
    names = {"position": 3, "quaternion": 4, "velocity": 3, "angular_velocity": 3}
    unknown = set(state) - set(names)
    if unknown:
        raise ConfigError(f"unknown initial_state keys {sorted(unknown)}; valid: {', '.join(names)}")
    defaults = {"position": tuple(center), "quaternion": (1.0, 0.0, 0.0, 0.0),
                "velocity": (0.0,) * 3, "angular_velocity": (0.0,) * 3}
    out = [_finite_rows(state.get(name, defaults[name]), n, size, f"initial_state[{name!r}]")
           for name, size in names.items()]
    norm = np.linalg.norm(out[1], axis=1, keepdims=True)
    if not (norm > 1e-6).all():  # no rotation: MuJoCo restarted from its default pose and the episode went on
        raise ConfigError("initial_state['quaternion'] must be a rotation (w, x, y, z), not zero")
    out[1] /= norm
    return tuple(out)
