"""SIGKILL at any moment of a training run, then `resume=`: at most one checkpoint lost, nothing torn, nothing silent.

One run (tests/robo_rl/quick.py, checkpoints every INTERVAL env steps) is killed three times and resumed each
time through the command line's entry point (`python -m robo_rl.train resume=<run>`):

1. before its first checkpoint: the resume starts it again from step 0 with its recorded config, and says so;
2. in the middle of writing a checkpoint (the bytes of half the file written and synced): the newest complete
   checkpoint is the one before, the torn temporary file is removed on resume, and says so;
3. at an arbitrary step: the newest complete checkpoint is at most one behind the newest one handed to the
   background writer;

then a resume that asks to change the seed is refused with one line (status 2) and changes nothing; then
its newest checkpoint is truncated (a damaged disk) and the last resume falls back to the one before, naming
the damaged file, and completes the run. The run's own `.hydra` record stays as it was started; every resume
records itself under `.hydra_resumes/`. What a kill costs is `progress - resumed_from`: at most one
interval plus the steps trained while the newest checkpoint was being written (the next one waits for it).

The training processes are real processes killed with SIGKILL. To start each in well under a second they are
forked from a server that has imported robo-rl once (multiprocessing's forkserver), and run the module as
`python -m robo_rl.train` does (runpy). Two test-only instruments, installed in the child before it starts:
the progress bar writes the env steps reached (and the newest checkpoint handed to the writer) to a file the
test reads, and the checkpoint writer can be told to stop halfway through writing its n-th checkpoint.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml

from robo_rl.checkpoint import list_checkpoints, load_checkpoint
from tests.robo_rl.quick import QUICK

INTERVAL = 800  # env steps between checkpoints (50 iterations of 16 envs)
TOTAL = 4 * INTERVAL
ARGS = [*QUICK, f"total_env_steps={TOTAL}", "learning_starts=400", "eval.interval_env_steps=100000", "eval.episodes=4",
        f"checkpoint.interval_env_steps={INTERVAL}", "checkpoint.keep=3", "logging.tensorboard=false"]
TIMEOUT = 120  # s, for any one wait: far above what each step takes (seconds)


def _child(progress: str, pause_at: int, argv: list[str], log: str) -> None:
    """The training process: `python -m robo_rl.train <argv>`, instrumented (see the module docstring)."""
    import runpy

    import torch
    import tqdm

    from robo_rl.checkpoint import CheckpointWriter

    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    reached = {"steps": 0, "handed": -1}

    def record() -> None:  # the page cache outlives a SIGKILL: no fsync needed for the test to read it
        os.pwrite(fd, f"{reached['steps']} {reached['handed']}".ljust(48).encode(), 0)

    class Progress:
        """Stands in for tqdm's bar: counts the env steps the training loop reports."""

        def __init__(self, total: int | None = None, initial: int = 0, **_: object):
            reached["steps"] = initial
            record()

        def update(self, n: int) -> None:
            reached["steps"] += n
            record()

        def set_postfix(self, **_: object) -> None:
            pass

        def close(self) -> None:
            pass

    tqdm.tqdm = Progress
    submit = CheckpointWriter.submit

    def submit_and_record(self: CheckpointWriter, step: int, state: dict) -> None:
        submit(self, step, state)  # returns once the previous checkpoint is on disk and this one handed over
        reached["handed"] = step
        record()

    CheckpointWriter.submit = submit_and_record
    save, writes = torch.save, [0]

    def save_or_stop_halfway(obj: object, f: object, *args: object, **kwargs: object) -> None:
        if Path(str(getattr(f, "name", ""))).name.startswith(".checkpoint_"):
            writes[0] += 1
            if writes[0] == pause_at:
                buffer = io.BytesIO()
                save(obj, buffer, *args, **kwargs)
                data = buffer.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                Path(progress + ".paused").write_text(str(f.name))
                time.sleep(3600)  # the writer thread stops here; training goes on until the next checkpoint
        save(obj, f, *args, **kwargs)

    torch.save = save_or_stop_halfway
    warnings.simplefilter("ignore", RuntimeWarning)  # runpy: robo_rl.train is already imported (preloaded)
    sys.argv = ["robo_rl.train", *argv]
    runpy.run_module("robo_rl.train", run_name="__main__", alter_sys=True)


