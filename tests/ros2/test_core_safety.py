"""Safety filter, geofence, watchdog and the quadrotor tick's stop-and-resume behaviour."""

import math

import numpy as np
import pytest

from robo_rl_ros.core.estimation import PoseDifferentiator
from robo_rl_ros.core.observation import VehicleState
from robo_rl_ros.core.quadrotor import RESUME_STATES, QuadrotorPolicyController, QuadrotorSettings
from robo_rl_ros.core.rotations import quat_to_matrix, rotation_exp, matrix_to_quat
from robo_rl_ros.core.safety import Geofence, SafetyFilter
from robo_rl_ros.core.schedule import TickSchedule
from robo_rl_ros.core.watchdog import StateWatchdog


def test_filter_rejects_clips_and_rate_limits():
    f = SafetyFilter(np.zeros(2), np.ones(2), np.array([0.4, 0.4]), max_delta=0.1)
    assert np.allclose(f(np.array([0.5, 0.5])).action, [0.5, 0.5])
    result = f(np.array([1.5, 0.45]))
    assert result.clipped and result.rate_limited and np.allclose(result.action, [0.6, 0.45])
    result = f(np.array([np.nan, 0.5]))
    assert result.rejected and np.allclose(result.action, [0.5, 0.4])  # toward the safe action, rate limited
    result = f(np.array([np.inf, 0.5]))
    assert result.rejected and np.allclose(result.action, [0.4, 0.4])
    with pytest.raises(ValueError):
        SafetyFilter(np.zeros(2), np.ones(2), np.zeros(2), max_delta=0.0)


def test_geofence_and_watchdog():
    fence = Geofence.around(np.array([0.0, 0.0, 1.0]), 0.5)
    assert fence.contains([0.4, -0.4, 1.4]) and not fence.contains([0.0, 0.0, 0.4])
    assert not fence.contains([np.nan, 0.0, 1.0])
    dog = StateWatchdog(0.05)
    assert not dog.is_fresh(0.0)
    dog.feed(1.0)
    assert dog.is_fresh(1.04) and not dog.is_fresh(1.06)
    dog.clear()
    assert dog.age(1.0) == float("inf")
    dog.feed(100.0)  # then the clock steps back (NTP, a simulation's /clock restarting): the state was fresh until
    assert not dog.is_fresh(10.0) and not dog.is_fresh(99.99)  # the clock caught up again, whether states came or not
    dog.feed(10.0)
    assert dog.is_fresh(10.01)


def _ticks(schedule: TickSchedule, arrivals) -> list[float]:
    """The arrival times (s) on which `schedule` ticks."""
    ticks = []
    for t in arrivals:
        if schedule.due(t):
            schedule.ticked(t)
            ticks.append(t)
    return ticks


@pytest.mark.parametrize("source_hz", [1000.0, 360.0, 250.0, 105.0])
def test_states_faster_than_the_control_rate_tick_at_the_control_rate(source_hz):
    """A 100 Hz policy on a faster state source steps every 10 ms, as in training, not on every state."""
    rng = np.random.default_rng(0)
    arrivals = np.arange(0.0, 2.0, 1.0 / source_hz) + rng.uniform(0.0, 0.2 / source_hz, int(2.0 * source_hz))
    ticks = _ticks(TickSchedule(0.01), np.sort(arrivals))
    assert 195 <= len(ticks) <= 201  # 2 s at 100 Hz
    assert np.min(np.diff(ticks)) >= 0.005


def test_states_at_or_below_the_control_rate_tick_on_every_state():
    rng = np.random.default_rng(1)
    at_rate = np.arange(0.0, 2.0, 0.01) + rng.uniform(-0.002, 0.002, 200)  # a 100 Hz source jittering +-2 ms
    assert len(_ticks(TickSchedule(0.01), np.sort(at_rate))) == 200
    slower = np.arange(0.0, 2.0, 1.0 / 60.0)
    assert len(_ticks(TickSchedule(0.01), slower)) == len(slower)
    # after a gap (lost states) the grid restarts: the first state after it ticks, the next one a period later
    schedule = TickSchedule(0.01)
    assert _ticks(schedule, [0.0, 0.01, 0.5, 0.503, 0.51]) == [0.0, 0.01, 0.5, 0.51]
    # an early state waits until its tick is due, at most half a period
    schedule = TickSchedule(0.01)
    schedule.ticked(1.0)
    assert schedule.wait(1.001) == pytest.approx(0.004) and not schedule.due(1.001)
    assert schedule.due(1.001 + schedule.wait(1.001)) and schedule.wait(1.006) == 0.0
    with pytest.raises(ValueError):
        TickSchedule(0.0)


