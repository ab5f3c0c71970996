"""Checkpoints: written atomically, sealed with a content checksum, loaded safely, validated on load.

A checkpoint appears under its final name only once completely written and synced (write to a hidden
temporary file, fsync, rename, fsync the directory), so a process killed at any moment leaves either
the previous set of checkpoints or the new one, never a torn file; what a kill leaves behind is a hidden
`.<name>.tmp`, which `remove_orphans` deletes when the run resumes. `CheckpointWriter` does the writing in
a background thread, so that training goes on while a checkpoint (mostly its replay buffer) goes to disk.

Loading never runs code from the file: `torch.load(weights_only=True)` admits only tensors and plain
containers (and NumPy's array reconstruction, which checkpoints of format 1 hold in their RNG state). Every
checkpoint of format 2 carries the SHA-256 of its content (`content_digest`: every tensor's bytes and every
plain value, in order), so that flipped bytes, a truncated file or an edit are refused with one
CheckpointError naming the file, never trained on or exported; its floating tensors must all be finite.
A policy's checkpoint also records the actions of its deterministic policy on fixed probe observations
(`policy_probe`); `agent_from_checkpoint` rebuilds the network from the recorded architecture and refuses
it unless it reproduces those actions (an architecture that does not match its weights, e.g. an edited
activation). Resuming a run (`load_checkpoint` on a run directory) falls back from a damaged newest
checkpoint to the newest intact one, with a warning naming each file it skipped.
"""

from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

PATTERN = re.compile(r"^checkpoint_(\d{12})\.pt$")
# what write_atomically leaves behind when killed mid-write (checkpoints, the best policy, config.yaml)
ORPHAN_PATTERN = re.compile(r"^\.(checkpoint_\d{12}\.pt|best_policy\.pt|config\.yaml)\.tmp$")
BEST_POLICY = "best_policy.pt"
# 2: sealed with DIGEST_KEY, NumPy RNG state as a tensor, a policy probe; 1: none of these (still loadable)
CHECKPOINT_FORMAT = 2
READABLE_FORMATS = (1, 2)
DIGEST_KEY = "content_sha256"
PROBE_OBSERVATIONS = 8
# max |action difference| / action range between the recorded probe actions and the rebuilt network's: a
# different device or matmul kernel moves actions by ~1e-6; a different activation by ~0.1 or more
PROBE_TOLERANCE = 1e-3
# what format-1 checkpoints need beyond tensors and containers: numpy.random.get_state()'s uint32 array
_LEGACY_SAFE_GLOBALS = [np.ndarray, np.dtype, type(np.dtype(np.uint32))]
try:  # NumPy 2 moved it; pickles name whichever wrote them, torch matches by the function object
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # pragma: no cover - NumPy 1
    from numpy.core.multiarray import _reconstruct as _np_reconstruct  # type: ignore[no-redef]
_LEGACY_SAFE_GLOBALS.append(_np_reconstruct)


class CheckpointError(RuntimeError):
    """A checkpoint or run directory is missing, unreadable, damaged, unsafe, or does not match the run it
    is loaded into."""


def checkpoint_dir(run_dir: str | Path) -> Path:
    """Where a run keeps its checkpoints."""
    return Path(run_dir) / "checkpoints"


def is_run_dir(path: str | Path) -> bool:
    """Whether `path` is a training run's directory: it holds the config.yaml that `python -m robo_rl.train`
    writes at its start (a YAML mapping with the train command's env, agent and total_env_steps)."""
    config = Path(path) / "config.yaml"
    if not config.is_file():
        return False
    try:
        saved = OmegaConf.load(config)
    except Exception:  # noqa: BLE001 (any unreadable or non-YAML file: not a run's config)
        return False
    return isinstance(saved, DictConfig) and all(key in saved for key in ("env", "agent", "total_env_steps"))


def run_files(folder: Any) -> list[str]:
    """The files of a run (train's or distill's) that `folder` already holds: a new run written there would
    replace them and mix its checkpoints with theirs."""
    folder = Path(str(folder))
    names = ("config.yaml", "summary.json", BEST_POLICY, checkpoint_dir(folder).name)
    return [name for name in names if (folder / name).exists()]


def run_holding(path: str | Path) -> Path | None:
    """The nearest folder at or above `path` that holds a run (`run_files`), or None: a command's output there
    lies in that run's folder, which only that run's own commands may write."""
    folder = Path(os.path.abspath(path))
    for candidate in (folder, *folder.parents):
        if candidate.is_dir() and run_files(candidate):
            return candidate
    return None


