"""A bundle's pick-cube policy through the ROS 2 arm node's core, in-process, on the joint-position arm that
the arm sim bridge runs: success and time to lift over seeded cube placements.

    .venv/bin/python bench/arm_pick_through_core.py <bundle> [--seeds 20] [--bridge sim_arm_bridge.yaml]
        [--policy sim_arm_policy.yaml]

Each control tick does what arm_policy_node does (robo_rl_ros.core.arm: the observation from the joint state,
the cube pose where the policy reads it, and the cameras' images for a policy on camera images; the ONNX
policy, IK and limits) and what arm_sim_bridge_node does between ticks (the joint PD with gravity compensation
of sim.arm.joint_position, the cameras rendered as in training), with the gains and limits of the named
parameter files in ros2_ws/src/robo_rl_ros/config; no DDS, so it isolates the policy and the joint-space
tracking from ROS's latency.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from peers import BenchArgumentParser, Positive, Seed

from robo_rl_ros.core.arm import ArmPolicyController, ArmSettings
from robo_rl_ros.core.bundle import BundleError, load_bundle
from sim.arm.joint_position import JointGains, SimulatedArm

CONFIG = Path(__file__).resolve().parents[1] / "ros2_ws" / "src" / "robo_rl_ros" / "config"


def parameters(file: str, node: str) -> dict:
    """A node's parameters from one of the package's parameter files."""
    return yaml.safe_load((CONFIG / file).read_text())[node]["ros__parameters"]


def pick(bundle, seed: int, gains: JointGains, max_joint_speed: float) -> float | None:
    """Seconds from the first command to the lift for the cube placement of `seed`, None if not lifted in the
    task's episode."""
    scene = dict(bundle.env_config, randomization={"enabled": False})
    if isinstance(scene.get("cameras"), dict):
        scene["cameras"] = {**scene["cameras"], "randomization": {"enabled": False}}
    sim = SimulatedArm(scene, gains, seed)
    try:
        controller = ArmPolicyController(bundle, ArmSettings((0.5, 0.0, 0.2), max_joint_speed=max_joint_speed))
        names = [*controller.chain.joints, controller.chain.gripper_joint]
        index = [list(sim.names).index(name) for name in names]
        substeps = int(round(1.0 / (bundle.control_hz * sim.dt)))
        for tick in range(int(bundle.env_config["episode_seconds"] * bundle.control_hz)):
            now = tick / bundle.control_hz
            state = sim.state()
            controller.update_joint_state(now, names, [state.positions[i] for i in index],
                                          [state.velocities[i] for i in index])
            controller.update_object(state.cube_position)
            for camera, image in sim.images().items():
                controller.update_image(camera, now, image)
            result = controller.tick(now)
            if result.joint_command is not None:
                sim.command_arm(result.joint_command)
                sim.command_gripper(result.gripper_command)
            for _ in range(substeps):
                sim.step()
            if sim.succeeded_at is not None:
                return sim.succeeded_at
        return None
    finally:
        sim.close()


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("--seeds", type=int, action=Positive, default=20)
    parser.add_argument("--bridge", default="sim_arm_bridge.yaml", help="the bridge's parameter file (joint PD)")
    parser.add_argument("--policy", default="sim_arm_policy.yaml", help="the node's parameter file (joint speed)")
    args = parser.parse_args()
    try:
        bundle = load_bundle(args.bundle)
        bridge, node = parameters(args.bridge, "arm_sim_bridge_node"), parameters(args.policy, "arm_policy_node")
    except (BundleError, OSError, KeyError) as error:
        raise SystemExit(f"error: {error}") from None
    gains = JointGains(tuple(bridge["kp"]), tuple(bridge["kd"]))
    times = [pick(bundle, seed, gains, float(node["max_joint_speed"])) for seed in range(args.seeds)]
    lifted = [t for t in times if t is not None]
    print(f"{bundle.env_id} ({', '.join(c.name for c in bundle.cameras) or 'state'}), {args.bridge}: lifted "
          f"{len(lifted)}/{args.seeds} seeded placements"
          + (f", {min(lifted):.2f}-{max(lifted):.2f} s (median {np.median(lifted):.2f} s) of simulated time"
             if lifted else ""))
    print("not lifted: seeds", [seed for seed, t in enumerate(times) if t is None] or "none")


if __name__ == "__main__":
    main()