def _hover_state(z=1.0):
    return VehicleState(np.array([0.0, 0.0, z]), np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3), np.zeros(3))


def _steady(controller, start: float, count: int = RESUME_STATES, z: float = 1.0) -> float:
    """Feed `count` hover states 10 ms apart from `start`; the time of the last."""
    for i in range(count):
        controller.update_state(start + 0.01 * i, _hover_state(z))
    return start + 0.01 * (count - 1)


def test_stale_and_invalid_state_stop_within_one_tick_and_resume_during_the_descent(hover_bundle):
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05))
    first = controller.tick(0.0)
    assert not first.flying and first.just_stopped and first.reason == "no state received yet"
    assert first.legacy.thrust_pwm == 0.0  # never flown: no descent thrust, the motors stay off
    controller.update_state(0.0, _hover_state())
    waiting = controller.tick(0.005)  # one state is not yet a stream
    assert not waiting.flying and "waiting for a steady state stream (5 states in a row" in waiting.reason
    last = _steady(controller, 0.01, RESUME_STATES - 1)
    flying = controller.tick(last + 0.005)
    assert flying.flying and flying.legacy.thrust_pwm > 20000
    # no state for longer than the timeout: the very next tick stops with a level, reduced-thrust descent
    stale = controller.tick(last + 0.06)
    assert not stale.flying and stale.just_stopped and "old" in stale.reason
    assert stale.legacy.roll_deg == stale.legacy.pitch_deg == stale.legacy.yaw_rate_deg == 0.0
    assert stale.legacy.thrust_pwm < flying.legacy.thrust_pwm
    later = controller.tick(0.5)
    assert not later.just_stopped and later.legacy.thrust_pwm < stale.legacy.thrust_pwm
    # good states again during the descent (a dropout of the motion capture): the policy takes over again on a
    # steady stream, with a fresh action history
    controller.update_state(0.6, _hover_state())
    assert not controller.tick(0.605).flying
    last = _steady(controller, 0.61, RESUME_STATES - 1)
    resumed = controller.tick(last + 0.005)
    assert resumed.flying and np.allclose(resumed.observation[18:], hover_bundle.vehicle_parameters["hover_command"])
    # NaN in a message: the next tick stops, although the previous state was recent
    bad = VehicleState(np.array([0.0, np.nan, 1.0]), np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3), np.zeros(3))
    assert not controller.update_state(last + 0.01, bad)
    nan_tick = controller.tick(last + 0.015)
    assert not nan_tick.flying and nan_tick.just_stopped and "NaN" in nan_tick.reason
    last = _steady(controller, last + 0.02)
    assert controller.tick(last + 0.005).flying
    # leaving the geofence stops too
    controller.update_state(last + 0.01, _hover_state(z=0.3))
    assert "geofence" in controller.tick(last + 0.015).reason


def test_a_landed_vehicle_does_not_take_off_again_until_rearmed(hover_bundle):
    """The descent ended with the motors off; when the state came back, the node flew again: a vehicle on the
    floor took off by itself."""
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05,
                                                                           descent_seconds=2.0))
    last = _steady(controller, 0.0)
    assert controller.tick(last + 0.005).flying
    assert not controller.tick(last + 0.1).flying  # stale: the descent starts
    assert controller.tick(last + 2.2).legacy.thrust_pwm == 0.0 and controller.landed
    last = _steady(controller, 3.0, 20)  # the state is back, steady
    for t in (last + 0.005, last + 1.0):
        stopped = controller.tick(t)
        assert not stopped.flying and stopped.legacy.thrust_pwm == 0.0 and "call ~/rearm" in stopped.reason
    assert controller.rearm(last + 1.0) == "" and not controller.landed
    assert controller.tick(last + 1.001).legacy.thrust_pwm == 0.0  # re-armed: a first flight, no descent thrust
    last = _steady(controller, last + 1.01)
    assert controller.tick(last + 0.005).flying
    assert controller.rearm(last + 0.006) == "the policy is flying"


def test_a_state_stream_slower_than_the_timeout_never_takes_off(hover_bundle):
    """crazyswarm2 logs /pose at 10 Hz by default: each pose flew the policy for 50 ms (until the 50 ms timeout),
    then 50 ms of descent, in turn."""
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05))
    for i in range(30):
        controller.update_state(0.1 * i, _hover_state())
        for t in (0.1 * i + 0.005, 0.1 * i + 0.055):
            result = controller.tick(t)
            assert not result.flying and result.legacy.thrust_pwm == 0.0
    assert "states come 100 ms apart, more than state_timeout 50 ms" in controller.tick(2.905).reason