def check_not_in_another_run(path: str | Path, run: str | Path, option: str, command: str) -> None:
    """ConfigError if `path` (the option `option` of `command`, for run `run`) lies in the folder of a run other
    than `run`: that run's own records (its bundle, its video) would be replaced by `run`'s."""
    from sim.errors import ConfigError

    holder = run_holding(path)
    if holder is not None and holder.resolve() != Path(run).resolve():
        raise ConfigError(f"{option}={path} lies in the folder of another run ({holder}), whose records {command} "
                          f"of run={run} would replace; give a path outside other runs' folders, or omit {option}= "
                          "(the default lies inside run=)")


def check_trained_with(run: str | Path, overrides: list[str], option: str = "ARGS") -> None:
    """CheckpointError unless the run in `run` was started with these `robo_rl.train` command-line `overrides` (Hydra's
    record, .hydra/overrides.yaml): `make specialists` keeps or resumes a specialist it finds, which must then be
    the one its `option` asks for now (one trained with other options was kept as the ceiling asked for). Options a
    resume may change that leave the training as it is (train.RESUME_OPTIONS but total_env_steps:
    logging.progress_bar, torch_threads, ...) do not count."""
    record = Path(run) / ".hydra" / "overrides.yaml"
    try:
        recorded = list(OmegaConf.load(record))
    except Exception as error:  # noqa: BLE001 (missing or torn: the run cannot say how it was trained)
        raise CheckpointError(f"{run} holds no readable record of how it was trained ({record}: {error}); delete it "
                              "to train it again") from None
    from robo_rl.train import RESUME_OPTIONS

    # what a resume may change without changing what is trained (a progress bar, threads); not its length
    cosmetic = [name for name in RESUME_OPTIONS if name != "total_env_steps"]

    def training(given: list[str]) -> list[str]:
        keys = [str(o).lstrip("+~").split("=", 1)[0] for o in given]
        return [o for o, key in zip(given, keys)
                if not any(key == name or key.startswith(name + ".") for name in cosmetic)]

    recorded, overrides = training([str(o) for o in recorded]), training([str(o) for o in overrides])
    if recorded != overrides:
        extra = [o for o in recorded if o not in overrides] or "nothing"
        missing = [o for o in overrides if o not in recorded] or "nothing"
        raise CheckpointError(f"{run} was trained with {extra} where {option} now gives {missing}; delete it to "
                              f"train it again, or give the {option} it was trained with")


def require_run_dir(path: Any, option: str = "run", need_policy: bool = False) -> str:
    """`path` if it is a run directory (holding a policy, with `need_policy`), else CheckpointError naming the
    option: for the Hydra resolvers that name a command's output folder inside a run, so that a wrong path
    fails before Hydra creates anything."""
    folder = None if path is None or str(path) in ("", "???") else Path(str(path))
    if folder is not None and folder.exists() and not folder.is_dir():
        reason = "it is a file, not a directory"
    elif folder is None or not folder.is_dir():
        reason = "no such directory"
    elif not is_run_dir(folder):
        reason = "it holds no config.yaml written by `python -m robo_rl.train`"
    elif need_policy and not ((folder / BEST_POLICY).is_file() or list_checkpoints(folder)):
        reason = "it holds no best_policy.pt and no checkpoint yet"
    else:
        return str(path)
    raise CheckpointError(f"{option}={path} is not a training run directory with a policy ({reason}); give the "
                          "folder that `python -m robo_rl.train` wrote" if need_policy else
                          f"{option}={path} is not a training run directory ({reason}); give the folder that "
                          "`python -m robo_rl.train` wrote")


# `${run_folder:${run}}` in a command's Hydra config: its output folder lies inside an existing run (evaluate,
# export); a wrong run= fails before Hydra creates anything
OmegaConf.register_new_resolver("run_folder", lambda run: require_run_dir(run, need_policy=True), replace=True)


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
    """torch.save `state`, sealed with its content digest, to `final` (`write_atomically`)."""
    sealed = seal(state)
    return write_atomically(final, lambda f: torch.save(sealed, f))


