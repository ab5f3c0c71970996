"""The arm core: observation equal to the simulator's, differential IK that moves the tool as the action
says, joint limits and rate limit, and holding on a missing joint, NaN or stale state."""

from pathlib import Path

import mujoco
import numpy as np
import pytest

from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
from robo_rl_ros.core.bundle import load_bundle
from sim.arm.env import HOME, ArmVectorEnv

ARM_BUNDLE = Path(__file__).resolve().parent / "data" / "arm_reach_bundle"


@pytest.fixture(scope="module")
def arm_bundle():
    return load_bundle(ARM_BUNDLE)


def _joint_state(env, order):
    model = env.model
    names = [*env.config.spec.joints, "finger_left", "finger_right"]
    qpos = {n: env._qpos[0, model.jnt_qposadr[model.joint(n).id]] for n in names}
    qvel = {n: env._qvel[0, model.jnt_dofadr[model.joint(n).id]] for n in names}
    shuffled = [names[i] for i in order]
    return shuffled, [float(qpos[n]) for n in shuffled], [float(qvel[n]) for n in shuffled]


def test_observation_equals_simulator(arm_bundle):
    """Equal to the simulator's, except the tool velocity: the simulator multiplies the joint velocities
    by the Jacobian its controller last computed (every 5th physics step), the core by the Jacobian at
    the current joint positions; that one is checked against MuJoCo's own mj_jacSite."""
    env = ArmVectorEnv("reach", num_envs=1, nthread=1)
    model, data = env.model, mujoco.MjData(env.model)
    site = model.site(env.config.spec.ee_site).id
    dofs = [model.jnt_dofadr[model.joint(n).id] for n in env.config.spec.joints]
    sim_obs, _ = env.reset(seed=0)
    controller = ArmPolicyController(arm_bundle, ArmSettings(goal=tuple(env.goal[0])))
    rng = np.random.default_rng(1)
    for step in range(10):
        names, positions, velocities = _joint_state(env, rng.permutation(9))  # /joint_states order is not fixed
        assert controller.update_joint_state(0.0, names, positions, velocities)
        controller.update_object(env._qpos[0, env._cube_qpos:env._cube_qpos + 3])
        obs = controller.observation(controller._q, controller._qdot, controller._opening)
        velocity = controller.slices["tool_velocity"]
        others = np.ones(len(obs), dtype=bool)
        others[velocity] = False
        np.testing.assert_allclose(obs[others], sim_obs[0][others], atol=2e-6, err_msg=f"step {step}")
        data.qpos[:], data.qvel[:] = env._qpos[0], env._qvel[0]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        jacp = np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jacp, None, site)
        np.testing.assert_allclose(obs[velocity], jacp[:, dofs] @ data.qvel[dofs], atol=1e-6)
        assert np.abs(obs[velocity] - sim_obs[0][velocity]).max() <= 0.02 * np.abs(sim_obs[0][velocity]).max() + 1e-6
        sim_obs, *_ = env.step(rng.uniform(-1, 1, size=(1, 4)))


def test_ik_moves_the_tool_by_the_action_within_limits(arm_bundle):
    controller = ArmPolicyController(arm_bundle, ArmSettings(goal=(0.5, 0.0, 0.2), max_joint_speed=10.0))
    names = [*controller.chain.joints, "finger_left"]
    q = np.array(HOME)
    tool, rotation, _ = controller.chain.forward(q)
    controller.update_joint_state(0.0, names, [*q, 0.04], None)
    controller.update_object(np.array([0.5, 0.0, 0.02]))
    result = controller.tick(0.0)
    assert result.moving and result.joint_command.shape == (7,)
    action = controller.action_filter(controller.policy(result.observation)).action
    new_tool, new_rotation, _ = controller.chain.forward(result.joint_command)
    expected = np.clip(tool + controller.action_scale * action[:3], controller.workspace[0], controller.workspace[1])
    np.testing.assert_allclose(new_tool, expected, atol=2e-3)  # one damped Gauss-Newton step
    assert np.abs(new_rotation - rotation).max() < 1e-2
    assert np.all(result.joint_command >= controller.chain.lower) and np.all(result.joint_command <= controller.chain.upper)


