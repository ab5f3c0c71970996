"""The fuzz harness: seeded structure-aware mutations, and one tally per loader of what each input gave.

Every input ends one of four ways: accepted (and its outputs must all be finite), refused with a user
error (`robo_rl.cli.is_user_error`: what the CLIs print as one line and exit 2 on), a raw traceback (any
other exception: a finding), or a hang (over the per-input time bound). Files: every loader runs with a
sandbox as its working directory; nothing may appear or change there outside the folders the loader owns,
nor among the repository's own files.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from robo_rl.cli import is_user_error

SEED = 30  # fixed: the same inputs every run
ROOT = Path(__file__).resolve().parents[2]
INPUT_TIME_BOUND_S = 20.0  # a generous bound for one input on a loaded 2-core machine; ~10-100 ms is typical


class Hang(BaseException):
    """An input ran past the time bound (a BaseException: no loader's `except Exception` may swallow it)."""


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread once `seconds` have passed (checked between Python bytecodes)."""
    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def non_finite(value: Any, path: str = "output") -> str | None:
    """Where `value` (nested dicts, lists, arrays, tensors, numbers) holds a NaN or Inf, or None."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            return path
        return None
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        for key, item in value.items():
            found = non_finite(item, f"{path}.{key}")
            if found:
                return found
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = non_finite(item, f"{path}[{index}]")
            if found:
                return found
    return None


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `root`, except under the folders `skip`."""
    files = {}
    for directory, subdirs, names in os.walk(root):
        here = Path(directory)
        subdirs[:] = [d for d in subdirs if here / d not in skip]
        for name in names:
            path = here / name
            with contextlib.suppress(OSError):
                stat = path.lstat()
                files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return files


def repository_files() -> dict[str, tuple[int, int]]:
    """(size, mtime) of the repository's own files (tracked, and untracked but not ignored)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                                check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: the sandbox checks remain
        return {}
    files = {}
    for name in filter(None, listed):
        with contextlib.suppress(OSError):
            stat = (ROOT / name).lstat()
            files[name] = (stat.st_size, stat.st_mtime_ns)
    return files


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """Files created, changed or removed between two snapshots."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


UNMUTATED = ("intact", "defaults")  # labels of a tally's unmutated input: it must be accepted


@dataclasses.dataclass
class Tally:
    """What the inputs of one loader gave."""

    loader: str
    inputs: int = 0
    accepted: int = 0
    refused: int = 0
    raw: list[str] = dataclasses.field(default_factory=list)
    hangs: list[str] = dataclasses.field(default_factory=list)
    non_finite: list[str] = dataclasses.field(default_factory=list)
    touched: list[str] = dataclasses.field(default_factory=list)
    slowest_s: float = 0.0
    unmutated_refused: list[str] = dataclasses.field(default_factory=list)  # an "intact"/"defaults" input refused
    watch: Path | None = None  # a folder no input may change (the sandbox), except under `owned`
    owned: tuple[Path, ...] = ()

    def run(self, label: str, load: Callable[[], Any]) -> Any:
        """Feed one input (`load` does the loading and returns its outputs); record how it ended."""
        before = snapshot(self.watch, self.owned) if self.watch is not None else {}
        try:
            return self._run(label, load)
        finally:
            if self.watch is not None:
                self.touched += [f"{label}: {name}" for name in changed(before, snapshot(self.watch, self.owned))]

    def _run(self, label: str, load: Callable[[], Any]) -> Any:
        self.inputs += 1
        start = time.perf_counter()
        try:
            with time_bound(INPUT_TIME_BOUND_S):
                outputs = load()
        except Hang:
            self.hangs.append(label)
            return None
        except Exception as error:  # noqa: BLE001 (classifying every exception is the point)
            if is_user_error(error):
                self.refused += 1
                if label in UNMUTATED:
                    self.unmutated_refused.append(f"{label}: {' '.join(str(error).split())[:300]}")
            else:
                self.raw.append(f"{label}: {type(error).__name__}: {' '.join(str(error).split())[:300]}")
            return None
        finally:
            elapsed = time.perf_counter() - start
            self.slowest_s = max(self.slowest_s, elapsed)
        if elapsed > INPUT_TIME_BOUND_S:
            self.hangs.append(f"{label} ({elapsed:.1f} s)")
        where = non_finite(outputs)
        if where is not None:
            self.non_finite.append(f"{label}: {where}")
        else:
            self.accepted += 1
        return outputs

    def line(self) -> str:
        """The counts as one line."""
        return (f"{self.loader}: {self.inputs} inputs, {self.accepted} accepted, {self.refused} refused with a "
                f"one-line error, {len(self.raw)} raw tracebacks, {len(self.hangs)} hangs, {len(self.non_finite)} "
                f"non-finite outputs, {len(self.touched)} files touched outside (slowest input {self.slowest_s:.2f} s)")

    def failures(self) -> list[str]:
        """Every finding, one line each."""
        # a loader that refused everything would pass every other count: valid input must get through
        nothing = ["no input accepted: the loader refuses valid input too"] if self.inputs and not self.accepted else []
        return (nothing + [f"unmutated input refused: {u}" for u in self.unmutated_refused]
                + [f"raw traceback: {r}" for r in self.raw] + [f"hang: {h}" for h in self.hangs]
                + [f"non-finite output: {n}" for n in self.non_finite] + [f"file touched: {t}" for t in self.touched])


# ------------------------------------------------------------------ mutations
HUGE = (1e308, -1e308, 1e30, 2**63, -(2**63), 10**400)
SPECIAL = (math.nan, math.inf, -math.inf, *HUGE, 0, -1, 0.0, -0.0, 1e-300, True, False, None, "", "x" * 5,
           "nan", [], {}, [1.0], {"a": 1})


def leaf_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths (keys and indices) of every node of a JSON-like value, the root included."""
    paths = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += leaf_paths(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value[:8]):  # long arrays: their first entries stand for the rest
            paths += leaf_paths(item, (*path, index))
    return paths


def _get(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def _set(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    parent = _get(value, path[:-1])
    if isinstance(parent, tuple):
        parent = list(parent)
        parent[path[-1]] = new
        return _set(value, path[:-1], parent)
    parent[path[-1]] = new
    return value


def _delete(value: Any, path: tuple) -> Any:
    if not path:
        return None
    parent = _get(value, path[:-1])
    if isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, list):
        del parent[path[-1]]
    return value


def mutate(value: Any, rng: np.random.Generator, mutations: int | None = None) -> tuple[Any, str]:
    """A copy of the JSON-like `value` with 1-2 structure-aware mutations, and a description of them:
    type swaps, NaN/Inf, huge and tiny values, missing keys, wrong shapes (lengths), truncated strings and
    lists, extra keys, scaled numbers."""
    value = copy.deepcopy(value)
    done = []
    for _ in range(mutations or int(rng.integers(1, 3))):
        paths = leaf_paths(value)
        path = paths[int(rng.integers(len(paths)))]
        try:
            current = _get(value, path)
        except (KeyError, IndexError, TypeError):
            continue
        kind = int(rng.choice(9, p=[0.15, 0.3, 0.1, 0.08, 0.07, 0.05, 0.08, 0.07, 0.1]))
        label = "/".join(map(str, path)) or "<root>"
        if isinstance(current, torch.Tensor) and kind != 2:
            new, what = mutate_tensor(current, rng)
            value = _set(value, path, new)
            done.append(f"{label}: {what}")
        elif kind == 0 or (kind == 1 and not isinstance(current, (int, float))):
            new = SPECIAL[int(rng.integers(len(SPECIAL)))]
            value = _set(value, path, copy.deepcopy(new))
            done.append(f"{label}={new!r}")
        elif kind == 1:  # mostly a plausible change, sometimes an extreme one
            factor = float(rng.choice([0.5, 0.9, 1.1, 2.0, 10.0, 0.1, -1.0, 0.0, 1e-9, 1e9]))
            try:
                new = not current if isinstance(current, bool) else type(current)(current * factor)
            except (OverflowError, ValueError):
                new = math.inf
            value = _set(value, path, new)
            done.append(f"{label}*={factor:g}")
        elif kind == 2 and path:
            value = _delete(value, path)
            done.append(f"del {label}")
        elif kind == 3 and isinstance(current, (list, tuple)) and current:
            cut = int(rng.integers(len(current)))
            value = _set(value, path, list(current)[:cut])
            done.append(f"{label}[:{cut}]")
        elif kind == 4 and isinstance(current, (list, tuple)) and current:
            value = _set(value, path, [*current, current[-1]])
            done.append(f"{label}+=last")
        elif kind == 5 and isinstance(current, (list, tuple)):
            value = _set(value, path, [list(current)])
            done.append(f"{label}=[[...]]")
        elif kind == 6 and isinstance(current, str):
            cut = int(rng.integers(len(current) + 1))
            value = _set(value, path, current[:cut] + rng.choice(["", "/../..", "\x00", "é"]))
            done.append(f"{label}=str[:{cut}]+")
        elif kind == 7 and isinstance(current, dict):
            current["fuzz_extra"] = SPECIAL[int(rng.integers(len(SPECIAL)))]
            done.append(f"{label}.fuzz_extra")
        else:
            swap = {int: "1", float: "1.5", str: 7, list: "list", dict: [1, 2], bool: "yes", type(None): 0}
            new = swap.get(type(current), math.nan)
            value = _set(value, path, new)
            done.append(f"{label}:{type(current).__name__}->{type(new).__name__}")
    return value, "; ".join(done) or "unchanged"


def mutate_tensor(tensor: torch.Tensor, rng: np.random.Generator) -> tuple[Any, str]:
    """A damaged copy of `tensor`: a NaN or Inf entry, huge or zero values, a wrong shape, another dtype, empty,
    or not a tensor at all."""
    tensor = tensor.clone()
    kind = int(rng.integers(8))
    if kind == 0 and tensor.numel() and tensor.is_floating_point():
        tensor.view(-1)[int(rng.integers(tensor.numel()))] = float(rng.choice([math.nan, math.inf, -math.inf]))
        return tensor, "a non-finite entry"
    if kind == 1 and tensor.is_floating_point():
        factor = float(rng.choice([1e30, -3.0, 0.0, 1e-30]))
        return tensor * factor, f"scaled by {factor:g}"
    if kind == 2 and tensor.dim() and tensor.shape[0] > 1:
        return tensor[: tensor.shape[0] // 2].clone(), "first axis halved"
    if kind == 3:
        return tensor.reshape(-1).clone(), "flattened"
    if kind == 4:
        return tensor.to(torch.int64 if tensor.is_floating_point() else torch.float32), "dtype changed"
    if kind == 5:
        return tensor.new_empty((0,)), "empty"
    if kind == 6:
        return tensor.tolist() if tensor.numel() < 64 else float(tensor.reshape(-1)[0]), "not a tensor"
    return tensor.unsqueeze(0), "extra axis"


def mutate_bytes(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """`data` with byte flips, a truncation, a zeroed block or a duplicated block."""
    array = bytearray(data)
    kind = int(rng.integers(4))
    if kind == 0:
        count = int(rng.choice([1, 4, 64, 4000]))
        for index in rng.integers(len(array), size=count):
            array[index] ^= 1 << int(rng.integers(8))
        return bytes(array), f"{count} bit flips"
    if kind == 1:
        cut = int(rng.integers(len(array)))
        return bytes(array[:cut]), f"truncated to {cut} bytes"
    start = int(rng.integers(len(array)))
    length = int(rng.integers(1, 4096))
    if kind == 2:
        array[start:start + length] = bytes(len(array[start:start + length]))
        return bytes(array), f"{length} bytes zeroed at {start}"
    return bytes(array[:start] + array[start:start + length] + array[start:]), f"{length} bytes repeated at {start}"