def write_atomically(final: Path, write: Callable[[BinaryIO], Any]) -> Path:
    """A file that appears under `final` only complete: `write` fills a hidden temporary file beside it
    (`.<name>.tmp`, which `remove_orphans` deletes after a kill), which is synced, renamed to `final`, and the
    directory synced, so that a kill or a power cut leaves the old file or the new one, never a torn one."""
    temporary = final.parent / f".{final.name}.tmp"
    try:
        with open(temporary, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if _disk_full(error):  # torch.save reports it as a RuntimeError about a zip position
            raise OSError(errno.ENOSPC, "no space left on the device; nothing was written and the previous file, if "
                          "any, is kept (free space, then resume)", str(final)) from error
        raise
    os.replace(temporary, final)
    dir_fd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return final


def _disk_full(error: BaseException | None) -> bool:
    """Whether a full disk or an exhausted quota is behind `error` (its cause and context chain)."""
    for _ in range(20):
        if error is None:
            return False
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        error = error.__cause__ or error.__context__
    return False


def seal(state: Mapping[str, Any]) -> dict[str, Any]:
    """`state` with its content digest under DIGEST_KEY (any digest it held is replaced)."""
    content = {key: value for key, value in state.items() if key != DIGEST_KEY}
    return {**content, DIGEST_KEY: content_digest(content)}


def content_digest(state: Any) -> str:
    """SHA-256 over a checkpoint's content: every tensor's dtype, shape and bytes (on the CPU, so the same
    after loading onto any device), every plain value and the order of every container. DIGEST_KEY at the top
    level is left out. The digest of what `torch.load` gives back equals the one of what `torch.save` took."""
    digest = hashlib.sha256()
    if isinstance(state, Mapping):
        state = {key: value for key, value in state.items() if key != DIGEST_KEY}
    _feed(digest, state)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    # a tag and a length before every item: no two different contents give the same byte stream
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"T{tensor.dtype}{tuple(tensor.shape)};".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())  # the bytes, without a copy
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        if array.dtype.hasobject:
            raise TypeError("an object array has no content digest")
        digest.update(f"A{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    elif isinstance(value, Mapping):
        digest.update(f"D{len(value)};".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{'L' if isinstance(value, list) else 'U'}{len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        digest.update(f"S{len(data)};".encode() + data)
    elif isinstance(value, bytes):
        digest.update(f"Y{len(value)};".encode() + value)
    elif value is None or isinstance(value, (bool, np.bool_)):
        digest.update(f"B{value!r};".encode())
    elif isinstance(value, (int, np.integer)):
        digest.update(f"I{int(value)};".encode())
    elif isinstance(value, (float, np.floating)):
        digest.update(f"F{float(value).hex()};".encode())
    elif isinstance(value, (torch.dtype, torch.device)):
        digest.update(f"O{value};".encode())
    else:
        raise TypeError(f"a {type(value).__name__} has no content digest")


def remove_orphans(run_dir: str | Path) -> list[Path]:
    """Delete the temporary files that a write killed mid-way left in a run (`.checkpoint_*.pt.tmp`,
    `.best_policy.pt.tmp`, `.config.yaml.tmp`: only names that robo-rl's atomic writes use); returns them. Call only from the process
    that trains the run."""
    removed = []
    for directory in (Path(run_dir), checkpoint_dir(run_dir)):
        if directory.is_dir():
            for path in directory.iterdir():
                if ORPHAN_PATTERN.match(path.name) and path.is_file():
                    path.unlink(missing_ok=True)
                    removed.append(path)
    return removed


def policy_file(run_dir: str | Path, which: str | None = "best") -> Path:
    """The checkpoint holding a run's policy: "best" (best evaluated, else newest), "last", or a file path."""
    run_dir = Path(run_dir)
    if which in (None, "best", "last"):
        if which == "best" and (run_dir / BEST_POLICY).is_file():
            return run_dir / BEST_POLICY
        found = list_checkpoints(run_dir)
        if not found and which == "last" and (run_dir / BEST_POLICY).is_file():
            raise CheckpointError(f"checkpoint=last: {run_dir} keeps no checkpoints, only its {BEST_POLICY}; give "
                                  "checkpoint=best")
        if not found:
            raise CheckpointError(f"no policy in {run_dir} (is it a run directory?)")
        return found[-1]
    path = Path(which)
    if not path.is_file():  # a typo of last, or the checkpoints/ folder
        what = "is a folder" if path.is_dir() else f"is no file (from {Path.cwd()})"
        raise CheckpointError(f"checkpoint={which} {what}; give best, last or a checkpoint file of the run, e.g. "
                              f"{Path(run_dir) / BEST_POLICY}")
    return path


def flat_config(tree: Any, prefix: str = "") -> dict[str, Any]:
    """`tree` (nested mappings) as {"dotted.key": leaf value}."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    return {key: value for name, sub in tree.items()
            for key, value in flat_config(sub, f"{prefix}.{name}" if prefix else str(name)).items()}


# How an env is simulated, not what is flown: every backend steps the same dynamics (tests/sim hold them equal)
SIMULATION_KEYS = ("backend", "compile")


def load_run_policy(run_dir: str | Path, which: str | None = "best",
                    map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The checkpoint `policy_file(run_dir, which)` names, loaded; CheckpointError where `which` is a file whose
    policy flies another env than the run's, or, from outside the run (a copy, say), was trained on another env
    config: its results, flown in the environment its checkpoint records, would be recorded as the run's."""
    path = policy_file(run_dir, which)
    state = load_checkpoint(path, map_location=map_location)
    config = Path(run_dir) / "config.yaml"
    if which not in (None, "best", "last") and config.is_file():
        run_env, policy_env = OmegaConf.load(config).env, OmegaConf.create(state["config"]).env
        if run_env.id != policy_env.id:
            raise CheckpointError(f"checkpoint={which} is a policy of {policy_env.id}, run={run_dir} flies "
                                  f"{run_env.id}: give a checkpoint of this run")
        if not path.resolve().is_relative_to(Path(run_dir).resolve()):
            own, theirs = (flat_config(OmegaConf.to_container(env, resolve=True)) for env in (run_env, policy_env))
            differ = sorted(key for key in own.keys() | theirs.keys()
                            if own.get(key) != theirs.get(key) and key not in SIMULATION_KEYS)
            if differ:
                raise CheckpointError(f"checkpoint={which} is not a file of run={run_dir} and was trained with env."
                                      f"{differ[0]}={theirs.get(differ[0])!r} where the run has {own.get(differ[0])!r}:"
                                      " it would fly its own env and be recorded as the run's; give run=<its run>")
    return state


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    directory = checkpoint_dir(run_dir)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if PATTERN.match(p.name))


def load_checkpoint(path_or_run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The given checkpoint file, or the newest intact checkpoint of a run directory; CheckpointError if
    none loads. In a run directory, a newest checkpoint that is damaged (truncated, flipped bytes, failing
    validation) is skipped with a warning naming it, and the next older one is tried."""
    path = Path(path_or_run_dir)
    if not path.is_dir():
        return _load_file(path, map_location)
    found = list_checkpoints(path)
    if not found:
        raise CheckpointError(f"no checkpoint in {checkpoint_dir(path)} (is {path} a run directory?)")
    errors = []
    for candidate in reversed(found):
        try:
            state = _load_file(candidate, map_location)
        except CheckpointError as error:
            errors.append(str(error))
            warnings.warn(f"skipping a damaged checkpoint: {error}", stacklevel=2)
            continue
        return state
    raise CheckpointError(f"no intact checkpoint in {checkpoint_dir(path)}: {'; '.join(errors)}")


TORCH_FILE_STARTS = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive; before torch 1.6, a pickle (protocol byte)


def _load_file(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    with path.open("rb") as file:
        head = file.read(16)
    if not head:
        raise CheckpointError(f"checkpoint {path} is unreadable: it is empty (0 bytes); a save that did not finish?")
    if not head.startswith(TORCH_FILE_STARTS):  # a log, a JSON record, a YAML config given by mistake
        raise CheckpointError(f"checkpoint {path} is unreadable: not a file torch.save wrote (it begins {head!r}); a "
                              "checkpoint is a run's best_policy.pt or a file in its checkpoints/")
    if head.startswith(TORCH_FILE_STARTS[0]):  # torch's own errors for a cut archive are miniz codes or errno 22
        try:
            zipfile.ZipFile(path).close()
        except Exception as error:  # BadZipFile, OSError, a mangled name's UnicodeDecodeError...
            raise CheckpointError(f"checkpoint {path} is unreadable: its zip archive is cut short or damaged "
                                  f"({error}); a save or a copy that did not finish?") from error
    try:
        with torch.serialization.safe_globals(_LEGACY_SAFE_GLOBALS):
            state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        # weights_only's unpickler refuses any class or function other than tensors and plain containers
        # (what a pickle that would run code names: a paragraph of its message names that GLOBAL); any
        # other unpickling error is a damaged or foreign file
        paragraphs = [part.strip() for part in str(error).split("\n\n") if part.strip()]
        named = [part for part in paragraphs if "GLOBAL" in part]
        if named:
            raise CheckpointError(f"checkpoint {path} is refused: it holds objects other than tensors and plain "
                                  f"data, which loading would run ({named[0][:300]})") from error
        detail = paragraphs[1] if len(paragraphs) > 2 else str(error)
        raise CheckpointError(f"checkpoint {path} is unreadable: {detail[:300]}") from error
    except Exception as error:  # truncated, not a torch file, damaged zip...
        first = str(error).split(". ")[0][:300]  # (torch goes on for a paragraph about what may have happened)
        reason = first or f"{type(error).__name__} (not a file torch.save wrote, or cut short)"
        raise CheckpointError(f"checkpoint {path} is unreadable: {reason}") from error
    validate_checkpoint(state, path)
    state["path"] = str(path)
    return state


def validate_checkpoint(state: Any, path: str | Path) -> None:
    """CheckpointError unless `state` is a robo-rl checkpoint of a readable format, intact (its content digest
    matches), with the fields every loader reads, and finite tensors."""
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(f"{path} is not a robo-rl checkpoint")
    version = state["format"]
    if isinstance(version, bool) or not isinstance(version, int) or version not in READABLE_FORMATS:
        raise CheckpointError(f"checkpoint {path} has format {version!r}; this robo-rl reads formats "
                              f"{', '.join(map(str, READABLE_FORMATS))}")
    if version >= 2:
        recorded = state.get(DIGEST_KEY)
        try:
            actual = content_digest(state)
        except TypeError as error:
            raise CheckpointError(f"checkpoint {path} is damaged: {error}") from error
        if recorded != actual:
            raise CheckpointError(f"checkpoint {path} is damaged or was edited: its content does not match its "
                                  f"checksum ({DIGEST_KEY} {str(recorded)[:16]}..., content {actual[:16]}...)")
    else:
        warnings.warn(f"checkpoint {path} has format 1 (written before checkpoints carried a checksum): its "
                      "integrity cannot be verified", stacklevel=3)

    def field(key: str, kind: type | tuple[type, ...], where: Mapping[str, Any] = state, name: str = "") -> Any:
        value = where.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise CheckpointError(f"checkpoint {path}: {name or key} is {type(value).__name__}, expected "
                                  f"{getattr(kind, '__name__', kind)}")
        return value

    field("config", dict)
    spec = field("env_spec", dict)
    field("id", str, spec, "env_spec.id")
    obs_size, act_size = field("observation_size", int, spec, "env_spec.observation_size"), \
        field("action_size", int, spec, "env_spec.action_size")
    bounds = [field(key, list, spec, f"env_spec.{key}") for key in ("action_low", "action_high")]
    if obs_size <= 0 or act_size <= 0 or any(len(b) != act_size for b in bounds):
        raise CheckpointError(f"checkpoint {path}: env_spec sizes {obs_size}, {act_size} and action bounds disagree")
    try:
        low, high = (np.asarray(b, dtype=np.float64) for b in bounds)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {path}: env_spec action bounds are not numbers") from error
    if not (np.isfinite(low).all() and np.isfinite(high).all() and (low < high).all()):
        raise CheckpointError(f"checkpoint {path}: env_spec action bounds {low.tolist()} .. {high.tolist()} are "
                              "not finite with low < high")
    field("agent_config", dict)
    field("model", dict, field("agent", dict), "agent.model")
    counters = field("counters", dict)
    for key in ("env_steps", "updates"):
        if field(key, int, counters, f"counters.{key}") < 0:
            raise CheckpointError(f"checkpoint {path}: counters.{key} is negative")
    for name, tensor in _tensors(state):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"checkpoint {path}: {name} holds NaN or Inf")


def _tensors(value: Any, name: str = "") -> Iterable[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{name}.{key}" if name else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{name}[{index}]")


def probe_observations(observation_size: int, images: Mapping[str, Sequence[int]] | None = None) -> Any:
    """PROBE_OBSERVATIONS fixed observations (seed 0): standard normal vectors, with uniform random uint8 images
    where the env has cameras."""
    generator = torch.Generator().manual_seed(0)
    state = torch.randn(PROBE_OBSERVATIONS, observation_size, generator=generator)
    if not images:
        return state
    return {"state": state, **{name: torch.randint(0, 256, (PROBE_OBSERVATIONS, *shape), generator=generator,
                                                   dtype=torch.uint8) for name, shape in sorted(images.items())}}


def policy_probe(agent: Any, observation_size: int) -> dict[str, Any]:
    """The deterministic actions of `agent` on `probe_observations`: recorded in a checkpoint, reproduced by
    `agent_from_checkpoint` (the observations are made again there, from the env spec)."""
    from robo_rl import observations

    probe = probe_observations(observation_size, getattr(agent, "images", None))
    with torch.no_grad():
        actions = agent.act(observations.apply(lambda x: x.to(agent.device), probe), deterministic=True).float().cpu()
    return {"observations": observations.state_of(probe), "actions": actions}


def check_policy_probe(state: Mapping[str, Any], agent: Any) -> None:
    """CheckpointError unless `agent`, rebuilt from the checkpoint `state`, reproduces the probe actions the
    checkpoint recorded (format 1 recorded none: nothing to check)."""
    probe = state.get("policy_probe")
    if probe is None and state.get("format") == 1:
        return
    path = state.get("path")
    if not isinstance(probe, Mapping) or not all(isinstance(probe.get(k), torch.Tensor)
                                                  for k in ("observations", "actions")):
        raise CheckpointError(f"checkpoint {path} records no policy probe (policy_probe.observations, .actions)")
    observations, expected = probe["observations"].float(), probe["actions"].float()
    spec = state["env_spec"]
    if tuple(observations.shape) != (PROBE_OBSERVATIONS, spec["observation_size"]) or \
            tuple(expected.shape) != (PROBE_OBSERVATIONS, spec["action_size"]):
        raise CheckpointError(f"checkpoint {path}: policy_probe has shapes {tuple(observations.shape)} and "
                              f"{tuple(expected.shape)}, not ({PROBE_OBSERVATIONS}, observation/action size)")
    from robo_rl import observations as obs_ops

    images = spec.get("observation_images")
    if images:  # the images are not stored: the same seed makes them again
        observations = {**probe_observations(spec["observation_size"], images), "state": observations}
    with torch.no_grad():
        actions = agent.act(obs_ops.apply(lambda x: x.to(agent.device), observations), deterministic=True).float().cpu()
    span = torch.as_tensor(spec["action_high"], dtype=torch.float32) - torch.as_tensor(spec["action_low"],
                                                                                       dtype=torch.float32)
    error = float(((actions - expected).abs() / span).max())
    if not error <= PROBE_TOLERANCE:
        config = state.get("agent_config", {})
        raise CheckpointError(
            f"checkpoint {path}: the network its agent_config describes (activation={config.get('activation')!r}, "
            f"actor_hidden={config.get('actor_hidden')}, actor_layer_norm={config.get('actor_layer_norm')}) does "
            f"not reproduce the actions recorded with its weights (off by {error:.3g} of the action range); "
            "the checkpoint was edited or its architecture does not match its weights")


def agent_from_checkpoint(state: Mapping[str, Any], device: str | torch.device = "cpu") -> Any:
    """The agent of a loaded checkpoint (SAC.from_checkpoint, in eval mode), refused with one CheckpointError
    where its recorded architecture does not build, does not fit its weights, or does not reproduce its
    recorded probe actions."""
    from robo_rl.agents.sac import SAC

    path = state.get("path")
    try:
        agent = SAC.from_checkpoint(state, device)
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError, IndexError) as error:
        first_line = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"checkpoint {path}: its agent_config and weights do not make an agent "
                              f"({first_line})") from error
    check_policy_probe(state, agent)
    return agent


def check_compatible(state: dict[str, Any], env_spec: dict[str, Any], same_env: bool = True) -> None:
    """Raise CheckpointError unless the checkpoint was trained on an env with this id (same_env=False: any id, as
    for a policy flying another task), these spaces and this control rate (a 100 Hz policy flown at 50 Hz was
    evaluated and recorded as the policy's)."""
    saved = state.get("env_spec", {})
    keys = ["observation_size", "action_size", "observation_layout", "observation_images"]
    if same_env:
        keys.insert(0, "id")
    if saved.get("control_hz") is not None:  # absent from older checkpoints
        keys.append("control_hz")
    for key in keys:
        if saved.get(key) != env_spec.get(key):
            raise CheckpointError(
                f"checkpoint {state.get('path')} was trained on a different env: {key} is {saved.get(key)!r} "
                f"there, {env_spec.get(key)!r} here"
            )
