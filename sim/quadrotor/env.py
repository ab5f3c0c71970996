"""Gymnasium environments for the Crazyflie tasks: a single MuJoCo env and batched vector envs.

Action: four normalized thrust commands in [0, 1], motors M1..M4 in the Crazyflie firmware's order;
action[i] is rotor i's commanded thrust as a fraction of the vehicle's maximum thrust
`QuadrotorParams.thrust_max`. On the Crazyflie this is `control->normalizedForces[i]` of
`controlModeForce`, scaled by thrust_max / THRUST_MAX (the firmware's 0.12 N for stock 2.1 propellers).
The simulator turns it into a rotor-speed setpoint, lags the rotor speed (first order, separate rise and
fall constants) and applies thrust quadratic in rotor speed, plus the reaction yaw torque.

Observation: see `sim.quadrotor.observation.quadrotor_layout` (`env.layout`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from sim.quadrotor.config import QuadrotorEnvConfig, make_config
from sim.quadrotor.core import QuadrotorBatch
from sim.quadrotor.model import QuadrotorParams


def _spaces(batch: QuadrotorBatch) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    observation = gym.spaces.Box(-np.inf, np.inf, shape=(batch.layout.size,), dtype=np.float32)
    action = gym.spaces.Box(0.0, 1.0, shape=(4,), dtype=np.float32)
    return observation, action


class QuadrotorEnv(gym.Env):
    """One Crazyflie in MuJoCo (one MjData) flying a task: hover, reach or figure_eight.

    Args:
        task: task name, used when `config` does not set one.
        config: a `QuadrotorEnvConfig`, or a dict of overrides of the task's defaults.
        render_mode: None or "rgb_array" (offscreen MuJoCo renderer).
        **overrides: further overrides, e.g. `vehicle="crazyflie_l2f_paper"`, `randomization={"enabled": False}`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, task: str = "hover", config: QuadrotorEnvConfig | dict | None = None,
                 render_mode: str | None = None, **overrides: Any):
        self.config = make_config(task, config, **overrides)
        self.batch = QuadrotorBatch(self.config, 1, "mujoco")
        self.observation_space, self.action_space = _spaces(self.batch)
        self.layout = self.batch.layout
        self.render_mode = render_mode
        self._renderer = None
        self.metadata = {**self.metadata, "render_fps": int(round(self.config.control_hz))}

    @property
    def model(self):
        """The MjModel (parameters of the current episode)."""
        return self.batch.physics.model

    @property
    def data(self):
        """The MjData."""
        return self.batch.physics.data

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode; `options` may set "initial_state" and "target" (see QuadrotorBatch.reset)."""
        super().reset(seed=seed)
        if seed is not None:
            self.batch.seed(seed)
        obs = self.batch.reset(options=options)
        info = {"params": {k: v[0] for k, v in self.batch.params_info().items()}, "is_success": False}
        return obs[0].astype(np.float32), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Apply a (4,) normalized thrust command for one control step."""
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (4,):
            raise ValueError(f"action must have shape (4,), got {action.shape}")
        result = self.batch.step(action[None])
        info = {
            "is_success": bool(result.is_success[0]),
            "reward_terms": {k: float(v[0]) for k, v in result.reward_terms.items()},
            "params": {k: v[0] for k, v in self.batch.params_info().items()},
        }
        return (result.observation[0].astype(np.float32), float(result.reward[0]),
                bool(result.terminated[0]), bool(result.truncated[0]), info)

    def render(self) -> np.ndarray | None:
        """An RGB frame from a camera tracking the vehicle, if render_mode is "rgb_array"."""
        if self.render_mode != "rgb_array":
            return None
        import mujoco

        from sim.rendering import offscreen_renderer

        if self._renderer is None:
            self._renderer = offscreen_renderer(self.model, 480, 640)
            self._camera = mujoco.MjvCamera()
            self._camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            self._camera.trackbodyid = 1
            self._camera.distance, self._camera.elevation = 0.6, -25.0
        self._renderer.update_scene(self.data, self._camera)
        return self._renderer.render()

    def close(self) -> None:
        """Release the renderer."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


class QuadrotorVectorEnv(VectorEnv):
    """N Crazyflies flying a task, stepped as one batch, with same-step autoreset.

    backend "mujoco_batch": N MjData in a `mujoco.batch.Batch`, one C call per control step on `nthread`
    threads; arrays are numpy. backend "torch": rigid-body dynamics as tensors on `device` (CPU or CUDA),
    same equations as MuJoCo's; observations, rewards and flags are torch tensors on that device
    (`device=None` picks CUDA when available); `compile=True` runs each control step as one kernel (see
    `QuadrotorBatch`: a generated C++ loop on a CPU, torch.compile elsewhere).

    With `privileged=True`, `info["privileged_obs"]` (and `info["final_privileged_obs"]` where episodes
    ended) holds `QuadrotorBatch.privileged_observation` rows, for an asymmetric critic. With
    `privileged_actor=True` the observation itself is that privileged row: a teacher that knows its vehicle,
    trained in simulation to be distilled into a deployable policy (`robo_rl.distill`), never exported.
    `autoreset` (default: on the torch backend) restarts finished episodes inside the step's kernel rather
    than from the host afterwards; both start the same episodes (see `episode_starts`).

    When an episode ends, `step` returns the first observation of the next one and puts the last one in
    `info["final_obs"]` (with `info["_final_obs"]` marking those envs; other rows are unspecified); `info["params"]` appears at reset
    and on steps where some env restarted, with the current parameters of every env (on steps, the live
    arrays: copy them to keep them).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task: str = "hover", num_envs: int = 64, backend: str = "mujoco_batch",
                 config: QuadrotorEnvConfig | dict | None = None, *, nthread: int = 0,
                 device: str | torch.device | None = None, dtype: torch.dtype = torch.float32,
                 compile: bool | str = False, privileged: bool = False, autoreset: bool | None = None,
                 privileged_actor: bool = False, **overrides: Any):
        self.config = make_config(task, config, **overrides)
        self.privileged_actor = bool(privileged_actor)
        privileged = bool(privileged) or self.privileged_actor
        self.privileged = privileged
        if device is None:  # the MuJoCo backends step on the CPU
            device = "cuda" if torch.cuda.is_available() and backend == "torch" else "cpu"
        if autoreset is None:
            autoreset = backend == "torch"
        self.batch = QuadrotorBatch(self.config, num_envs, backend, nthread=nthread, device=device, dtype=dtype,
                                    compile=compile, autoreset=autoreset, privileged=privileged)
        self.num_envs = num_envs
        self.backend = backend
        self.layout = self.batch.layout
        self.privileged_size = self.batch.privileged_size
        self.single_observation_space, self.single_action_space = _spaces(self.batch)
        if self.privileged_actor:
            self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (self.privileged_size,), np.float32)
        # the command that holds the nominal vehicle in the air: where a policy should start from
        self.nominal_action = np.full(4, self.batch.params.hover_command, dtype=np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self._np_dtype = np.float32

    def description(self) -> dict[str, Any]:
        """What a deployment target needs to know about this env, JSON-ready: the kind of robot and task, the
        task's config, the nominal
        vehicle's parameters, control rate, observation layout and the meaning of the action."""
        params = self.batch.params
        return {
            "robot": "quadrotor",
            "task": self.config.task,
            "control_hz": self.config.control_hz,
            "config": jsonable(dataclasses.asdict(self.config)),
            "vehicle_parameters": vehicle_parameters(params),
            "observation_layout": self.layout.to_dict(),
            # what on-board glue needs beyond the layout (firmware/crazyflie reads them from policy_layout.h)
            "deployment_constants": {"thrust_max_newton": params.thrust_max, "hover_command": params.hover_command,
                                     "action_history": self.config.action_history,
                                     "max_position_error_m": self.config.max_position_error,
                                     "position_error_limit_m": self.config.position_error_limit},
            "action_layout": [
                {"name": f"m{i}_thrust", "size": 1, "unit": "fraction of thrust_max",
                 "description": f"motor M{i} commanded thrust (crazyflie-firmware control_t.normalizedForces[{i - 1}] "
                                "with controlMode = controlModeForce, scaled by thrust_max / THRUST_MAX)"}
                for i in range(1, 5)
            ],
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset every env; `options` as for QuadrotorBatch.reset (arrays may have a leading env axis)."""
        obs, info = self._reset(seed, options)
        return (info["privileged_obs"], info) if self.privileged_actor else (obs, info)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Step every env with actions (N, 4); finished envs restart in the same call."""
        obs, reward, terminated, truncated, info = self._step(actions)
        if self.privileged_actor:
            obs = info["privileged_obs"]
            if "final_obs" in info:
                info["final_obs"] = info["final_privileged_obs"]
        return obs, reward, terminated, truncated, info

    def _reset(self, seed: int | None, options: dict | None) -> tuple[Any, dict]:
        if seed is not None:
            self.batch.seed(seed)
        obs = self.batch.reset(options=options)
        info: dict[str, Any] = {"params": self.batch.params_info()}
        if self.privileged:
            info["privileged_obs"] = self._out(self.batch.privileged_observation())
        return self._out(obs), info

    def _step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        result = self.batch.step(actions)
        info: dict[str, Any] = {"is_success": result.is_success, "reward_terms": result.reward_terms}
        obs = result.observation
        if result.final_observation is not None:  # restarted inside the step
            if result.any_episode_ended():
                info.update(final_obs=result.final_observation, _final_obs=_numpy(result.episode_ended()))
                info["params"] = self.batch.params_info(copy=False)
                if self.privileged:
                    info["final_privileged_obs"] = result.final_privileged_observation
            if self.privileged:
                info["privileged_obs"] = result.privileged_observation
            return obs, result.reward, result.terminated, result.truncated, info
        privileged = self.batch.privileged_observation() if self.privileged else None
        done = result.episode_ended()
        done_ids = np.flatnonzero(_numpy(done))
        if len(done_ids):
            rows = torch.as_tensor(done_ids, device=obs.device) if self.batch.xp is torch else done_ids
            final_obs = torch.empty_like(obs) if self.batch.xp is torch else np.empty_like(obs)
            final_obs[rows] = obs[rows]
            info["final_obs"] = self._out(final_obs)
            info["_final_obs"] = _numpy(done)
            obs[rows] = self.batch.reset(done_ids)
            info["params"] = self.batch.params_info(copy=False)
            if privileged is not None:
                info["final_privileged_obs"] = self._out(privileged.clone() if self.batch.xp is torch else privileged.copy())
                privileged[rows] = self.batch.privileged_observation(done_ids)
        if privileged is not None:
            info["privileged_obs"] = self._out(privileged)
        return self._out(obs), result.reward, result.terminated, result.truncated, info

    def _out(self, obs: Any) -> Any:
        if self.batch.xp is torch:
            return obs
        with np.errstate(over="ignore"):  # a diverged final state may exceed float32 (as inf)
            return obs.astype(self._np_dtype)


def _numpy(array: Any) -> np.ndarray:
    return array.numpy(force=True) if isinstance(array, torch.Tensor) else np.asarray(array)


def vehicle_parameters(params: QuadrotorParams) -> dict[str, Any]:
    """A compiled vehicle's parameters, JSON-ready, with its maximum thrust per rotor and hover command."""
    return {**jsonable(dataclasses.asdict(params)), "thrust_max": params.thrust_max,
            "hover_command": params.hover_command}


def jsonable(value: Any) -> Any:
    """numpy arrays and scalars, tuples and nested dicts as plain JSON types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value