def test_a_descent_starts_no_higher_than_the_last_command(hover_bundle):
    """A vehicle commanded near idle (on the floor, a target below it) that lost its state was spun up to 0.9 of
    hover thrust by the descent."""
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05))
    _steady(controller, -0.04)
    flying = controller.tick(0.01)
    controller._last_flying = flying._replace(legacy=flying.legacy._replace(thrust_pwm=2000.0))  # commanded at idle
    stop = controller.tick(0.07)
    assert not stop.flying and 0.0 < stop.legacy.thrust_pwm <= 2000.0
    assert controller.tick(0.5).legacy.thrust_pwm < stop.legacy.thrust_pwm
    # after a command above 0.9 of hover, the descent starts at 0.9 of hover as before
    assert controller.rearm(3.0) == ""  # the descent from 0.07 s ended at 2.07 s: landed
    _steady(controller, 2.96)
    high = controller.tick(3.01)
    hover = controller.vehicle.hover_fraction * 65535
    controller._last_flying = high._replace(legacy=high.legacy._replace(thrust_pwm=hover))
    assert controller.tick(3.07).legacy.thrust_pwm == pytest.approx(0.9 * hover, rel=0.02)


def test_policy_steps_once_per_new_state(hover_bundle):
    """Ticks without a newer state repeat the last command and leave the action history alone, so a late
    state source does not change what the policy sees."""
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), state_timeout=0.05))
    _steady(controller, -0.04, z=0.95)
    first = controller.tick(0.01)
    history = controller.history.flat().copy()
    repeats = [controller.tick(0.01 + 0.01 * k) for k in range(1, 4)]
    assert all(r is first for r in repeats)
    assert np.array_equal(controller.history.flat(), history)
    controller.update_state(0.04, _hover_state(z=0.96))
    second = controller.tick(0.045)
    assert second is not first and np.allclose(second.observation[18:22], first.action)


def test_pose_differentiator_recovers_velocity_and_rates():
    estimator = PoseDifferentiator()
    velocity, rates, dt = np.array([0.3, -0.2, 0.1]), np.array([0.5, -1.0, 0.8]), 0.01
    rotation = quat_to_matrix(np.array([0.9, 0.1, 0.2, -0.3]) / np.linalg.norm([0.9, 0.1, 0.2, -0.3]))
    position = np.zeros(3)
    for k in range(5):
        ready = estimator.update(k * dt, position, matrix_to_quat(rotation))
        assert ready == (k > 0)
        position = position + velocity * dt
        rotation = rotation @ rotation_exp(rates * dt)
    np.testing.assert_allclose(estimator.velocity, velocity, atol=1e-9)
    np.testing.assert_allclose(estimator.body_rates, rates, atol=1e-9)
    assert not estimator.update(1.0, position, matrix_to_quat(rotation))  # a gap: no estimate from it


# --- never a non-finite command ---

@pytest.mark.parametrize("rates", [(1e200, 1e200, 1e200), (0.0, 0.0, 1e308), (1e30, 0.0, 0.0), (40.0, 0.0, 0.0)])
def test_body_rates_beyond_the_training_stop_instead_of_a_nan_or_a_crash(hover_bundle, rates):
    # finite in a message, these overflowed the one-period prediction: 1e200 gave NaN roll, pitch and yaw
    # rate while reporting flying, 1e308 raised (math domain error) out of the tick
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0)))
    state = _hover_state()._replace(angular_velocity=np.array(rates))
    assert not controller.update_state(0.0, state)
    result = controller.tick(0.01)
    assert not result.flying and "exceeds the training's 35 rad/s" in result.reason
    assert result.legacy.is_finite() and result.legacy.thrust_pwm == 0.0


def test_speed_beyond_the_training_stops(hover_bundle):
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0)))
    assert not controller.update_state(0.0, _hover_state()._replace(velocity=np.array([0.0, 0.0, 1e300])))
    assert "speed 1e+300 m/s exceeds the training's 10 m/s" in controller.tick(0.01).reason


def test_a_non_finite_policy_action_stops_instead_of_flying_the_safe_action(hover_bundle):
    # a fault in the network at run time (load refuses NaN weights): the tick used to fly the safe action
    # (a constant hover thrust) and report flying
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0)))
    _steady(controller, -0.04)
    assert controller.tick(0.0).flying
    real_policy = controller.policy
    controller.policy = lambda observation: np.full(4, np.nan)  # stands in for a faulty network
    controller.update_state(0.01, _hover_state())
    result = controller.tick(0.01)
    assert not result.flying and result.just_stopped and result.reason == "the policy's action is not finite"
    assert result.legacy.is_finite() and 0 < result.legacy.thrust_pwm < 0.9 * 65535 * 0.45  # the descent
    controller.policy = real_policy
    controller.update_state(0.02, _hover_state())
    assert controller.tick(0.02).flying  # a good action again: flies