def test_rate_limit_and_holding(arm_bundle):
    controller = ArmPolicyController(arm_bundle, ArmSettings(goal=(0.5, 0.0, 0.2), max_joint_speed=0.5,
                                                             state_timeout=0.1))
    names = [*controller.chain.joints, "finger_left"]
    q = np.array(HOME)
    controller.update_object(np.array([0.5, 0.0, 0.02]))
    assert controller.tick(0.0).reason == "no joint state received yet"
    controller.update_joint_state(0.0, names, [*q, 0.04], None)
    first = controller.tick(0.0)
    assert np.abs(first.joint_command - q).max() <= 0.5 / 50 + 1e-12
    # a joint missing: hold the last command, within one tick
    assert not controller.update_joint_state(0.02, names[1:], [*q[1:], 0.04], None)
    held = controller.tick(0.02)
    assert not held.moving and "lacks ['joint1']" in held.reason
    np.testing.assert_array_equal(held.joint_command, first.joint_command)
    # NaN: hold; stale: hold; good again: moves from where the arm is
    assert not controller.update_joint_state(0.04, names, [np.nan, *q[1:], 0.04], None)
    assert "NaN" in controller.tick(0.04).reason
    controller.update_joint_state(0.06, names, [*q, 0.04], None)
    assert controller.tick(0.08).moving
    stale = controller.tick(0.3)
    assert not stale.moving and "old" in stale.reason
    controller.update_joint_state(0.3, names, [*q, 0.04], None)
    resumed = controller.tick(0.32)
    assert resumed.moving and np.abs(resumed.joint_command - q).max() <= 0.5 / 50 + 1e-12


def test_a_joint_state_far_outside_the_joints_ranges_holds_and_names_the_joint(arm_bundle):
    """A joint at 1e30 rad (or in degrees) used to start the IK from a pose the arm cannot be in: the command
    went to 1e30 and the next good state was walked towards from there. Now the tick holds and names the joint;
    an overshoot within the tolerance, as real encoders and MuJoCo's soft limits give, still moves."""
    controller = ArmPolicyController(arm_bundle, ArmSettings(goal=(0.5, 0.0, 0.2)))
    names = [*controller.chain.joints, "finger_left"]
    q = np.array(HOME)
    controller.update_object(np.array([0.5, 0.0, 0.02]))
    for joint, value in ((0, 1e30), (3, np.degrees(q[3])), (6, controller.chain.upper[6] + 0.2)):
        wrong = q.copy()
        wrong[joint] = value
        assert not controller.update_joint_state(0.0, names, [*wrong, 0.04], None)
        held = controller.tick(0.0)
        assert not held.moving and held.joint_command is None
        assert f"puts {controller.chain.joints[joint]} at" in held.reason and "outside its range" in held.reason
    assert not controller.update_joint_state(0.0, names, [*q, 1.0], None)  # the fingers in mm-like units
    assert "finger_left" in controller.tick(0.0).reason
    overshoot = q.copy()
    overshoot[0] = controller.chain.upper[0] + 0.05
    assert controller.update_joint_state(0.0, names, [*overshoot, 0.04], None)
    moved = controller.tick(0.0)
    assert moved.moving and np.all(np.abs(moved.joint_command) < 10)


def test_pick_goal_is_the_lift_goal_above_the_cube_start():
    """A pick-cube bundle's goal is the task's (lift_height above the cube where the policy started), not
    the reach point: the first observation equals the simulator's, and the goal stays when the cube moves."""
    bundle = load_bundle(Path(__file__).resolve().parent / "data" / "pick_bundle")
    config = {k: v for k, v in bundle.env_config.items() if k != "spec"}
    env = ArmVectorEnv(num_envs=1, nthread=1, config=config)
    sim_obs, _ = env.reset(seed=1)
    controller = ArmPolicyController(bundle, ArmSettings(goal=(0.5, 0.0, 0.2)))
    names, positions, velocities = _joint_state(env, range(9))
    assert controller.update_joint_state(0.0, names, positions, velocities)
    cube = env._qpos[0, env._cube_qpos:env._cube_qpos + 3].copy()
    controller.update_object(cube)
    result = controller.tick(0.0)
    np.testing.assert_allclose(result.observation, sim_obs[0], atol=2e-6)
    np.testing.assert_allclose(controller.goal, cube + (0.0, 0.0, bundle.env_config["lift_height"]))
    controller.update_object(cube + 0.05)
    controller.tick(0.0)
    np.testing.assert_allclose(controller.goal, cube + (0.0, 0.0, bundle.env_config["lift_height"]))


