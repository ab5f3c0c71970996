"""What a checkpoint costs: size, write time (content digest, torch.save, fsync, rename) and load time (safe
load, digest check, finite check) of a default hover run's checkpoint whose replay holds N transitions.

A kill costs at most one checkpoint interval plus the env steps trained while the newest checkpoint was
being written (it is written in the background): this measures that write.

    .venv/bin/python bench/checkpoint_io.py --transitions 350000 500000
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra import compose, initialize_config_dir  # noqa: E402
from peers import BenchArgumentParser, Positive, Seed  # noqa: E402

from robo_rl.buffers import Source  # noqa: E402
from robo_rl.checkpoint import content_digest, load_checkpoint, save_checkpoint  # noqa: E402
from robo_rl.train import Trainer  # noqa: E402

CONFIGS = str(Path(__file__).resolve().parents[1] / "configs")


def main() -> None:
    parser = BenchArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, nargs="+", action=Positive, default=[350_000])
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=".") as scratch:
        with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
            cfg = compose(config_name="train", overrides=["logging.tensorboard=false", "logging.progress_bar=false",
                                                          "agent.compile=false", "env.compile=false", "num_envs=1"])
        print(f"{'transitions':>11s} {'size GB':>8s} {'digest s':>9s} {'write s':>8s} {'load s':>7s}")
        for count in args.transitions:
            trainer = Trainer(cfg, Path(scratch) / f"run_{count}")
            replay = trainer.replay.online
            fields = {key: torch.randn(count, *shape) for key, shape in replay.shapes.items()}
            replay.add(Source.ONLINE, **fields)
            state = {**trainer._policy_state(), "replay": trainer.replay.state_dict(), "history": trainer.history,
                     "rng": {}}
            size = sum(t.numel() * t.element_size() for t in _tensors(state["replay"]))
            start = time.perf_counter()
            content_digest(state)
            digest = time.perf_counter() - start
            start = time.perf_counter()
            path = save_checkpoint(trainer.run_dir, count, state)
            write = time.perf_counter() - start
            start = time.perf_counter()
            load_checkpoint(path)
            load = time.perf_counter() - start
            print(f"{count:11d} {size / 1e9:8.3f} {digest:9.2f} {write:8.2f} {load:7.2f}")


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


if __name__ == "__main__":
    main()
