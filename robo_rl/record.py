"""Record demonstrations as a Minari dataset: `python -m robo_rl.record env=pick_cube episodes=20`.

The scripted expert drives a batch of envs; every episode that ends in success is kept, until `episodes`
are accepted. The dataset lands under the Minari root (MINARI_DATASETS_PATH or ~/.minari/datasets) as
`dataset` (default `<env>/scripted-v0`), loadable by `minari.load_dataset` and by `python -m robo_rl.train
demos=<dataset>`.
"""

from __future__ import annotations

import hydra
import numpy as np
from omegaconf import DictConfig

from robo_rl.datasets import record_episodes, write_dataset
from robo_rl.envs import make_vector_env


def record(cfg: DictConfig) -> str:
    """Record `cfg.episodes` accepted episodes and write them as Minari dataset `cfg.dataset`; returns its path."""
    import torch

    env = make_vector_env(cfg.env, int(cfg.num_envs), torch.device("cpu"))
    if cfg.device != "scripted":
        raise ValueError(f"unknown demonstration device {cfg.device!r}; available: scripted")
    if not hasattr(env, "expert_actions"):
        raise ValueError(f"{cfg.env.id} has no scripted expert to record demonstrations from")
    rng = np.random.default_rng(int(cfg.seed))
    episodes = record_episodes(env, lambda obs: env.expert_actions(obs, float(cfg.expert_noise), rng),
                               int(cfg.episodes), seed=int(cfg.seed), progress=True)
    path = write_dataset(str(cfg.dataset), episodes, cfg.env.id, env.single_observation_space,
                         env.single_action_space, algorithm_name=f"{cfg.device} expert")
    steps = sum(len(e["actions"]) for e in episodes)
    print(f"wrote {len(episodes)} episodes ({steps} transitions) to {path}")
    return str(path)


@hydra.main(config_path="../configs", config_name="record", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    record(cfg)


if __name__ == "__main__":
    main()