def test_a_stale_or_impossible_object_pose_or_joint_state_holds():
    """The arm kept moving on the last cube pose when the poses stopped, flew to a cube at x = 1e308, took the
    later of a joint named twice, and a joint velocity of 1e308 rad/s."""
    bundle = load_bundle(Path(__file__).resolve().parent / "data" / "pick_bundle")
    config = {k: v for k, v in bundle.env_config.items() if k != "spec"}
    env = ArmVectorEnv(num_envs=1, nthread=1, config=config)
    env.reset(seed=1)
    controller = ArmPolicyController(bundle, ArmSettings(goal=(0.5, 0.0, 0.2), state_timeout=0.1))
    names, positions, velocities = _joint_state(env, range(9))
    cube = env._qpos[0, env._cube_qpos:env._cube_qpos + 3].copy()
    assert controller.update_joint_state(0.0, names, positions, velocities)
    controller.update_object(cube, 0.0)
    assert controller.tick(0.05).moving
    assert controller.update_joint_state(0.2, names, positions, velocities)
    stale = controller.tick(0.2)  # the cube's pose last came at 0.0
    assert not stale.moving and stale.reason == "object pose is 200 ms old"
    controller.update_object(np.array([1e308, 0.0, 0.02]), 0.2)
    far = controller.tick(0.2)
    assert not far.moving and "outside the task's workspace" in far.reason
    controller.update_object(cube, 0.2)
    assert controller.tick(0.2).moving
    assert not controller.update_joint_state(0.21, [*names, names[0]], [*positions, 2.5], [*velocities, 0.0])
    assert f"names {names[0]} more than once" in controller.tick(0.21).reason
    fast = list(velocities)
    fast[0] = 1e308
    assert not controller.update_joint_state(0.22, names, positions, fast)
    assert "a velocity of 1e+308 rad/s" in controller.tick(0.22).reason


def test_an_action_from_another_source_goes_through_the_same_filter_and_ik(arm_bundle):
    """What a robot-side actor does (an exploring policy, a teleoperator): its action, not the bundle's
    policy's, moves the tool, clipped to the action range. A non-finite one holds the last command, as the
    firmware does on a policy fault: it became the export's safe action, whose gripper 0 opened the gripper
    halfway while the tick reported "moving", and dropped a held cube."""
    def controller_at_home() -> tuple[ArmPolicyController, np.ndarray]:
        controller = ArmPolicyController(arm_bundle, ArmSettings(goal=(0.5, 0.0, 0.2), max_joint_speed=10.0))
        q = np.array(HOME)
        controller.update_joint_state(0.0, [*controller.chain.joints, "finger_left"], [*q, 0.04], None)
        controller.update_object(np.array([0.5, 0.0, 0.02]))
        return controller, controller.chain.forward(q)[0]

    controller, tool = controller_at_home()
    result = controller.tick(0.0, act=lambda obs: np.array([3.0, 0.0, -0.5, 1.0]))
    np.testing.assert_allclose(result.action, [1.0, 0.0, -0.5, 1.0])  # clipped to the action range
    expected = np.clip(tool + controller.action_scale * result.action[:3], *controller.workspace)
    moved = controller.chain.forward(result.joint_command)[0]
    np.testing.assert_allclose(moved, expected, atol=5e-3)  # one damped Gauss-Newton step of a full-scale action
    assert np.linalg.norm(moved - expected) < 0.2 * np.linalg.norm(expected - tool)
    assert result.gripper_command == pytest.approx(controller.gripper_low)  # +1 closes
    unsafe = controller.tick(0.01, act=lambda obs: np.array([np.nan, 0.0, 0.0, 0.0]))
    assert not unsafe.moving and unsafe.reason == "the policy's action is not finite" and unsafe.action is None
    np.testing.assert_array_equal(unsafe.joint_command, result.joint_command)
    assert unsafe.gripper_command == result.gripper_command == pytest.approx(controller.gripper_low)  # still closed
    again = controller.tick(0.02, act=lambda obs: np.array([0.0, 0.0, 0.0, 1.0]))
    assert again.moving  # the next good action moves again, from where the arm is


