"""scripted_spacenav_node: a scripted person at a SpaceMouse, to run robot_actor_node against the arm sim
bridge with no person (tests, benchmarks, a first try of the HIL-SERL loop).

It publishes what spacenav_node publishes (robo_rl_ros.core.spacenav): `twist_topic` (geometry_msgs/Twist,
the cap's normalised displacement times `linear_scale`) every tick, zeros while it lets go, and on
`joy_topic` (sensor_msgs/Joy) one button event per message: while it intervenes it holds down the gripper
button of what it wants (`close_button` or `open_button`), and it releases it when it lets go. What it does
with the cap is the task's scripted expert (sim.arm.tasks, the one that records the demos) acting on the
observation it builds from the robot's topics through the same builder as the robot actor
(robo_rl_ros.core.arm); when it does it is robo_rl.interventions.ScriptedIntervener's rule on the task's
dense reward, which it watches (the person's judgement of progress; the learner gets only the
success detector's sparse reward): it takes over an episode that made no progress for `patience` ticks,
for `duration` ticks, while its interventions stay within `budget` of the ticks it has seen (and not after
`until_ticks`, if >= 0); it lets go as soon as the cube is up (the task's success). It follows the robot
actor's episodes through `next_episode_topic` (std_msgs/Bool, robot_actor_node's `~/next_is_evaluation`,
published as an episode ends): it lets go at once, keeps its hands off while the scene is reset, and takes
the episode to have begun at the robot's next command on `/<controller_name>/commands`, which it then keeps
out of if it is an evaluation episode.

Needs the robo-rl simulator package (the task's expert and reward): it is a test fixture, not robot code.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from rclpy.node import Node
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Bool, Float64MultiArray

from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
from robo_rl_ros.core.bundle import BundleError, load_bundle
from robo_rl_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS
from robo_rl_ros.spin import StartupError, run_node

try:
    from robo_rl.interventions import ScriptedIntervener
    from sim.arm.joint_position import local_env_config
    from sim.arm.env import ArmVectorEnv
except ImportError as missing:
    SIMULATOR_MISSING: ImportError | None = missing
else:
    SIMULATOR_MISSING = None


class ScriptedSpacenavNode(Node):
    """The scripted person (parameters in config/scripted_spacenav.yaml)."""

    def __init__(self) -> None:
        super().__init__("scripted_spacenav_node")
        if SIMULATOR_MISSING is not None:
            raise StartupError(f"scripted_spacenav_node needs the robo-rl simulator: {SIMULATOR_MISSING}")
        p = {name: self.declare_parameter(name, default).value for name, default in {
            "bundle_path": "", "joint_states_topic": "/joint_states", "object_topic": "/cube/pose",
            "twist_topic": "/spacenav/twist", "joy_topic": "/spacenav/joy", "linear_scale": [1.0, 1.0, 1.0],
            "close_button": 0, "open_button": 1, "rate_hz": 50.0,
            "patience": 20, "duration": 30, "budget": 0.2, "until_ticks": -1, "controller_name": "arm_controller",
            "next_episode_topic": "/robot_actor_node/next_is_evaluation",
        }.items()}
        if not p["bundle_path"]:
            raise StartupError("scripted_spacenav_node: parameter bundle_path is required")
        try:
            bundle = load_bundle(p["bundle_path"])
            self.controller = ArmPolicyController(bundle, ArmSettings(goal=(0.0, 0.0, 0.0), state_timeout=1.0))
            env = ArmVectorEnv(num_envs=1, nthread=1, config=local_env_config(dict(bundle.env_config)))
            self.intervener = ScriptedIntervener(
                self._expert, 1, patience=p["patience"], duration=p["duration"], budget=p["budget"],
                until_env_steps=None if p["until_ticks"] < 0 else p["until_ticks"])
        except (BundleError, ValueError) as error:
            raise StartupError(f"scripted_spacenav_node: {error}") from error
        self.task, self.layout, self.config = env.task, env.layout, env.config
        self.cube_half_size = float(env.nominal_params["cube_half_size"])  # the bridge's (randomization off)
        self.p = p
        self.scale = np.asarray(p["linear_scale"], dtype=np.float64)
        self._joints: JointState | None = None
        self._cube: np.ndarray | None = None
        self._cube_start: np.ndarray | None = None
        self._held: int | None = None  # the gripper button held down
        self.ticks = 0  # the person's, the intervention budget's unit
        self._twist_pub = self.create_publisher(Twist, p["twist_topic"], SENSOR_QOS)
        self._joy_pub = self.create_publisher(Joy, p["joy_topic"], 10)
        self.create_subscription(JointState, p["joint_states_topic"], self._store_joints, SENSOR_QOS)
        self.create_subscription(PoseStamped, p["object_topic"], self._store_cube, SENSOR_QOS)
        self.create_subscription(Float64MultiArray, f"/{p['controller_name']}/commands", self._on_command, COMMAND_QOS)
        self._between = False         # an episode ended and the next has not begun: hands off
        self._next_evaluation = False  # what the robot actor announced for the next episode
        self._restarted = False       # the robot moved again after the announcement: the episode began
        self._evaluating = False      # the episode under way is an evaluation
        self.create_subscription(Bool, p["next_episode_topic"], self._on_announcement, LATCHED_QOS)
        self.create_timer(1.0 / p["rate_hz"], self._tick)

    def _expert(self, obs: np.ndarray) -> np.ndarray:
        return self.task.expert(obs, self.layout, self.config.action_scale, self.cube_half_size)

    def _store_joints(self, msg: JointState) -> None:
        self._joints = msg

    def _on_command(self, msg: Float64MultiArray) -> None:
        if self._between:
            self._between, self._restarted, self._evaluating = False, True, self._next_evaluation

    def _on_announcement(self, msg: Bool) -> None:
        """An episode ended: let go now, not at the next tick (the reset may take less than a tick)."""
        self._between, self._next_evaluation = True, bool(msg.data)
        self._twist_pub.publish(Twist())
        if self._held is not None:
            self._button(self._held, 0)
            self._held = None

    def _store_cube(self, msg: PoseStamped) -> None:
        self._cube = np.array([msg.pose.position.x, msg.pose.position.y, msg.pose.position.z])

    def _new_episode(self, cube: np.ndarray) -> None:
        self._cube_start = cube
        self.intervener.observe(np.zeros(1), np.ones(1, dtype=bool))

    def _tick(self) -> None:
        if self._joints is None or self._cube is None:
            return
        if self._cube_start is None:
            self._new_episode(self._cube)
        msg = self._joints
        positions = {name: value for name, value in zip(msg.name, msg.position)}
        velocities = {name: value for name, value in zip(msg.name, msg.velocity)}
        chain = self.controller.chain
        q = np.array([positions[n] for n in chain.joints])
        qdot = np.array([velocities.get(n, 0.0) for n in chain.joints])
        if self._restarted:
            self._restarted = False
            self._new_episode(self._cube)
        self.controller.update_object(self._cube)
        self.controller.goal = self._cube_start + (0.0, 0.0, self.config.lift_height)
        obs = self.controller.observation(q, qdot, positions[chain.gripper_joint])[None]
        self.ticks += 1
        action, mask = self.intervener(obs, np.zeros((1, 4)), self.ticks)
        # out of it: no episode under way (the scene is being reset), or the policy measured alone
        away = self._between or self._evaluating
        if away:
            mask[:] = False
        terms, success = self.task.terms(obs, self.layout, self._cube_start[None], self.config)
        # the cube up is all the person wants: they let go, and their patience starts again if it drops
        self.intervener.observe(self.task.reward(terms, success, True), np.asarray(success, dtype=bool) | away)
        linear = action[0, :3] if mask[0] else np.zeros(3)
        twist = Twist()
        twist.linear.x, twist.linear.y, twist.linear.z = (float(v) for v in linear * self.scale)
        self._twist_pub.publish(twist)
        wanted = (self.p["close_button"] if action[0, 3] > 0 else self.p["open_button"]) if mask[0] else None
        if wanted != self._held:
            if self._held is not None:
                self._button(self._held, 0)
            if wanted is not None:
                self._button(wanted, 1)
            self._held = wanted

    def _button(self, button: int, state: int) -> None:
        """A button event as spacenav_node sends it: buttons[0..button], only the last entry meaningful."""
        buttons = [0] * (button + 1)
        buttons[button] = state
        self._joy_pub.publish(Joy(axes=[0.0] * 6, buttons=buttons))


def main(args: list[str] | None = None) -> int:
    """Entry point of the `scripted_spacenav_node` executable."""
    return run_node(ScriptedSpacenavNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
