"""Figures: learning curves (one run, or several runs compared) and the robustness suite's heatmap."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np


def _pyplot() -> Any:
    """matplotlib's pyplot on the headless backend, imported on first use (~0.6 s that a process which never
    plots, a CLI's one-line error included, does not pay)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> None:
    """`fig` as a PNG at `path`, which appears only complete (`write_atomically`): a Ctrl-C or a full disk while
    plotting left a torn image beside a finished record, or over the previous one."""
    from robo_rl.checkpoint import write_atomically

    write_atomically(Path(path), lambda f: fig.savefig(f, format="png", dpi=110))


def plot_learning_curve(history: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Evaluation success rate and return against env steps (and wall-clock) as a PNG."""
    steps = [h["env_steps"] for h in history]
    plt = _pyplot()
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
    _save(fig, path)
    plt.close(fig)
    return path


def plot_comparison(histories: Mapping[str, Sequence[dict]], path: str | Path, title: str = "") -> Path:
    """Evaluation success of several runs (label -> history) against env steps and wall-clock, as a PNG."""
    plt = _pyplot()
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
    _save(fig, path)
    plt.close(fig)
    return path


def plot_robustness_heatmap(row_labels: Sequence[str], column_labels: Sequence[str], success: np.ndarray,
                            path: str | Path, title: str = "", specialist: np.ndarray | None = None) -> Path:
    """Success rates (rows, columns) in [0, 1] as a heatmap PNG, each cell annotated in %, with a
    specialist's rate below it where `specialist` (same shape, nan where none) has one."""
    success = np.asarray(success, dtype=float)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.1 * len(column_labels) + 3.5, 0.45 * len(row_labels) + 1.8))
    image = ax.imshow(100 * success, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    for i in range(success.shape[0]):
        for j in range(success.shape[1]):
            text = f"{100 * success[i, j]:.0f}"
            if specialist is not None and np.isfinite(specialist[i, j]):
                text += f"\n({100 * specialist[i, j]:.0f})"
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(column_labels)), column_labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(row_labels)), row_labels, fontsize=8)
    fig.colorbar(image, ax=ax, label="success [%]" + (" (in brackets: the specialist's)" if specialist is not None else ""))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    _save(fig, path)
    plt.close(fig)
    return path
