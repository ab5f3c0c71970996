"""A learned reward, as SERL and HIL-SERL use where a robot has no success signal: a binary classifier of
camera images (success or not), trained from labelled frames, whose verdict on each new observation is the
reward of a training run (`python -m robo_rl.train reward_classifier=<file>`).

    python -m robo_rl.success_classifier dataset=<Minari id or folder> out=<file.pt> [epochs=30] [seed=0] [device=auto]

The frames are a recorded dataset's images (`python -m robo_rl.record` with cameras), each labelled by the
`is_success` the recorder stored for the step that led to it (the simulator's verdict; on a robot, the
person's). Episodes are split 80/20 into training and held-out frames; the command prints precision and
recall on the held-out frames and writes them into the file and beside it (`<out>.json`). The network is the
agents' image encoder stack (per camera 3x3 convolutions, flattened and joined) with a small head; training
shifts images as DrQ does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from robo_rl.agents.encoders import conv_stack, flat_size, pixels, random_shift
from robo_rl.cli import check_new_file, command, key_values, remove_made_folders
from sim.errors import ConfigError

FORMAT = 1
THRESHOLD = 0.5  # probability above which a frame counts as a success


class SuccessClassifier(nn.Module):
    """Camera images {name: (B, H, W, 3) uint8} -> the logit of success (B,)."""

    def __init__(self, images: Mapping[str, Sequence[int]], channels: Sequence[int] = (16, 32, 32, 32),
                 strides: Sequence[int] = (2, 2, 2, 1), hidden: int = 64, threshold: float = THRESHOLD):
        super().__init__()
        self.threshold = threshold
        self.images = {name: tuple(shape) for name, shape in sorted(images.items())}
        self.settings = {"channels": list(channels), "strides": list(strides), "hidden": hidden}
        self.convs = nn.ModuleDict({name: conv_stack(channels, strides) for name in self.images})
        flat = sum(flat_size(self.convs[name], shape, name) for name, shape in self.images.items())
        self.head = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B,) of observations holding (at least) this classifier's cameras."""
        return self.head(torch.cat([self.convs[name](pixels(obs[name])) for name in self.images], -1)).squeeze(-1)

    @torch.no_grad()
    def success(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Whether each observation shows a success (B,) bool: its probability above `threshold`."""
        return torch.sigmoid(self(obs)) > self.threshold


def split_episodes(episodes: int, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Episode indices for training and for held-out evaluation (at least one each)."""
    order = np.random.default_rng(seed).permutation(episodes)
    count = min(max(1, int(round(held_out * episodes))), episodes - 1)
    return np.sort(order[count:]), np.sort(order[:count])


def precision_recall(predicted: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Precision, recall and accuracy of boolean predictions against labels, with the counts behind them."""
    true_positive = int((predicted & labels).sum())
    precision = true_positive / max(int(predicted.sum()), 1)
    recall = true_positive / max(int(labels.sum()), 1)
    return {"precision": precision, "recall": recall, "accuracy": float((predicted == labels).mean()),
            "frames": int(len(labels)), "successes": int(labels.sum())}


def train_classifier(frames: Mapping[str, np.ndarray], labels: np.ndarray, episode: np.ndarray, epochs: int = 30,
                     seed: int = 0, held_out: float = 0.2, batch_size: int = 128, shift: int = 4,
                     device: str | torch.device = "cpu", progress: bool = False) -> tuple[SuccessClassifier, dict[str, Any]]:
    """A classifier trained on the frames of 80% of the episodes, and its scores on the other 20%'s frames."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    train_episodes, test_episodes = split_episodes(int(episode.max()) + 1, held_out, seed)
    train_rows, test_rows = np.isin(episode, train_episodes), np.isin(episode, test_episodes)
    model = SuccessClassifier({name: images.shape[1:] for name, images in frames.items()}).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = {name: torch.as_tensor(images) for name, images in frames.items()}
    target = torch.as_tensor(labels, dtype=torch.float32)
    rows = torch.as_tensor(np.flatnonzero(train_rows))
    positives = float(target[rows].mean())
    # balance the classes: a success is rarer than its absence in most recordings
    weight = torch.tensor((1.0 - positives) / max(positives, 1e-6))
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=weight.to(device))
    generator = torch.Generator().manual_seed(seed)
    for _ in tqdm(range(epochs), desc="train classifier", unit="epoch", disable=not progress):
        for batch in rows[torch.randperm(len(rows), generator=generator)].split(batch_size):
            obs = {name: random_shift(images[batch], torch.randint(0, 2 * shift + 1, (len(batch), 2),
                                                                    generator=generator), shift).to(device)
                   for name, images in data.items()}
            loss = loss_fn(model(obs), target[batch].to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    test = np.flatnonzero(test_rows)
    predicted = np.concatenate([model.success({n: v[torch.as_tensor(chunk)].to(device) for n, v in data.items()}).cpu().numpy()
                                for chunk in np.array_split(test, max(1, len(test) // 256))])
    scores = {**precision_recall(predicted, labels[test].astype(bool)), "train_frames": int(train_rows.sum()),
              "held_out_episodes": test_episodes.tolist(), "epochs": epochs, "seed": seed}
    return model, scores


def save_classifier(model: SuccessClassifier, scores: Mapping[str, Any], path: Path, dataset: str) -> None:
    """Write the classifier (weights, cameras, settings, its held-out scores) to `path`."""
    from robo_rl.checkpoint import write_atomically

    state = {"format": FORMAT, "images": {k: list(v) for k, v in model.images.items()}, "settings": model.settings,
             "weights": model.state_dict(), "scores": dict(scores), "dataset": dataset, "threshold": model.threshold}
    write_atomically(path, lambda f: torch.save(state, f))


def load_classifier(path: str | Path, images: Mapping[str, Sequence[int]] | None = None,
                    device: str | torch.device = "cpu") -> SuccessClassifier:
    """The classifier in `path`; ConfigError if it is not one, or if `images` (the env's cameras) lacks a
    camera it reads or has it at another size."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model = SuccessClassifier(state["images"], **state["settings"], threshold=float(state["threshold"]))
        model.load_state_dict(state["weights"])
        if not 0.0 < model.threshold < 1.0:
            raise ValueError(f"threshold {model.threshold}")
    except FileNotFoundError:
        raise ConfigError(f"reward_classifier={path}: no such file") from None
    except Exception as error:  # noqa: BLE001 (a file that is not a classifier fails in many ways)
        raise ConfigError(f"reward_classifier={path} is not a success classifier written by "
                          f"python -m robo_rl.success_classifier ({type(error).__name__})") from None
    if images is not None:
        for name, shape in model.images.items():
            if tuple(images.get(name, ())) != tuple(shape):
                raise ConfigError(f"reward_classifier={path} reads camera {name!r} at {list(shape)}; the env has "
                                  f"{ {k: list(v) for k, v in images.items()} }")
    return model.to(device).eval()


def is_classifier(path: Path) -> bool:
    """Whether `path` holds a success classifier (`load_classifier` reads it)."""
    try:
        load_classifier(path)
    except ConfigError:
        return False
    return True


def check_output(given: str) -> Path:
    """The classifier file `out=` names; ConfigError unless it is a new file ending .pt in a folder that is (or can
    be) made, or an earlier classifier, which is replaced with the scores beside it (`<out>.json`). A run's
    `summary.json` was replaced by `out=<run>/summary`, whose scores file it was."""
    out = check_new_file(given, ".pt", "out", is_classifier)
    if not out.exists() and Path(f"{out}.json").exists():
        raise ConfigError(f"out={out}: {out}.json, where its scores go, exists already and belongs to no classifier "
                          "there; give a new path")
    return out


@command
def main(argv: list[str]) -> None:
    """`key=value` arguments: dataset (required), out (required), epochs, seed."""
    usage = ("usage: python -m robo_rl.success_classifier dataset=<Minari id or folder> out=<file.pt> [epochs=30] "
             "[seed=0] [device=auto]")
    args = key_values(argv, {"dataset": str, "out": str, "epochs": (int, 1), "seed": int, "device": str}, usage)
    if "out" not in args:
        raise ConfigError(f"out=<file.pt> is required; {usage}")
    from robo_rl.datasets import load_labelled_frames
    from robo_rl.options import check_device
    from robo_rl.train import select_device

    check_device(args.get("device", "auto"))
    device = select_device(args.get("device", "auto"))
    out = check_output(args["out"])
    frames, labels, episode = load_labelled_frames(args["dataset"])
    created = [parent for parent in out.parents if not parent.exists()]  # deepest first: removed on a failure
    out.parent.mkdir(parents=True, exist_ok=True)  # before the training, not after
    try:
        model, scores = train_classifier(frames, labels, episode, epochs=args.get("epochs", 30),
                                         seed=args.get("seed", 0), device=device, progress=True)
        save_classifier(model, scores, out, args["dataset"])
        Path(f"{out}.json").write_text(json.dumps(scores, indent=2))
    except BaseException:  # Ctrl-C included: the folders made for the classifier go again, if still empty
        remove_made_folders(created)
        raise
    print(f"held-out frames: {scores['frames']} ({scores['successes']} successes) of episodes "
          f"{scores['held_out_episodes']}: precision {scores['precision']:.3f}, recall {scores['recall']:.3f}, "
          f"accuracy {scores['accuracy']:.3f}; wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