def test_the_last_guard_stops_on_a_non_finite_command(hover_bundle):
    # rate_lead NaN (the node refuses the parameter; the controller must not rely on it) makes roll and
    # pitch NaN: the tick stops instead of returning them
    from robo_rl_ros.core.quadrotor import command_is_finite

    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), rate_lead=float("nan")))
    _steady(controller, -0.04)
    result = controller.tick(0.0)
    assert not result.flying and result.reason == "the command is not finite"
    assert command_is_finite(result) and result.legacy.thrust_pwm == 0.0
    refused = controller.refuse(0.01, "checked by the node")
    assert not refused.flying and command_is_finite(refused)


def test_a_geofence_wider_than_the_training_box_is_refused(hover_bundle):
    """The hover policy's episodes ended 0.6 m off target on any axis: a wider fence flew it where it never acted."""
    with pytest.raises(ValueError, match="geofence_half_extent 1 m exceeds the training's max_position_error 0.6 m"):
        QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), geofence_half_extent=1.0))
    QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0), geofence_half_extent=0.6))


@pytest.mark.parametrize("degrees", [180.0, -135.0, 100.0, 20.0])
def test_a_vehicle_facing_any_way_is_flown_as_one_facing_plus_x(hover_bundle, degrees):
    """Training starts face within 90 degrees of +x: make train's policy flew 0% of level, still starts turned 180
    degrees in the world frame (bench/start_heading.py). The node observes in the frame of the heading it took over
    at, where the dynamics are the same (tests/sim/test_heading_frame.py): a vehicle set down facing -x gets the
    commands of one facing +x, tick for tick, along a simulated flight."""
    from sim.quadrotor.config import make_config
    from sim.quadrotor.core import QuadrotorBatch
    from sim.quadrotor.rotations import turned_about_z

    config = make_config(hover_bundle.env_config["task"], dict(hover_bundle.env_config, randomization={"enabled": False}))
    sim = QuadrotorBatch(config, 1, "mujoco")
    center = np.array(config.center)
    sim.reset(options={"target": center, "initial_state": {
        "position": center + [0.1, -0.1, 0.05], "quaternion": [1.0, 0.0, 0.0, 0.0], "velocity": [0.2, 0.0, -0.1],
        "angular_velocity": [0.3, -0.2, 0.5]}})
    plus_x, turned = (QuadrotorPolicyController(hover_bundle, QuadrotorSettings(tuple(center))) for _ in range(2))
    yaw = math.radians(degrees)
    for tick in range(-RESUME_STATES + 1, 100):
        now = 0.01 * tick
        state = VehicleState(*(x[:, 0].copy() for x in sim.physics.state()))
        plus_x.update_state(now, state)
        turned.update_state(now, VehicleState(*turned_about_z(yaw, center, state.position, state.quaternion,
                                                              state.velocity), state.angular_velocity))
        if tick < 0:
            continue
        ours, theirs = plus_x.tick(now), turned.tick(now)
        assert ours.flying and theirs.flying, (ours.reason, theirs.reason)
        np.testing.assert_allclose(theirs.action, ours.action, atol=1e-5, rtol=0, err_msg=f"tick {tick}")
        sim.step(ours.action[None])
    assert np.linalg.norm(sim.physics.state()[0][:, 0] - center) < 0.05  # and it hovers
    assert plus_x.take_over_heading_deg == pytest.approx(0.0, abs=1e-9)
    assert math.remainder(turned.take_over_heading_deg - degrees, 360.0) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("degrees, flies", [(0.0, True), (45.0, False)])
def test_the_training_box_is_held_in_the_frame_the_policy_observes_in(hover_bundle, degrees, flies):
    """0.45 m off on world x and y is 0.64 m along x of a frame turned 45 degrees: beyond the training's 0.6 m."""
    controller = QuadrotorPolicyController(hover_bundle, QuadrotorSettings((0.0, 0.0, 1.0)))
    half = math.radians(degrees) / 2
    quat = np.array([math.cos(half), 0.0, 0.0, math.sin(half)])
    for i, position in enumerate([[0.0, 0.0, 1.0]] * RESUME_STATES + [[0.45, 0.45, 1.0]]):
        controller.update_state(0.01 * i, VehicleState(np.array(position), quat, np.zeros(3), np.zeros(3)))
        result = controller.tick(0.01 * i + 0.005)
    assert result.flying == flies
    if not flies:
        assert "in the frame of heading 45 deg exceeds the training's max_position_error 0.6 m" in result.reason
