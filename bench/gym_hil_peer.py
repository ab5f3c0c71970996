"""Peer benchmark: env steps/s of gym-hil's Panda pick-cube (LeRobot's HIL-SERL sim), state observations, or with
--image-obs its image observations (a front and a wrist camera, 128x128, rendered every step).

Run with a Python that has `gym-hil` and `mujoco==3.3.7` (its controller calls mj_fullM on MjData.qM), headless
with MUJOCO_GL=osmesa (it builds a renderer in its constructor). Random actions in its action space,
pre-sampled; episodes reset when they end. Prints JSON to --json.

    MUJOCO_GL=osmesa python bench/gym_hil_peer.py --seconds 3 --json out.json
"""

from __future__ import annotations

import json
import statistics
import time
from importlib import metadata

import gymnasium as gym
from peers import BenchArgumentParser, Positive, Seed

ENV_ID = "gym_hil/PandaPickCubeBase-v0"


def main() -> None:
    """Measure and write JSON."""
    parser = BenchArgumentParser()
    parser.add_argument("--seconds", type=float, action=Positive, default=3.0)
    parser.add_argument("--repeats", type=int, action=Positive, default=3)
    parser.add_argument("--json", required=True)
    parser.add_argument("--image-obs", action="store_true")
    args = parser.parse_args()
    import gym_hil  # noqa: F401  (registers its ids)

    env = gym.make(ENV_ID, **({"image_obs": True} if args.image_obs else {}))
    base = env.unwrapped
    env.reset(seed=0)
    actions = [env.action_space.sample() for _ in range(256)]
    model = base.model if hasattr(base, "model") else base._model
    control_dt = float(getattr(base, "control_dt", getattr(base, "_control_dt", 0.1)))
    substeps = int(round(control_dt / model.opt.timestep))
    rates = []
    for window in range(args.repeats + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < (args.seconds if window else 0.5):
            _, _, terminated, truncated, _ = env.step(actions[steps % len(actions)])
            steps += 1
            if terminated or truncated:
                env.reset()
        if window:
            rates.append(steps / (time.perf_counter() - start))
    rate = statistics.median(rates)
    obs = env.observation_space.sample()
    images = [k for k, v in _flat(obs).items() if getattr(v, "ndim", 0) == 3]
    result = {"env_id": ENV_ID, "image_obs": args.image_obs, "images_per_step": len(images),
              "image_shapes": [list(_flat(obs)[k].shape) for k in images], "gym_hil_version": metadata.version("gym-hil"), "mujoco": metadata.version("mujoco"),
              "control_hz": 1.0 / control_dt, "substeps": substeps, "env_steps_per_s": rate,
              "physics_steps_per_s": rate * substeps}
    with open(args.json, "w") as f:
        json.dump(result, f)
    print(json.dumps(result))


def _flat(obs: object, prefix: str = "") -> dict:
    """A nested observation's leaves by dotted key."""
    if isinstance(obs, dict):
        leaves: dict = {}
        for key, value in obs.items():
            leaves.update(_flat(value, f"{prefix}{key}."))
        return leaves
    return {prefix.rstrip("."): obs}


if __name__ == "__main__":
    main()
