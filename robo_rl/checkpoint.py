"""Checkpoints: written atomically, the last k kept, validated on load.

A checkpoint appears under its final name only once completely written and synced (write to a hidden
temporary file, fsync, rename, fsync the directory), so a process killed at any moment leaves either
the previous set of checkpoints or the new one, never a torn file. `CheckpointWriter` does the writing in a
background thread, so that training goes on while a checkpoint (mostly its replay buffer) goes to disk.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
from pathlib import Path
from typing import Any, Mapping

import torch

PATTERN = re.compile(r"^checkpoint_(\d{12})\.pt$")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not match the run it is loaded into."""


def checkpoint_dir(run_dir: str | Path) -> Path:
    """Where a run keeps its checkpoints."""
    return Path(run_dir) / "checkpoints"


BEST_POLICY = "best_policy.pt"


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 3) -> Path:
    """Write `state` as the checkpoint of `step` and delete all but the newest `keep` checkpoints."""
    directory = checkpoint_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    final = save_atomically(directory / f"checkpoint_{step:012d}.pt", state)
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return final


class CheckpointWriter:
    """Writes a run's checkpoints (`save_checkpoint`) in a background thread, at most one at a time.

    `submit` returns once the state is handed over: the caller must not modify what it passed (pass copies,
    e.g. `detached_copy`). A submit while the previous write is still going waits for it first, so at most
    one snapshot is held in memory. A failed write raises CheckpointError from the next `submit`, `wait` or
    `close`: nothing fails silently.
    """

    def __init__(self, run_dir: str | Path, keep: int = 3):
        self.run_dir, self.keep = Path(run_dir), keep
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
        self._pending: concurrent.futures.Future[Path] | None = None

    def submit(self, step: int, state: dict[str, Any]) -> None:
        """Start writing `state` as the checkpoint of `step` (after the previous write has finished)."""
        self.wait()
        self._pending = self._executor.submit(save_checkpoint, self.run_dir, step, state, self.keep)

    def wait(self) -> Path | None:
        """Block until the write in flight (if any) is on disk; its path, or None if none was in flight."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        try:
            return pending.result()
        except Exception as error:
            raise CheckpointError(f"writing a checkpoint to {checkpoint_dir(self.run_dir)} failed: {error}") from error

    def close(self) -> Path | None:
        """Finish the write in flight and stop the thread; returns what `wait` returns."""
        try:
            return self.wait()
        finally:
            self._executor.shutdown(wait=True)


def detached_copy(state: Any) -> Any:
    """A copy of nested dicts, lists and tuples in which every tensor is a copy: what a checkpoint written
    in the background may hold while the originals keep training."""
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, Mapping):
        return {key: detached_copy(value) for key, value in state.items()}
    if isinstance(state, list):
        return [detached_copy(value) for value in state]
    if isinstance(state, tuple):
        values = [detached_copy(value) for value in state]
        return type(state)(*values) if hasattr(state, "_fields") else tuple(values)
    return state


def save_best_policy(run_dir: str | Path, state: dict[str, Any]) -> Path:
    """Write the run's best evaluated policy (agent and env spec, no replay) to `<run_dir>/best_policy.pt`."""
    return save_atomically(Path(run_dir) / BEST_POLICY, state)


def save_atomically(final: Path, state: dict[str, Any]) -> Path:
    """torch.save `state` to `final` so that the file appears only complete (temporary file, fsync, rename)."""
    temporary = final.parent / f".{final.name}.tmp"
    with open(temporary, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, final)
    dir_fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def policy_file(run_dir: str | Path, which: str | None = "best") -> Path:
    """The checkpoint holding a run's policy: "best" (best evaluated, else newest), "last", or a file path."""
    run_dir = Path(run_dir)
    if which in (None, "best", "last"):
        if which == "best" and (run_dir / BEST_POLICY).is_file():
            return run_dir / BEST_POLICY
        found = list_checkpoints(run_dir)
        if not found:
            raise CheckpointError(f"no policy in {run_dir} (is it a run directory?)")
        return found[-1]
    return Path(which)


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    directory = checkpoint_dir(run_dir)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if PATTERN.match(p.name))


def load_checkpoint(path_or_run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The newest checkpoint of a run directory, or the given checkpoint file; CheckpointError if none loads."""
    path = Path(path_or_run_dir)
    if path.is_dir():
        found = list_checkpoints(path)
        if not found:
            raise CheckpointError(f"no checkpoint in {checkpoint_dir(path)} (is {path} a run directory?)")
        path = found[-1]
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as error:  # truncated, not a torch file, wrong pickle...
        raise CheckpointError(f"checkpoint {path} is unreadable: {error}") from error
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(f"{path} is not a robo-rl checkpoint")
    state["path"] = str(path)
    return state


def check_compatible(state: dict[str, Any], env_spec: dict[str, Any]) -> None:
    """Raise CheckpointError unless the checkpoint was trained on an env with this id and these spaces."""
    saved = state.get("env_spec", {})
    for key in ("id", "observation_size", "action_size", "observation_layout"):
        if saved.get(key) != env_spec.get(key):
            raise CheckpointError(
                f"checkpoint {state.get('path')} was trained on a different env: {key} is {saved.get(key)!r} "
                f"there, {env_spec.get(key)!r} here"
            )
