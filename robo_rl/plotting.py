"""Learning-curve figures: one run, or several runs compared."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless
import matplotlib.pyplot as plt  # noqa: E402


def plot_learning_curve(history: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Evaluation success rate and return against env steps (and wall-clock) as a PNG."""
    steps = [h["env_steps"] for h in history]
    fig, (ax_success, ax_return) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_success.plot(steps, [100 * h["success_rate"] for h in history], marker="o")
    ax_success.set(xlabel="env steps", ylabel="evaluation success [%]", ylim=(-2, 102))
    ax_return.plot(steps, [h["mean_return"] for h in history], marker="o", color="tab:orange")
    ax_return.set(xlabel="env steps", ylabel="evaluation mean return")
    for ax in (ax_success, ax_return):
        ax.grid(alpha=0.3)
    if history:
        last = history[-1]
        fig.suptitle(f"{title}  (last: {100 * last['success_rate']:.0f}% success at "
                     f"{last['env_steps']:,} steps, {last['wall_seconds']:.0f} s)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_comparison(histories: Mapping[str, Sequence[dict]], path: str | Path, title: str = "") -> Path:
    """Evaluation success of several runs (label -> history) against env steps and wall-clock, as a PNG."""
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, history in histories.items():
        success = [100 * h["success_rate"] for h in history]
        ax_steps.plot([h["env_steps"] for h in history], success, marker="o", label=label)
        ax_time.plot([h["wall_seconds"] / 60 for h in history], success, marker="o", label=label)
    ax_steps.set(xlabel="env steps", ylabel="evaluation success [%]", ylim=(-2, 102))
    ax_time.set(xlabel="wall-clock [min]", ylabel="evaluation success [%]", ylim=(-2, 102))
    for ax in (ax_steps, ax_time):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
