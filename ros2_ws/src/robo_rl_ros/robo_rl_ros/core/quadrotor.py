"""One control tick of a quadrotor policy, independent of ROS: latest state in, command out.

Each tick either flies the policy (observation -> ONNX -> safety filter -> setpoint) or, when the state
is older than the timeout, invalid (NaN/Inf, not a rotation, faster than the training's termination
bounds) or outside the geofence, or when the policy's action or the command is not finite, stops: the
tick returns a stop (after flight a level descent to zero thrust, before any flight zero thrust), never
the last policy command again and never a non-finite number.

The policy takes over (first flight, or again during a descent, with fresh action and state histories) only on a
steady state stream: `RESUME_STATES` valid states in a row, each within `state_timeout` of the one before. It
observes in the frame of the heading it took over at (core.observation), so a vehicle facing any way starts as a
training episode facing +x does, and it holds that heading; the training's box about the target is held in that
frame too.
A source slower than the timeout (crazyswarm2 logs pose and odometry at 10 Hz unless told otherwise) never
takes off, instead of flying 50 ms and descending 50 ms in turn. Once a descent has run its course (the motors
at zero: landed), nothing flies again until `rearm()` (the node's `~/rearm` service): a vehicle on the floor
does not take off by itself when its state comes back.

The policy steps once per new state, as in training (one observation, one action, one history entry):
a tick that finds no state newer than the last one repeats the last command, and the watchdog bounds
for how long. Running the policy again on the same state would push actions into the history that the
vehicle never flew, and a late state source (a loaded computer, dropped mocap frames) would then
change what the policy sees.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.crazyflie import (BACKENDS, DEFAULT_BACKEND, DESCENT_START, MAX_YAW_RATE_DEG, PWM_MAX,
                                        STOP_COMMAND, AttitudeSetpoint, LegacyCommand, VehicleModel,
                                        attitude_setpoint, descent_command, hover_command, legacy_command)
from robo_rl_ros.core.inference import OnnxPolicy
from robo_rl_ros.core.observation import ActionHistory, QuadrotorObservation, StateHistory, VehicleState
from robo_rl_ros.core.rotations import all_finite, floats, heading, turned_by_minus
from robo_rl_ros.core.safety import Geofence, SafetyFilter
from robo_rl_ros.core.watchdog import StateWatchdog


ZERO_VELOCITY = (0.0, 0.0, 0.0)  # the hover reference's velocity
# Where the bundle's env_config names none: the hover task's termination bounds (sim/quadrotor config
# max_speed, max_angular_speed; 35 rad/s is also the Crazyflie gyro's 2000 deg/s full scale)
DEFAULT_MAX_SPEED, DEFAULT_MAX_ANGULAR_SPEED = 10.0, 35.0  # [m/s], [rad/s]
DEFAULT_MAX_POSITION_ERROR = 0.6  # [m] per axis (sim/quadrotor config max_position_error)
RESUME_STATES = 5  # valid states in a row, each within the state timeout of the last, before the policy takes over


@dataclasses.dataclass(frozen=True)
class QuadrotorSettings:
    """What a deployment chooses (node parameters)."""

    target_position: tuple[float, float, float]
    state_timeout: float = 0.05  # [s]
    max_action_delta: float = 1.0  # per tick, fraction of thrust_max (1: no limit on [0, 1] actions)
    geofence_half_extent: float = 0.6  # [m] around the target; the hover task's arena
    attitude_kp: float = 6.0  # the firmware attitude loop's gain (see core.crazyflie)
    max_tilt_deg: float = 60.0
    descent_seconds: float = 2.0
    rate_lead: float = 0.75  # fraction of the policy's body rates led into cmd_vel_legacy (see core.crazyflie)
    backend: str = DEFAULT_BACKEND  # crazyswarm2's backend, which decides the sign of linear.x (core.crazyflie)
    max_yaw_rate_deg: float = MAX_YAW_RATE_DEG  # bound of cmd_vel_legacy's angular.z


class TickResult(NamedTuple):
    """What one tick decided."""

    flying: bool  # False: the stop behaviour
    reason: str  # why it stopped ("" while flying)
    action: np.ndarray  # motor thrust fractions commanded (zeros while stopped)
    setpoint: AttitudeSetpoint | None  # the attitude setpoint for the action (None while stopped)
    legacy: LegacyCommand  # the cmd_vel_legacy fields
    just_stopped: bool  # the first stop tick after flying (or at start)
    observation: np.ndarray | None
    state: VehicleState | None


class QuadrotorPolicyController:
    """A bundle's policy with observation assembly, safety filter, watchdog and geofence."""

    def __init__(self, bundle: PolicyBundle, settings: QuadrotorSettings):
        if not bundle.is_quadrotor or bundle.action_size != 4:
            raise BundleError(f"{bundle.directory}: policy.json has robot {bundle.robot!r} with {bundle.action_size} "
                              "actions; this node flies robot 'quadrotor' with 4 motor thrusts")
        if settings.backend not in BACKENDS:
            raise ValueError(f"the crazyswarm2 backend must be one of {BACKENDS}, got {settings.backend!r}")
        self.bundle, self.settings = bundle, settings
        self.dt = 1.0 / bundle.control_hz
        self.policy = OnnxPolicy(bundle)
        self.observation = QuadrotorObservation(bundle)
        self.vehicle = VehicleModel.from_bundle(bundle)  # the deployment vehicle: actions are its thrust fractions
        hover = np.full(4, hover_command(bundle, self.vehicle))
        self.history = ActionHistory(self.observation.history_length, 4, hover)
        self.state_history = StateHistory(self.observation.state_history_length)
        self.filter = SafetyFilter(bundle.action_low, bundle.action_high, bundle.safe_action, settings.max_action_delta)
        self.watchdog = StateWatchdog(settings.state_timeout)
        self.target = np.asarray(settings.target_position, dtype=np.float64)
        self.geofence = Geofence.around(self.target, settings.geofence_half_extent)
        # the training's episodes ended beyond these: the policy never acted there (and rates of 1e160 rad/s,
        # finite in a message, overflow the one-period prediction)
        self.max_speed = _positive_bound(bundle, "max_speed", DEFAULT_MAX_SPEED)
        self.max_angular_speed = _positive_bound(bundle, "max_angular_speed", DEFAULT_MAX_ANGULAR_SPEED)
        # a fence wider than the training's box lets the policy fly where its episodes had ended
        self.max_position_error = max_error = _positive_bound(bundle, "max_position_error", DEFAULT_MAX_POSITION_ERROR)
        if settings.geofence_half_extent > max_error:
            raise ValueError(f"geofence_half_extent {settings.geofence_half_extent:g} m exceeds the training's "
                             f"max_position_error {max_error:g} m (episodes ended beyond it: the policy never flew "
                             f"there); allowed: (0, {max_error:g}] m")
        self._state: VehicleState | None = None
        self._invalid_reason = "no state received yet"
        self._flying = False
        self._has_flown = False
        self._stopped_at: float | None = None
        self._new_state = False
        self._last_flying: TickResult | None = None
        self._descent_start = DESCENT_START  # of hover thrust, set where a stop begins
        self._steady = 0  # valid states in a row, each within the timeout of the one before
        self._last_valid_at: float | None = None
        self._last_interval: float | None = None  # between the last two valid states [s]
        self._landed = False
        # [rad] the heading the policy took over at: it observes in this frame. Training starts face within 90
        # degrees of +x; make train's policy flew 0% of level starts turned 180 degrees in the world frame
        # (bench/start_heading.py).
        self._heading = 0.0

    def update_state(self, now: float, state: VehicleState) -> bool:
        """Store the latest state (received at `now`); False, and nothing flies on it, if it is invalid."""
        if not state.is_finite():
            return self._invalidate("state contains NaN or Inf")
        speed, rate = (math.hypot(*floats(v)) for v in (state.velocity, state.angular_velocity))
        if not speed <= self.max_speed:
            return self._invalidate(f"speed {speed:.3g} m/s exceeds the training's {self.max_speed:g} m/s")
        if not rate <= self.max_angular_speed:
            return self._invalidate(f"body rate {rate:.3g} rad/s exceeds the training's "
                                    f"{self.max_angular_speed:g} rad/s")
        quaternion = floats(state.quaternion)
        norm = math.sqrt(sum(c * c for c in quaternion))
        if abs(norm - 1.0) > 0.01:
            return self._invalidate("orientation quaternion is not unit length")
        self._state = state._replace(quaternion=np.array([c / norm for c in quaternion]))
        self._invalid_reason = ""
        self._new_state = True
        self.watchdog.feed(now)
        if self._last_valid_at is not None:
            self._last_interval = now - self._last_valid_at
        steady = self._last_interval is not None and self._last_interval <= self.settings.state_timeout
        self._steady = self._steady + 1 if steady else 1
        self._last_valid_at = now
        return True

    def _invalidate(self, reason: str) -> bool:
        self._state, self._invalid_reason = None, reason
        self.watchdog.clear()
        self._steady, self._last_valid_at, self._last_interval = 0, None, None
        return False

    @property
    def take_over_heading_deg(self) -> float:
        """The heading [deg from +x] the policy last took over at: it observes in that frame and holds it."""
        return math.degrees(self._heading)

    @property
    def landed(self) -> bool:
        """Whether a descent has run its course: nothing flies until `rearm()`."""
        return self._landed

    def rearm(self, now: float) -> str:
        """Let the policy take over again after a landing (on a steady state stream, as at the first flight);
        "" when done at `now`, else why not (it is flying, or has not landed)."""
        self._check_landed(now)
        if self._flying:
            return "the policy is flying"
        if not self._landed:
            return "not landed: the policy takes over on a steady state stream without a re-arm"
        self._landed = False
        # [rad] the heading the policy took over at: it observes in this frame. Training starts face within 90
        # degrees of +x; make train's policy flew 0% of level starts turned 180 degrees in the world frame
        # (bench/start_heading.py).
        self._heading = 0.0
        self._has_flown = False  # what follows is a first flight: no descent thrust before it
        self._stopped_at = None
        return ""

    def tick(self, now: float) -> TickResult:
        """Decide this tick's command from the latest state."""
        reason = self._stop_reason(now)
        if reason:
            return self._stop(now, reason)
        state = self._state
        assert state is not None
        if self._flying and not self._new_state and self._last_flying is not None:
            return self._last_flying
        self._new_state = False
        if not self._flying:  # resuming: the policy starts as at an episode start, facing +x in its frame
            self.history.reset()
            self.state_history.reset()
            self.filter.reset()
            self._heading = heading(state.quaternion)
        obs = self.observation.build(state, self.target, ZERO_VELOCITY, self.history, self.state_history,
                                     self._heading)
        self.state_history.push(self.observation.observed(obs))  # what the next observation's history holds
        filtered = self.filter(self.policy(obs))
        if filtered.rejected:  # never fly a substitute as if it were the policy's action
            return self._stop(now, "the policy's action is not finite")
        action = filtered.action
        self.history.push(action)
        setpoint = attitude_setpoint(self.vehicle, state.quaternion, state.angular_velocity, action, self.dt)
        s = self.settings
        legacy = legacy_command(setpoint, self.vehicle, s.attitude_kp, s.max_tilt_deg, s.rate_lead, s.backend,
                                s.max_yaw_rate_deg)
        result = TickResult(True, "", action, setpoint, legacy, False, obs, state)
        if not command_is_finite(result):  # the last guard: whatever went wrong above, no NaN leaves this tick
            return self._stop(now, "the command is not finite")
        self._flying = self._has_flown = True  # (only now: a tick that stopped above has not flown)
        self._last_flying = result
        return result

    def _stop(self, now: float, reason: str) -> TickResult:
        """The stop behaviour: after flight a level descent to zero thrust, before any flight zero thrust."""
        just_stopped = self._flying or self._stopped_at is None
        if just_stopped:
            self._stopped_at = now
            # the descent starts no higher than the last command: a vehicle on the floor at idle thrust that lost
            # its state was spun up to 0.9 of hover
            last = self._last_flying.legacy.thrust_pwm if self._last_flying is not None else None
            hover = self.vehicle.hover_fraction * PWM_MAX
            self._descent_start = DESCENT_START if last is None else min(DESCENT_START, max(0.0, last) / hover)
        self._flying = False
        self._last_flying = None
        self._check_landed(now)
        legacy = (descent_command(self.vehicle, now - self._stopped_at, self.settings.descent_seconds,
                                  self._descent_start) if self._has_flown else STOP_COMMAND)
        return TickResult(False, reason, np.zeros(4), None, legacy, just_stopped, None, self._state)

    def refuse(self, now: float, reason: str) -> TickResult:
        """Stop this tick for a reason found outside the controller (the node's last check before publishing);
        the next tick with a good state flies again."""
        return self._stop(now, reason)

    def _check_landed(self, now: float) -> None:
        """A stop's descent is over by `now` (whether or not a tick saw it end): the vehicle is down."""
        if self._has_flown and not self._flying and self._stopped_at is not None and \
                now - self._stopped_at >= self.settings.descent_seconds:
            self._landed = True

    def _stop_reason(self, now: float) -> str:
        self._check_landed(now)
        if self._landed:
            return "landed after a stop: call ~/rearm to fly again"
        if self._state is None:
            return self._invalid_reason or "no state"
        age = self.watchdog.age(now)
        if age > self.settings.state_timeout:
            return f"state is {age * 1e3:.0f} ms old (timeout {self.settings.state_timeout * 1e3:.0f} ms)"
        if not self.geofence.contains(self._state.position):
            return f"position {np.round(self._state.position, 3).tolist()} is outside the geofence"
        # the training's box about the target, in the frame the policy observes in (a take-over's: the current one)
        frame = self._heading if self._flying else heading(self._state.quaternion)
        error = turned_by_minus(floats(self._state.position - self.target), math.cos(frame), math.sin(frame))
        if max(abs(e) for e in error) > self.max_position_error:
            return (f"position error {[round(e, 3) for e in error]} m in the frame of heading "
                    f"{math.degrees(frame):.0f} deg exceeds the training's max_position_error "
                    f"{self.max_position_error:g} m per axis")
        if not self._flying and self._steady < RESUME_STATES:
            interval = self._last_interval
            if interval is not None and interval > self.settings.state_timeout:
                return (f"states come {interval * 1e3:.0f} ms apart, more than state_timeout "
                        f"{self.settings.state_timeout * 1e3:.0f} ms: the policy flies at {1 / self.dt:g} Hz "
                        "(crazyswarm2 logs pose and odom at 10 Hz unless its firmware_logging frequency is raised)")
            return f"waiting for a steady state stream ({RESUME_STATES} states in a row, each within state_timeout)"
        return ""


def command_is_finite(result: TickResult) -> bool:
    """Whether everything a tick may publish (cmd_vel_legacy fields, motor thrusts, the full-state setpoint)
    is a finite number."""
    values = list(result.legacy) + floats(result.action)
    if result.setpoint is not None:
        values += floats(result.setpoint.rotation.reshape(-1)) + floats(result.setpoint.body_rates)
        values.append(float(result.setpoint.thrust))
    return all_finite(values)


def _positive_bound(bundle: PolicyBundle, name: str, default: float) -> float:
    """The bundle's `training.env_config[name]`, a positive number, or `default` where it names none."""
    value = bundle.env_config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise BundleError(f"policy.json training.env_config.{name} is {value!r}; allowed: a positive number")
    return float(value)
