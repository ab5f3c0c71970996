"""robot_actor_node: the robot as an actor of a `runner=ray` learner (HIL-SERL's real-world loop).

It is arm_policy_node (same parameters, observation builder, safety filter, IK, limits, outputs; see that
module) with the policy replaced by the learner's newest actor, sampled for exploration
(robo_rl_ros.core.robot_actor), plus:
- a person's interventions from a SpaceMouse through spacenav_node: `twist_topic` (geometry_msgs/Twist) and
  `joy_topic` (sensor_msgs/Joy, the gripper buttons), read as robo_rl_ros.core.spacenav describes; while the
  person intervenes their action is applied and the transitions are tagged as interventions;
- the reward from a success detector on `success_topic` (std_msgs/Bool, the latest value is the verdict on
  the current state): 1 and the episode's end at the first tick it says success;
- the learner through robo_rl_ros.core.learner_link: Ray cluster `ray_address`, inbox `inbox` (the learner's
  `runner.inbox`); transitions go in batches, weights come back as the learner publishes them. While the
  learner does not answer, the node publishes no command (the controllers hold the last position) and the
  episode under way is dropped; it carries on after a reset once the learner answers again;
- evaluation episodes (HIL-SERL's measure on the robot): every `evaluate_every`-th episode runs the actor's
  mean action and counts as a success only without interventions. As each episode ends (or is dropped),
  before the scene is reset, `~/next_is_evaluation` (std_msgs/Bool, latched) says whether the next one is
  an evaluation, so that the person (their display, or a scripted person) knows to keep their hands off;
- resets between episodes: with `reset_service` (std_srvs/Trigger, e.g. the sim bridge's
  /arm_sim_bridge_node/reset, or a robot's own reset routine) the node calls it; without one the person puts
  the scene back and calls this node's `~/episode_ready` (std_srvs/Trigger).
Counts (episodes, successes, interventions, batches sent and dropped) are logged every `log_interval_s`.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from robo_rl_ros.arm_policy_node import ArmPolicyNode
from robo_rl_ros.core.learner_link import LearnerLink
from robo_rl_ros.core.robot_actor import ActorSettings, RobotActor
from robo_rl_ros.core.spacenav import SpacenavSettings, SpacenavTeleop
from robo_rl_ros.qos import LATCHED_QOS, SENSOR_QOS
from robo_rl_ros.spin import StartupError, run_node

RESET_TIMEOUT_S = 10.0  # a reset service that has not answered by then is called again


class RobotActorNode(ArmPolicyNode):
    """The robot actor node (parameters in config/robot_actor.yaml)."""

    def __init__(self) -> None:
        super().__init__("robot_actor_node")
        if self.controller.cameras:
            raise StartupError(f"robot_actor_node: {self.controller.bundle.directory} is a policy on camera images "
                               f"({', '.join(self.controller.cameras)}); the robot actor ships state observations to "
                               "the learner (runner=ray trains on state observations only): run it with arm_policy_node")
        p = {name: self.declare_parameter(name, default).value for name, default in {
            "ray_address": "auto", "inbox": "", "learner_timeout_s": 1.0, "retry_s": 1.0,
            "success_topic": "/pick_cube/success", "twist_topic": "/spacenav/twist", "joy_topic": "/spacenav/joy",
            "linear_scale": [1.0, 1.0, 1.0], "deadband": 0.05, "close_button": 0, "open_button": 1,
            "hold_s": 0.5, "teleop_timeout_s": 0.25,
            "episode_seconds": 10.0, "end_on_success": False, "steps_per_batch": 32, "seed": 0,
            "reset_service": "", "log_interval_s": 10.0, "evaluate_every": 0,
        }.items()}
        if not p["inbox"]:
            raise StartupError("robot_actor_node: parameter inbox (the learner's runner.inbox) is required")
        for name in ("episode_seconds", "learner_timeout_s", "retry_s", "hold_s", "teleop_timeout_s", "log_interval_s"):
            if not (math.isfinite(p[name]) and p[name] > 0):
                raise StartupError(f"robot_actor_node: {name} must be a finite number > 0 (seconds), got {p[name]}")
        if not (math.isfinite(p["deadband"]) and 0 <= p["deadband"] < 1):
            raise StartupError(f"robot_actor_node: deadband must be in [0, 1), got {p['deadband']}")
        if len(p["linear_scale"]) != 3 or not all(math.isfinite(v) and v != 0 for v in p["linear_scale"]):
            raise StartupError(f"robot_actor_node: linear_scale must be 3 finite non-zero numbers (spacenav_node's), "
                               f"got {list(p['linear_scale'])}")
        if p["steps_per_batch"] < 1:
            raise StartupError(f"robot_actor_node: steps_per_batch must be >= 1, got {p['steps_per_batch']}")
        if p["evaluate_every"] < 0:
            raise StartupError(f"robot_actor_node: evaluate_every must be >= 0 (0: no evaluation episodes), "
                               f"got {p['evaluate_every']}")
        try:
            self.teleop = SpacenavTeleop(SpacenavSettings(tuple(p["linear_scale"]), p["deadband"], p["close_button"],
                                                          p["open_button"], p["hold_s"], p["teleop_timeout_s"]))
        except (ValueError, TypeError) as error:
            raise StartupError(f"robot_actor_node: {error}") from error
        logging.getLogger("robo_rl_ros.core.learner_link").addHandler(_RosLogHandler(self))
        self.link = LearnerLink(p["ray_address"], p["inbox"], timeout_s=p["learner_timeout_s"], retry_s=p["retry_s"])
        episode_steps = max(int(round(p["episode_seconds"] / self._period)), 1)
        self.robot = RobotActor(self.controller, self.link, ActorSettings(episode_steps, p["steps_per_batch"], p["seed"],
                                                                          p["end_on_success"], p["evaluate_every"]))
        self._next_pub = self.create_publisher(Bool, "~/next_is_evaluation", LATCHED_QOS)
        self._announced = False  # the episode to come was announced
        self._success = False
        self.create_subscription(Bool, p["success_topic"], self._store_success, SENSOR_QOS)
        self.create_subscription(Twist, p["twist_topic"], self._store_twist, SENSOR_QOS)
        self.create_subscription(Joy, p["joy_topic"], self._store_joy, 10)  # button events: keep every one
        self._reset_client = self.create_client(Trigger, p["reset_service"]) if p["reset_service"] else None
        self._reset_call: tuple[float, object] | None = None  # (when, future) of the reset under way
        self._ready = False  # the scene is back at a start (the reset service said so, or the person)
        self._state_at_ready: object = None  # the joint state message we had then: the episode waits for a newer one
        if self._reset_client is None:
            self.create_service(Trigger, "~/episode_ready", self._on_episode_ready)
        self._reason = ""
        self._last_log = -np.inf
        self._log_interval = p["log_interval_s"]
        self.link.start()
        self.get_logger().info(f"robot actor: learner inbox {p['inbox']!r} at {p['ray_address']}, episodes of "
                               f"{episode_steps} ticks, interventions from {p['twist_topic']} and {p['joy_topic']}, "
                               f"success from {p['success_topic']}, resets "
                               + (f"by {p['reset_service']}" if self._reset_client else "by ~/episode_ready"))

    def destroy_node(self) -> None:
        self.link.close()
        super().destroy_node()

    def _store_success(self, msg: Bool) -> None:
        self._success = bool(msg.data)

    def _store_twist(self, msg: Twist) -> None:
        self.teleop.on_twist(self._now(), (msg.linear.x, msg.linear.y, msg.linear.z))

    def _store_joy(self, msg: Joy) -> None:
        self.teleop.on_joy(self._now(), list(msg.buttons))

    def _on_episode_ready(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._scene_ready()
        response.success, response.message = True, "the next episode starts when the learner answers"
        return response

    def _tick(self) -> None:
        now = self._now()
        self._take_state()
        if self.robot.needs_reset:
            if not self._announced:  # before the reset: the person lets go while the scene is put back
                self._next_pub.publish(Bool(data=self.robot.next_is_evaluation))
                self._announced = True
            self._reset(now)
        episodes = self.robot.episodes
        result = self.robot.tick(now, self.teleop.action(now), self._success)
        if self.robot.episodes > episodes:
            success, ticks, intervened = self.robot.last_episode
            kind = "evaluation episode" if self.robot.evaluating else "episode"
            self.get_logger().info(f"{kind} {self.robot.episodes}: {'success' if success else 'no success'} after "
                                   f"{ticks} ticks, {intervened} intervened; {self.robot.transitions} transitions")
        if result.moving:
            self._reason = ""
        elif result.reason != self._reason:  # once per change, not once per tick
            self._reason = result.reason
            self.get_logger().warn(f"not commanding: {result.reason}")
        if result.moving:
            self._publish(result)
        if now - self._last_log >= self._log_interval:
            self._last_log = now
            self._log_counts()

    def _reset(self, now: float) -> None:
        """Bring the scene back to a start, and begin the next episode once it is there, a joint state from
        after the reset has arrived, and the learner answers."""
        if not self.link.connected:
            return
        if self._ready:
            latest = self._joint_state[1] if self._joint_state is not None else None
            if latest is not None and latest is not self._state_at_ready:
                # the first command must start from where the reset left the arm, not from where it was before
                self._ready = False
                self._begin()
            return
        if self._reset_client is None:
            return  # the person calls ~/episode_ready
        if self._reset_call is None or now - self._reset_call[0] > RESET_TIMEOUT_S:
            if not self._reset_client.service_is_ready():
                return
            self._reset_call = (now, self._reset_client.call_async(Trigger.Request()))
            return
        future = self._reset_call[1]
        if future.done():
            self._reset_call = None
            if future.result() is not None and future.result().success:
                self._scene_ready()

    def _scene_ready(self) -> None:
        self._ready = True
        self._state_at_ready = self._joint_state[1] if self._joint_state is not None else None

    def _begin(self) -> None:
        self._success = False  # the detector's next message speaks for the new episode
        self.controller.new_episode()
        self.teleop.new_episode()
        self.robot.begin_episode()
        self._announced = False

    def _log_counts(self) -> None:
        r = self.robot
        evaluated = (f"; evaluation episodes {sum(s for _, s in r.evaluations)} of {len(r.evaluations)} succeeded "
                     f"without the person" if r.evaluations else "")
        self.get_logger().info(f"{r.episodes} episodes ({r.successes} successes, {r.dropped_episodes} dropped{evaluated}), "
                               f"{r.transitions} transitions ({r.intervention_steps} intervened), {self.link.sent} "
                               f"batches sent ({self.link.dropped} dropped), weights version {r.version}")


class _RosLogHandler(logging.Handler):
    """The learner link's warnings (connected, lost and why) in the node's log."""

    def __init__(self, node: RobotActorNode):
        super().__init__(logging.INFO)
        self.node = node

    def emit(self, record: logging.LogRecord) -> None:
        self.node.get_logger().warn(record.getMessage())


def main(args: list[str] | None = None) -> int:
    """Entry point of the `robot_actor_node` executable."""
    return run_node(RobotActorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
