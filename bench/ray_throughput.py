"""Throughput of `runner=ray` on this machine, measured against the local runner in the same run:

1. env steps/s collected through 1, 2 and 4 Ray actors into the learner's replay buffers (the learner only
   stores: collection and transport are what is measured);
2. the learner's SAC updates/s alone, and while actors collect and it stores what they send;
3. per transition: the local runner's collection step (act, step, store), the Ray path's wall time, and the
   learner's own time per transition (fetching a batch from the object store and storing it), which is
   what bounds the actors one learner can absorb;
4. from those, on paper, what N machines and one learner give, and where the learner saturates.

    .venv/bin/python bench/ray_throughput.py [--seconds 15] [--actors 1 2 4] [--envs 32] [--task hover|pick_cube]

`--task hover`: the default hover recipe's env (the generated C++ step), actor network and update
(configs/train.yaml); `--task pick_cube`: `+experiment=pick_cube_hil`'s (the MuJoCo batch, HIL-SERL's
networks). One thread per actor and for the learner. On a machine with fewer cores than actors + learner, they share
cores: the table prints the core count. Needs an idle machine. Writes bench/results/ray_throughput_<task>.json.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from peers import BenchArgumentParser, Positive, Seed, machine_line, write_results

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from robo_rl.agents.sac import SAC, SACConfig  # noqa: E402
from robo_rl.buffers import MixedReplay, ReplayBuffer  # noqa: E402
from robo_rl.collector import Collector  # noqa: E402
from robo_rl.distributed.actors import CollectRequest, EnvSettings, Weights  # noqa: E402
from robo_rl.distributed.cluster import ray_cluster  # noqa: E402
from robo_rl.distributed.learner import ActorPool, as_collected  # noqa: E402
from robo_rl.envs import env_spec, make_vector_env  # noqa: E402


TASKS = {"hover": [], "pick_cube": ["+experiment=pick_cube_hil"]}


def config(task: str, actors: int, envs: int) -> Any:
    """configs/train.yaml for `task` with runner=ray, `actors` actors of `envs` envs, one thread each."""
    with initialize_config_dir(config_dir=str(ROOT.parent / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=[
            *TASKS[task], "runner=ray", f"runner.num_actors={actors}", f"runner.envs_per_actor={envs}",
            f"num_envs={envs}", "runner.actor_threads=1", "torch_threads=1"])


class Learner:
    """The pieces of the learner this benchmark drives: agent and replay buffers as robo_rl.train builds them."""

    def __init__(self, cfg: Any):
        torch.set_num_threads(int(cfg.torch_threads))
        self.privileged = bool(cfg.env.get("privileged_observation", False))
        env = make_vector_env(cfg.env, 1, torch.device("cpu"), threads=1, privileged=self.privileged)
        self.spec = env_spec(env, cfg.env.id)
        self.privileged_size = int(env.privileged_size) if self.privileged else None
        space = env.single_action_space
        self.agent = SAC(self.spec["observation_size"], space.low, space.high,
                         SACConfig(**OmegaConf.to_container(cfg.agent, resolve=True)), critic_obs_dim=self.privileged_size)
        obs, act = self.spec["observation_size"], self.spec["action_size"]
        self.replay = MixedReplay(*(ReplayBuffer(1_000_000, obs, act, self.privileged_size) for _ in range(2)))
        self.batch = self.agent.config.batch_size * self.agent.config.critic_updates_per_actor_update
        env.close()

    def store(self, chunk: dict[str, Any]) -> None:
        """What RayTrainer does with a batch: copy out of the object store, add by source."""
        for source, transitions in as_collected(chunk).tagged:
            self.replay.add(source, **transitions)

    def update(self) -> None:
        self.agent.update(self.replay.sample(self.batch))


def settings(cfg: Any, learner: Learner) -> EnvSettings:
    plain = lambda node: OmegaConf.to_container(node, resolve=True)  # noqa: E731
    return EnvSettings(env=plain(cfg.env), agent=plain(cfg.agent), intervention={"kind": "none"}, spec=learner.spec,
                       privileged=learner.privileged, seed=0, num_actors=int(cfg.runner.num_actors))


def local_rate(cfg: Any, learner: Learner, seconds: float) -> dict[str, float]:
    """The local runner's collection: env steps/s and microseconds per transition (act, step, store)."""
    env = make_vector_env(cfg.env, int(cfg.num_envs), torch.device("cpu"), threads=1, privileged=learner.privileged)
    collector = Collector(env, torch.device("cpu"), privileged=learner.privileged)
    collector.reset(0)
    act = lambda obs: learner.agent.act(obs)  # noqa: E731
    for _ in range(50):
        collector.step(act, 0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for source, transitions in collector.step(act, steps).tagged:
            learner.replay.add(source, **transitions)
        steps += collector.num_envs
    elapsed = time.perf_counter() - start
    env.close()
    return {"env_steps_per_s": steps / elapsed, "us_per_transition": 1e6 * elapsed / steps}


def ray_rate(cfg: Any, learner: Learner, seconds: float, with_updates: bool) -> dict[str, float]:
    """Through Ray: env steps/s into the replay buffers, the learner's time per stored transition, and (with
    `with_updates`) its updates/s while it stores what arrives between updates."""
    import ray

    with ray_cluster(cfg.runner):
        pool = ActorPool(settings(cfg, learner), cfg.runner, eval_episodes=1, eval_seed=0)
        state = {k: v.detach().cpu() for k, v in learner.agent.actor.state_dict().items()}
        request = CollectRequest(Weights(0, [ray.put(state)]), random_actions=False, difficulty=None, generation=0)
        try:
            for index in range(pool.size):
                for _ in range(int(cfg.runner.chunks_in_flight)):
                    pool.submit(index, request)
            while not all(pool.started):  # workers started, envs built, kernels loaded
                index, _ = pool.next_chunk()
                pool.submit(index, request)
            steps = updates = 0
            storing = 0.0
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                if with_updates:
                    ready, _ = ray.wait(list(pool.pending), num_returns=len(pool.pending), timeout=0)
                    arrived = [_take(pool, ref) for ref in ready]
                else:
                    arrived = [pool.next_chunk()]
                for index, chunk in arrived:
                    pool.submit(index, request)
                    began = time.perf_counter()
                    learner.store(chunk)
                    storing += time.perf_counter() - began
                    steps += chunk["env_steps"]
                if with_updates:
                    learner.update()
                    updates += 1
            elapsed = time.perf_counter() - start
        finally:
            pool.close()
    return {"env_steps_per_s": steps / elapsed, "us_per_transition": 1e6 * elapsed / max(steps, 1),
            "learner_store_us_per_transition": 1e6 * storing / max(steps, 1), "updates_per_s": updates / elapsed}


def _take(pool: ActorPool, ref: Any) -> tuple[int, dict[str, Any]]:
    """A batch that ray.wait reported ready (fetching it counts as the learner's storing time)."""
    import ray

    index = pool.pending.pop(ref)[0]
    return index, ray.get(ref)


def update_rate(learner: Learner, seconds: float) -> float:
    """The learner's updates/s with nothing else running."""
    for _ in range(20):
        learner.update()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        learner.update()
        count += 1
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, action=Positive, default=15.0)
    parser.add_argument("--actors", type=int, nargs="+", action=Positive, default=[1, 2, 4])
    parser.add_argument("--envs", type=int, action=Positive, default=32)
    parser.add_argument("--task", choices=sorted(TASKS), default="hover")
    args = parser.parse_args()
    print(machine_line())
    cores = os.cpu_count() or 1
    cfg = config(args.task, 1, args.envs)
    learner = Learner(cfg)
    local = local_rate(cfg, learner, args.seconds)  # also fills the buffers the updates sample from
    alone = update_rate(learner, args.seconds)
    rows = {}
    for actors in args.actors:
        rows[actors] = ray_rate(config(args.task, actors, args.envs), learner, args.seconds, with_updates=False)
        print(f"{actors} actors: {rows[actors]['env_steps_per_s']:,.0f} env steps/s", flush=True)
    busy = ray_rate(config(args.task, 1, args.envs), learner, args.seconds, with_updates=True)
    per_iteration = int(cfg.updates_per_iteration)
    utd_bound = alone * args.envs / per_iteration  # env steps/s at which the learner's updates keep the ratio
    store_bound = 1e6 / rows[args.actors[0]]["learner_store_us_per_transition"]
    one = rows[args.actors[0]]["env_steps_per_s"] / args.actors[0]

    print(f"\n{cores} cores; {args.task} env, {args.envs} envs per actor, the recipe's network and update, 1 thread each")
    print(f"local runner (collect + store, no updates):  {local['env_steps_per_s']:>10,.0f} env steps/s  "
          f"{local['us_per_transition']:6.2f} us/transition")
    for actors, row in rows.items():
        print(f"ray, {actors} actor{'s' if actors > 1 else ' '} (learner stores only):   {row['env_steps_per_s']:>10,.0f} env steps/s  "
              f"{row['us_per_transition']:6.2f} us/transition wall, learner {row['learner_store_us_per_transition']:5.2f} us")
    print(f"learner updates/s alone: {alone:,.0f}; with 1 actor collecting and the learner storing between updates: "
          f"{busy['updates_per_s']:,.0f} ({busy['env_steps_per_s']:,.0f} env steps/s arriving)")
    print(f"\non paper: one actor (1 core) gives ~{one:,.0f} env steps/s; the learner keeps the update-to-data ratio "
          f"({per_iteration} updates per {args.envs} env steps) up to {utd_bound:,.0f} env steps/s and stores up to "
          f"{store_bound:,.0f}/s,")
    saturation = min(utd_bound, store_bound)
    print(f"so it saturates at ~{saturation:,.0f} env steps/s: {saturation / one:.1f} actor cores. Beyond that, more "
          "machines add nothing unless the learner updates faster (a GPU) or the ratio is lowered.")
    for machines in (1, 2, 4, 8):
        for per_machine in (8, 16):
            offered = machines * per_machine * one
            print(f"  {machines} machines x {per_machine} actors: {offered:>12,.0f} env steps/s offered, "
                  f"{min(offered, saturation):>10,.0f} trained at the ratio")
    write_results(ROOT / "results" / f"ray_throughput_{args.task}.json", {
        "task": args.task, "cores": cores, "envs_per_actor": args.envs, "seconds": args.seconds, "local": local, "ray": rows,
        "updates_per_s_alone": alone, "with_updates": busy, "utd_bound": utd_bound, "store_bound": store_bound})


if __name__ == "__main__":
    main()
