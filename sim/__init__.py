"""robo-rl simulators (MuJoCo, headless, seeded, batched). Importing registers the gymnasium ids and sends
MuJoCo's warnings to the "mujoco" logger (sim.mujoco_warnings) instead of MUJOCO_LOG.TXT in the working directory.

Ids: robo_rl/CrazyflieHover-v0, robo_rl/CrazyflieReach-v0, robo_rl/CrazyflieFigureEight-v0,
robo_rl/CrazyflieTakeoffLand-v0 (one per quadrotor task, sim.quadrotor.tasks), robo_rl/ArmPickCube-v0,
robo_rl/ArmReach-v0, robo_rl/SOArm100PickCube-v0, robo_rl/SOArm100Reach-v0.
`gymnasium.make(id, **overrides)` gives the single MuJoCo env; `gymnasium.make_vec(id, num_envs=N,
vectorization_mode="vector_entry_point", backend="mujoco_batch" | "torch")` the batched one.
"""

from sim.mujoco_warnings import route_mujoco_warnings
from sim.registration import ARM_ENV_IDS, QUADROTOR_ENV_IDS, register_envs

register_envs()
route_mujoco_warnings()

__all__ = ["ARM_ENV_IDS", "QUADROTOR_ENV_IDS", "register_envs"]