def test_a_new_episode_takes_the_pick_goal_from_the_cubes_new_start_and_moves_from_where_the_arm_is():
    from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
    from robo_rl_ros.core.bundle import load_bundle
    from sim.arm.env import HOME

    bundle = load_bundle(Path(__file__).resolve().parent / "data" / "pick_bundle")
    controller = ArmPolicyController(bundle, ArmSettings(goal=(0.5, 0.0, 0.2)))
    names = [*controller.chain.joints, controller.chain.gripper_joint]
    controller.update_joint_state(0.0, names, [*HOME, 0.04], None)
    controller.update_object(np.array([0.5, 0.0, 0.02]))
    first = controller.tick(0.0, act=lambda obs: np.array([1.0, 0.0, 0.0, -1.0]))
    assert first.moving and np.allclose(controller.goal, [0.5, 0.0, 0.02 + controller.lift_height])
    # the scene reset: the arm back home, the cube elsewhere
    controller.new_episode()
    controller.update_joint_state(0.02, names, [*HOME, 0.04], None)
    controller.update_object(np.array([0.45, 0.1, 0.02]))
    again = controller.tick(0.02, act=lambda obs: np.zeros(4))
    assert np.allclose(controller.goal, [0.45, 0.1, 0.02 + controller.lift_height])
    # from where the arm is, as a controller that never ran: not from the previous episode's last command
    fresh = ArmPolicyController(bundle, ArmSettings(goal=(0.5, 0.0, 0.2)))
    fresh.update_joint_state(0.02, names, [*HOME, 0.04], None)
    fresh.update_object(np.array([0.45, 0.1, 0.02]))
    np.testing.assert_allclose(again.joint_command, fresh.tick(0.02, act=lambda obs: np.zeros(4)).joint_command)


SO_ARM100_REACH = Path(__file__).resolve().parents[1] / "robo_rl" / "export" / "data" / "so_arm100_reach"


@pytest.mark.parametrize("setting, value", [
    ("max_joint_speed", 90.0), ("max_joint_speed", 1e6), ("state_timeout", 1e9), ("ik_damping", 1e6),
    ("orientation_gain", 1e6), ("orientation_weight", 1e3), ("image_timeout", 1e9), ("max_joint_speed", 0.0),
    ("state_timeout", float("nan")), ("orientation_gain", -1.0)])
def test_settings_beyond_what_drives_an_arm_are_refused(setting, value):
    """Only positivity was checked: a deg/s max_joint_speed of 90, or a state_timeout of 1e9 (no watchdog), drove
    the arm. The firmware app takes the same ranges for the settings it shares."""
    from robo_rl.export.arm_firmware import ArmFirmwareSettings
    from robo_rl.export.errors import ExportError
    from robo_rl_ros.core.arm import SETTING_RANGES

    with pytest.raises(ValueError, match=f"^{setting} must be a number in "):
        ArmSettings((0.2, 0.0, 0.1), **{setting: value})
    if setting in ("max_joint_speed", "ik_damping", "orientation_gain", "orientation_weight"):
        with pytest.raises(ExportError, match=f"^{setting}="):
            ArmFirmwareSettings(**{setting: value}).validate()
    low, high, _ = SETTING_RANGES[setting]
    ArmSettings((0.2, 0.0, 0.1), **{setting: high})  # the bounds themselves drive


def test_the_node_weighs_orientation_as_the_training_did_and_refuses_a_reach_goal_outside_the_workspace():
    """The node's IK weighed orientation 1.0 against the SO-ARM100 training's sqrt(20 / 2000) = 0.1, which the
    firmware and the checks in the loop use (a pick-cube policy went from 40% to 0%); the Panda's default goal
    [0.5, 0, 0.2], 0.2 m outside the SO-ARM100's workspace, was taken without a word."""
    from robo_rl.export.arm_firmware import ArmFirmwareSettings, orientation_weight

    bundle = load_bundle(SO_ARM100_REACH)
    controller = ArmPolicyController(bundle, ArmSettings((0.2, 0.0, 0.1)))
    assert controller.orientation_weight == pytest.approx(0.1)
    assert controller.orientation_weight == orientation_weight(bundle.manifest, ArmFirmwareSettings())
    assert ArmPolicyController(bundle, ArmSettings((0.2, 0.0, 0.1), orientation_weight=0.5)).orientation_weight == 0.5
    assert controller.goal_problem() == ""
    outside = ArmPolicyController(bundle, ArmSettings((0.5, 0.0, 0.2)))
    assert outside.goal_problem() == ("goal [0.5, 0.0, 0.2] lies 0.2 m outside the task's workspace "
                                      "[[0.1, 0.3], [-0.15, 0.15], [0.0, 0.2]] (x, y, z ranges [m])")


@pytest.mark.parametrize("setting, value", [("host_timeout_ms", 1.5), ("servo_error_ticks", 2.5), ("bus_timeout_us", True)])
def test_the_firmware_settings_counted_in_whole_units_refuse_fractions(setting, value):
    """host_timeout_ms=1.5 became the C constant 1.5u, which only the cross-compiler refused."""
    from robo_rl.export.arm_firmware import ArmFirmwareSettings
    from robo_rl.export.errors import ExportError

    with pytest.raises(ExportError, match=f"^{setting}={value!r} must be a "):
        ArmFirmwareSettings(**{setting: value}).validate()