class Training:
    """A training process of the test (see `_child`), its progress file and its log."""

    def __init__(self, context: multiprocessing.context.BaseContext, directory: Path, name: str, argv: list[str],
                 pause_at: int = 0):
        self.progress, self.log = directory / f"{name}.progress", directory / f"{name}.log"
        self.process = context.Process(target=_child, args=(str(self.progress), pause_at, argv, str(self.log)))
        self.process.start()

    def reached(self) -> tuple[int, int]:
        """(env steps reached, newest checkpoint step handed to the writer or -1)."""
        text = self.progress.read_text().split() if self.progress.exists() else []
        return (int(text[0]), int(text[1])) if len(text) == 2 else (0, -1)

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            assert self.process.is_alive(), f"training exited ({self.process.exitcode}) before {what}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {what} after {TIMEOUT} s:\n{self.output()}"
            time.sleep(0.005)

    def kill(self) -> tuple[int, int]:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(TIMEOUT)
        assert self.process.exitcode == -signal.SIGKILL
        return self.reached()

    def output(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""


def _newest_step(run: Path) -> int:
    """The step a resume continues from: its newest intact checkpoint's, 0 without one; every checkpoint
    under its final name must load (none torn)."""
    for path in list_checkpoints(run):
        load_checkpoint(path)
    return load_checkpoint(run)["counters"]["env_steps"] if list_checkpoints(run) else 0


def test_sigkill_at_any_moment_loses_at_most_one_checkpoint_and_nothing_silently(tmp_path):
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["robo_rl.train", "tests.robo_rl.test_checkpoint_kill"])
    run = tmp_path / "run"
    losses = {}

    def lost(steps: int, handed: int, resumed_from: int) -> int:
        """Env steps a kill cost; at most INTERVAL, plus the steps trained since the newest checkpoint was
        handed to the writer if that one was still being written."""
        in_flight = resumed_from < handed
        assert resumed_from >= handed - INTERVAL  # at most the checkpoint in flight is lost, never two
        assert steps - resumed_from <= INTERVAL + (steps - handed if in_flight else 0)
        return steps - resumed_from

    # 1. before the first checkpoint, half an interval into training
    first = Training(context, tmp_path, "first", [*ARGS, f"hydra.run.dir={run}"])
    first.wait_for(lambda: first.reached()[0] >= INTERVAL // 2, "half an interval")
    steps, handed = first.kill()
    assert handed == -1 and steps < INTERVAL and not list_checkpoints(run) and (run / "config.yaml").is_file()
    losses["before the first checkpoint"] = lost(steps, handed, 0)

    # 2. during the write of the second checkpoint this process makes (at 2 * INTERVAL)
    second = Training(context, tmp_path, "second", [f"resume={run}"], pause_at=2)
    second.wait_for(lambda: Path(str(second.progress) + ".paused").exists(), "a checkpoint write")
    steps, handed = second.kill()
    torn = run / "checkpoints" / f".checkpoint_{2 * INTERVAL:012d}.pt.tmp"
    assert torn.is_file() and [p.name for p in list_checkpoints(run)] == [f"checkpoint_{INTERVAL:012d}.pt"]
    assert handed == 2 * INTERVAL and _newest_step(run) == INTERVAL  # the one being written is lost, no other
    losses["during a checkpoint write"] = lost(steps, handed, INTERVAL)
    assert "no checkpoint yet" in second.output() and "starts again from step 0" in second.output()

    # 3. at an arbitrary step between checkpoints
    third = Training(context, tmp_path, "third", [f"resume={run}"])
    third.wait_for(lambda: third.reached()[0] >= 2 * INTERVAL + INTERVAL // 2, "2.5 intervals")
    steps, handed = third.kill()
    assert f"removed {torn}" in third.output() and not torn.exists()
    losses["between checkpoints"] = lost(steps, handed, _newest_step(run))

    # a resume that would change the run's config: one line, status 2, nothing changed (its record included)
    record = (run / ".hydra" / "overrides.yaml").read_text()
    assert yaml.safe_load(record) == ARGS
    def contents() -> list[tuple[Path, int | None]]:  # (a folder's time changes as Hydra's record comes and goes)
        return sorted((p, p.stat().st_mtime_ns if p.is_file() else None) for p in run.rglob("*"))

    before = contents()
    refused = Training(context, tmp_path, "refused", [f"resume={run}", "seed=5", f"total_env_steps={2 * TOTAL}"])
    refused.process.join(TIMEOUT)
    assert refused.process.exitcode == 2, refused.output()
    assert refused.output().strip().splitlines()[-1].startswith(f"error: resume={run}: seed is 0 in the run and 5 here")
    assert contents() == before

    # 4. a damaged newest checkpoint: the resume falls back to the one before, names it, and completes the run
    newest = list_checkpoints(run)[-1]
    newest.write_bytes(newest.read_bytes()[:2000])
    last = Training(context, tmp_path, "last", [f"resume={run}"])
    last.process.join(TIMEOUT)
    assert last.process.exitcode == 0, last.output()
    assert f"skipping a damaged checkpoint: checkpoint {newest} is unreadable" in last.output()
    final = load_checkpoint(run)
    assert final["counters"]["env_steps"] == TOTAL and _newest_step(run) == TOTAL
    steps = [entry["env_steps"] for entry in final["history"]]
    assert steps[0] == 0 and steps[-1] == TOTAL and steps == sorted(steps)
    assert (run / "summary.json").is_file() and not list(run.rglob("*.tmp"))
    assert (run / "checkpoints" / f"{newest.name}.damaged").is_file()
    assert (run / ".hydra" / "overrides.yaml").read_text() == record  # never rewritten by a resume
    resumes = sorted((run / ".hydra_resumes").glob("*/overrides.yaml"), key=lambda p: p.stat().st_mtime_ns)
    assert [yaml.safe_load(p.read_text()) for p in resumes] == [
        [f"resume={run}"], [f"resume={run}"], [f"resume={run}"]]
    for what, steps in losses.items():
        print(f"kill {what}: {steps} env steps lost (checkpoint interval {INTERVAL})")


if __name__ == "__main__":  # pragma: no cover - run by pytest only
    pytest.main([__file__, "-q", "-s"])
