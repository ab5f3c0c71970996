"""One clear error for every command-line entry point: `@hydra_command(...)` in place of `@hydra.main(...)`,
or `@command` on a plain main(argv), for each `python -m robo_rl...` CLI.

A user's mistake (a bad option, a missing run, a corrupt checkpoint, a NaN in a config) prints one line,
`error: <input> <what is allowed>` (the message of the error, which names both), to stderr and exits
with status 2. A bug in robo-rl prints its full traceback and exits with status 1, so that it can be
reported and fixed rather than read as the user's fault. ROBO_RL_TRACEBACK=1 shows the traceback of user
errors too. Ctrl-C exits with 130 without a traceback.

What counts as a user error is decided in one place, `is_user_error` (the fuzz suite in tests/fuzz holds
every loader to it):

- an exception of a class the project defines (ConfigError, DatasetError, CheckpointError, ExportError,
  BundleError, ...), or a ValueError or RuntimeError (not NotImplementedError) that a `raise` statement
  in robo_rl/, sim/ or the ROS 2 core raises: these messages are written for users. The same built-in
  types raised inside numpy, torch or h5py, or by the interpreter in our code (a broadcast error,
  `load_state_dict`'s size mismatch, int('abc')) are not: they mean that robo-rl let bad input through,
  which is a bug;
- an OSError naming a file (missing, unreadable, unwritable, a directory where a file was expected);
- a missing module of one of pyproject.toml's extras (`OPTIONAL_MODULES`: Ray, Minari), which make train
  leaves out: the line says how to install it;
- Hydra's and OmegaConf's configuration errors: an unknown key, bad override syntax, a missing mandatory
  value (`run=???`), an unknown config group option, and a ValueError that their own code raises about
  the command line (Hydra refuses `+=1` that way).

Hydra catches every exception itself: a composition error (unknown key, bad override) in
`hydra._internal.utils.run_and_report`, which prints several lines, or a shortened traceback, and exits
with status 1 (it re-raises only with HYDRA_FULL_ERROR set); a task's exception in `run_job`, which
prints "Error executing job with overrides: [...]" before re-raising it. `hydra_command` therefore
replaces `hydra.main`: the task's exception leaves Hydra wrapped in a BaseException that `run_job` does
not catch, and the whole call runs with HYDRA_FULL_ERROR set, so that every exception reaches `command`
unchanged and nothing else is printed.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, TypeVar

USER_ERROR_STATUS = 2
INTERNAL_ERROR_STATUS = 1
INTERRUPTED_STATUS = 130
_REPO = Path(__file__).resolve().parents[1]
# the project's own code: its raise statements are the messages meant for users
PROJECT_ROOTS = (_REPO / "robo_rl", _REPO / "sim", _REPO / "ros2_ws" / "src" / "robo_rl_ros" / "robo_rl_ros")
PROJECT_MODULES = ("robo_rl", "sim", "robo_rl_ros")

F = TypeVar("F", bound=Callable[..., Any])
# pyproject.toml's extras by the top-level module a command imports: (extra, its package that holds the module).
# make train installs robo-rl without them, so that a command needing one is a setup to finish, not a bug
OPTIONAL_MODULES = {"ray": ("ray", "ray"), "hydra_plugins": ("ray", "hydra-ray-launcher"),
                    "minari": ("datasets", "minari")}


def _config_error_types() -> tuple[type[BaseException], ...]:
    """Hydra's and OmegaConf's errors about a configuration (imported lazily: the ROS core has neither)."""
    types: list[type[BaseException]] = []
    try:
        from hydra.errors import HydraException

        types.append(HydraException)
    except ImportError:
        pass
    try:
        from omegaconf.errors import OmegaConfBaseException

        types.append(OmegaConfBaseException)
    except ImportError:
        pass
    return tuple(types)


def _raised_in(error: BaseException, roots: tuple[Path, ...]) -> bool:
    """Whether `error` was raised by a `raise` statement in code under one of `roots`."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = Path(tb.tb_frame.f_code.co_filename).resolve()
    if not any(filename.is_relative_to(root) for root in roots):
        return False
    return linecache.getline(str(filename), tb.tb_lineno).lstrip().startswith("raise")


def _config_library_roots() -> tuple[Path, ...]:
    roots = []
    for name in ("hydra", "omegaconf"):
        try:
            roots.append(Path(__import__(name).__file__).resolve().parent)
        except ImportError:
            pass
    return tuple(roots)


def _defined_by_project(error: BaseException) -> bool:
    return type(error).__module__.split(".")[0] in PROJECT_MODULES


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is a user's mistake (one line, status 2) rather than a bug (traceback, status 1);
    see the module docstring for the rule."""
    if isinstance(error, _config_error_types()):
        return True
    if isinstance(error, OSError) and error.filename is not None:
        return True
    if _defined_by_project(error):  # ConfigError, CheckpointError, DatasetError, BundleError, ...
        return True
    if missing_extra(error) is not None:
        return True
    if isinstance(error, ValueError) and _raised_in(error, _config_library_roots()):
        return True  # Hydra refuses some malformed overrides (`+=1`) with a plain ValueError of its own
    deliberate = isinstance(error, (ValueError, RuntimeError)) and not isinstance(error, NotImplementedError)
    return deliberate and _raised_in(error, PROJECT_ROOTS)


def missing_extra(error: BaseException) -> tuple[str, str] | None:
    """The package and the extra of pyproject.toml (`ray`, `datasets`) whose import failed, if `error` or the
    error it was raised from (`raise ... from`, as Hydra wraps a failed import) is such a missing module; None for
    anything else, also for a bug raised while an optional import's failure was being handled."""
    for _ in range(20):
        if isinstance(error, ModuleNotFoundError) and error.name:
            found = OPTIONAL_MODULES.get(error.name.split(".")[0])
            return None if found is None else (found[1], found[0])
        if error.__cause__ is None:
            return None
        error = error.__cause__
    return None


def one_line(error: BaseException) -> str:
    """The message of `error` as one line: a file error as `<file>: <reason>`; Hydra's composition errors
    with the OmegaConf error behind them; a missing optional dependency with how to install it; any newlines
    folded."""
    missing = missing_extra(error)
    if missing is not None:
        package, extra = missing
        return (f"{package} is not installed: this needs robo-rl's {extra} extra, which make train leaves out; "
                f"make venv installs every extra (or .venv/bin/pip install -e '.[{extra}]')")
    if isinstance(error, OSError) and error.filename is not None:
        text = f"{error.filename}: {error.strerror or error}"
    else:
        text = str(error) or type(error).__name__
        cause = error.__cause__
        if cause is not None and isinstance(error, _config_error_types()) and str(cause) not in text:
            text = f"{text} ({str(cause).splitlines()[0] if str(cause) else type(cause).__name__})"
    behind = _behind_config_error(error)
    if behind is not None and is_user_error(behind):  # e.g. a resolver of ours that refused a value
        return one_line(behind)
    text = text.split("\nConfig search path:")[0]  # Hydra's list of where it looked for a config group
    parts = [part.strip() for part in text.splitlines()]
    parts = [part for part in parts if part and not part.startswith(("object_type=", "reference_type="))]
    line = parts[0] if parts else type(error).__name__
    for part in parts[1:]:
        line += (" " if line.endswith((".", ":", ";", ",")) else "; ") + part
    return line


def _behind_config_error(error: BaseException) -> BaseException | None:
    """The first exception not Hydra's or OmegaConf's in the cause/context chain of one of theirs (an
    exception raised in a resolver reaches the user wrapped in OmegaConf's errors)."""
    seen = 0
    while isinstance(error, _config_error_types()) and seen < 20:
        error = error.__cause__ or error.__context__
        seen += 1
    return error if seen else None


def report(error: BaseException) -> int:
    """Print `error` the way the CLIs do; return the exit status."""
    if is_user_error(error) and os.environ.get("ROBO_RL_TRACEBACK", "") in ("", "0"):
        print(f"error: {one_line(error)}", file=sys.stderr)
        return USER_ERROR_STATUS
    traceback.print_exception(error)
    kind = "error" if is_user_error(error) else "internal error (a bug in robo-rl: please report it with this traceback)"
    print(f"{kind}: {one_line(error)}", file=sys.stderr)
    return USER_ERROR_STATUS if is_user_error(error) else INTERNAL_ERROR_STATUS


def key_values(argv: list[str], options: dict[str, type | tuple[type, int] | tuple[type, int, int]],
               usage: str) -> dict[str, Any]:
    """The `key=value` arguments of a plain CLI, each converted to its type in `options` (bool: true or false;
    int: a whole number in `(int, minimum)` or `(int, minimum, maximum)`, else from 0), each key at most once; the
    first key of `options` is required. A ConfigError naming the argument and what is allowed (with `usage`)
    for anything else."""
    from sim.errors import ConfigError

    values: dict[str, Any] = {}
    for arg in argv:
        key, sep, text = arg.partition("=")
        if not sep or key not in options:
            raise ConfigError(f"argument {arg!r}: expected key=value with key one of {', '.join(options)}; {usage}")
        if key in values:
            raise ConfigError(f"argument {arg!r}: {key} is given twice; {usage}")
        kind, minimum, maximum = (*options[key], 2**31 - 1)[:3] if isinstance(options[key], tuple) \
            else (options[key], 0, 2**31 - 1)
        if text == "":  # what an unset shell variable gives: `bundle=` read the current folder's policy.json
            optional = "" if key == next(iter(options)) else f", or omit {key}="  # the first key is required
            raise ConfigError(f"{key}= is empty; give a value{optional}; {usage}")
        try:
            if kind is bool:
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                values[key] = text.lower() == "true"
            else:
                values[key] = kind(text)
        except ValueError:
            allowed = {bool: "true or false", int: "a whole number"}.get(kind, kind.__name__)
            raise ConfigError(f"{key}={text}: {key} must be {allowed}; {usage}") from None
        if kind is int and not minimum <= values[key] <= maximum:
            raise ConfigError(f"{key}={text}: {key} must lie in [{minimum}, {maximum}]; {usage}")
    required = next(iter(options))
    if required not in values:
        raise ConfigError(f"{required}= is required; {usage}")
    return values


class _TaskFailed(BaseException):
    """A Hydra task's exception on its way through Hydra, which catches only Exception."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


def _one_line_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> str:
    """A warning as a command prints it: one line, without the source line that raised it."""
    return f"warning: {message}\n"


def command(main: F) -> F:
    """Decorate a plain entry point's main(): user errors become one line and status 2, bugs a traceback
    and status 1 (see the module docstring). Hydra entry points use `hydra_command` instead."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        previous = os.environ.get("HYDRA_FULL_ERROR")
        os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing (see the module docstring)
        format_warning = warnings.formatwarning
        warnings.formatwarning = _one_line_warning
        interrupts: list[int] = []
        handler = _counting_interrupts(interrupts)
        try:
            return main(*args, **kwargs)
        except (Exception, _TaskFailed) as error:  # noqa: BLE001 (every failure is reported, one way or the other)
            if not interrupts:  # after a Ctrl-C, compiled code's own RuntimeError is the interrupt, not a bug
                raise SystemExit(report(error.error if isinstance(error, _TaskFailed) else error)) from None
            print("interrupted", file=sys.stderr)
            raise SystemExit(INTERRUPTED_STATUS) from None
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise SystemExit(INTERRUPTED_STATUS) from None
        finally:
            if handler is not None:
                import signal

                signal.signal(signal.SIGINT, handler)
            warnings.formatwarning = format_warning
            if previous is None:
                os.environ.pop("HYDRA_FULL_ERROR", None)
            else:
                os.environ["HYDRA_FULL_ERROR"] = previous

    return run  # type: ignore[return-value]


def _counting_interrupts(interrupts: list[int]) -> Any:
    """Where Python's own Ctrl-C handler is in place (main thread; not where SIGINT is ignored), one that also
    appends to `interrupts`; returns the handler it replaced (None where none was). A KeyboardInterrupt raised
    inside a compiled operator (the SAC update's) reaches the command as that operator's RuntimeError, which
    was then reported as a bug in robo-rl."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None

    def interrupted(signum: int, frame: Any) -> None:
        interrupts.append(signum)
        signal.default_int_handler(signum, frame)

    return signal.signal(signal.SIGINT, interrupted)


def _hydra_callback_base() -> type:
    try:
        from hydra.experimental.callback import Callback

        return Callback
    except ImportError:  # the ROS 2 core imports this module without Hydra
        return object


class CheckOptionsFirst(_hydra_callback_base()):  # type: ignore[misc]
    """Hydra callback (hydra.callbacks.check_options in configs/<command>.yaml): checks the composed options
    before Hydra creates the run's folder and writes its record there, so that a refused command leaves
    nothing behind (`hydra_command` checks them again inside the task, for sweeps' jobs and in-process use)."""

    def __init__(self, command: str):
        self.command = command

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        """Stop the command (one line from `command`) on an option that `check_options` refuses."""
        from robo_rl.options import check_options

        try:
            task = self._task(config)
            try:
                run_dir = str(config.hydra.run.dir)
            except Exception:  # it reads an option that was not given (robustness's run=): the check names it
                check_options(task, self.command)
                raise
            check_output_dir(run_dir, self.command)
            if self.command in NEW_RUN_COMMANDS and not task.get("resume"):
                check_new_run_dir(run_dir, self.command)
            elif self.command in RECORDING_COMMANDS:
                check_not_a_run_or_bundle(run_dir, self.command)
            check_options(task, self.command)
            # the folders Hydra is about to create for this command, deepest first (removed again if it is refused)
            output = Path(run_dir).absolute()
            _HYDRA_CREATED[:] = [folder for folder in (output, *output.parents) if not folder.exists()]
            _HYDRA_EXISTING.clear()
            _HYDRA_EXISTING.update({folder: {p.name for p in folder.iterdir()} if folder.is_dir() else set()
                                    for folder in (output / RESUME_RECORDS, output) if output.is_dir()})
            if self.command in LOCKED_COMMANDS:
                lock_run_dir(output, self.command)
        except Exception as error:  # noqa: BLE001 (Hydra turns a callback's Exception into a warning and goes on)
            raise _TaskFailed(error) from None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        """Stop a sweep (-m) before its first job on an option of any of its jobs that `check_options` refuses:
        `-m seed=1,abc` trained the whole first job before the second was refused."""
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from robo_rl.options import check_options

        try:
            loader = GlobalHydra.instance().config_loader()
            arguments = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
            jobs = BasicSweeper.split_arguments(OverridesParser.create(config_loader=loader).parse_overrides(arguments),
                                                None)
            for job in (job for batch in jobs for job in batch):
                check_options(self._task(loader.load_sweep_config(config, list(job))), self.command)
            # hydra/launcher=ray_cluster joining a cluster: Ray retries an address where nothing answers for minutes,
            # printing its warnings
            address = OmegaConf.select(config, "hydra.launcher.ray.init.address", default=None)
            if address not in (None, "auto"):
                from robo_rl.distributed.cluster import check_reachable

                check_reachable(str(address), option="hydra.launcher.ray.init.address")
        except Exception as error:  # noqa: BLE001 (as on_run_start)
            raise _TaskFailed(error) from None

    @staticmethod
    def _task(config: Any) -> Any:
        """The task's part of the composed `config`, Hydra's own left out."""
        import copy

        from hydra.core.hydra_config import HydraConfig
        from omegaconf import open_dict, read_write

        HydraConfig.instance().set_config(config)  # options may interpolate ${hydra:...}; run_job sets it again
        task = copy.deepcopy(config)
        with read_write(task), open_dict(task):
            del task["hydra"]
        return task


# set by CheckOptionsFirst for a single run (not a sweep): the output folder and the parents Hydra creates for it;
# or, where the output folder exists (a resume), its entries and those of its resume records before the command
_HYDRA_CREATED: list[Path] = []
_HYDRA_EXISTING: dict[Path, set[str]] = {}
# the folder of a resumed run that holds each resume's Hydra record (train's hydra.output_subdir)
RESUME_RECORDS = ".hydra_resumes"


_RUN_LOCK: list[int] = []  # the descriptor of the run folder this process holds, open until it exits


def lock_run_dir(run_dir: Path, command: str) -> None:
    """Hold an exclusive lock on the run folder `run_dir` (made if missing) for as long as this process lives;
    ConfigError where another process holds it. Two trainings started into one folder both passed the new-folder
    check and both ended with status 0, the second's files over the first's; two resumes of one run wrote the
    same checkpoints. The lock is on the folder itself (flock), so no file is left behind."""
    import fcntl

    from sim.errors import ConfigError

    run_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise ConfigError(f"hydra.run.dir={run_dir} is in use: another {command} (or train resume=) is running there "
                          "now; give another folder, or wait for that one to end") from None
    _RUN_LOCK.append(descriptor)


def remove_refused_record(created: list[Path], existing: dict[Path, set[str]]) -> None:
    """Remove the output folder Hydra made for a command refused in its task (a user's mistake found after the
    options' check) and the parents made with it (`created`, deepest first), where it holds nothing but Hydra's
    record and the command's log: it looked like a run or an evaluation, in the user's run folder. Where the
    output folder existed (a resumed run: `existing`, its folders' entries before), the record and log that
    Hydra added to it go."""
    import shutil

    from hydra.core.hydra_config import HydraConfig

    output = Path(HydraConfig.get().runtime.output_dir).absolute()
    for folder, before in existing.items():  # deepest first
        if folder.is_dir() and (folder == output or folder.parent == output):
            for path in folder.iterdir():
                if path.name in before or (folder == output and not _is_hydra_record(path)):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    if not created or not created[0].is_dir() or output != created[0]:
        return
    if not all(_is_hydra_record(p) for p in created[0].iterdir()):
        return  # the command wrote something of its own: keep it for the user to see
    shutil.rmtree(created[0])
    remove_made_folders(created[1:])


def remove_empty_output(created: list[Path]) -> None:
    """Remove the output folder Hydra made for a finished command (`created`, deepest first) where it holds nothing
    but empty logs: export keeps no record there (output_subdir null), and each export left a dated folder with an
    empty log in the user's run."""
    if not created or not created[0].is_dir():
        return
    entries = list(created[0].iterdir())
    if not all(p.is_file() and not p.is_symlink() and p.suffix == ".log" and p.stat().st_size == 0 for p in entries):
        return
    for path in entries:
        path.unlink()
    created[0].rmdir()
    remove_made_folders(created[1:])


def _is_hydra_record(path: Path) -> bool:
    """Whether `path`, in a command's output folder, is what Hydra writes there: its record or the command's log."""
    return path.name in (".hydra", RESUME_RECORDS) or path.suffix == ".log"


# the commands whose output folder (hydra.run.dir) becomes a run: train (unless it resumes one) and distill
NEW_RUN_COMMANDS = ("train", "distill")
# the commands that hold their output folder while they run (lock_run_dir): a second teacher_pool on one out= failed
# each member and appended its error to the first one's member logs
LOCKED_COMMANDS = (*NEW_RUN_COMMANDS, "teacher_pool")
# what a new run's folder may already hold besides an earlier attempt's record: make train puts the student above the
# teachers it distils (<run>/teachers)
NEW_RUN_NEIGHBOURS = {"distill": ("teachers",)}
# what a distillation writes before its end (config.yaml, its TensorBoard events, the learning curve): with no
# checkpoint, best policy or summary beside them it is an interrupted attempt, which is started again
DISTILL_PROGRESS_FILES = ("config.yaml", "tensorboard", "learning_curve.png")
# commands whose hydra.run.dir holds only their own record and results (by default a new folder inside the run)
RECORDING_COMMANDS = ("evaluate", "robustness", "export", "record")


def hydra_value(value: str | Path) -> str:
    """`value` quoted for a Hydra command-line override (`key=<it>`): a path with a comma, a space, brackets or a
    quote is otherwise parsed as a sweep, a list or a syntax error."""
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", str(value))  # backslashes before a quote double
    return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text) + "'"  # as do those before the closing one


def file_in_the_way(path: str | Path) -> Path | None:
    """The file that stands where `path`'s folders would be made (`path`'s deepest existing ancestor, if that is
    not a folder), else None: writing there would fail with "File exists" or "Not a directory"."""
    for parent in Path(path).parents:  # the deepest that exists decides
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def remove_made_folders(made: list[Path]) -> None:
    """Remove the folders a command made (`made`, deepest first) while they are empty: a command that failed or was
    interrupted leaves no trace of itself, and nothing of anyone else's is touched."""
    for folder in made:
        if not folder.is_dir() or any(folder.iterdir()):
            return
        folder.rmdir()


def check_new_file(given: str, suffix: str, option: str, earlier: Callable[[Path], bool]) -> Path:
    """The file `option`=`given` names for a command to write, ConfigError unless it ends in `suffix`, no file
    stands where its folders would be made, and it is new or `earlier(path)` (the command's own earlier output,
    which it replaces): a results, recording or classifier file was written over whatever the user named."""
    from sim.errors import ConfigError

    path = Path(given)
    if given == "" or given.endswith(("/", "\\")) or path.suffix != suffix or path.is_dir():
        raise ConfigError(f"{option}={given}: give a file ending {suffix}")
    blocking = file_in_the_way(path)
    if blocking is not None:
        raise ConfigError(f"{option}={given} lies under {blocking}, a file; give a file in a folder")
    if path.exists() and not earlier(path):
        raise ConfigError(f"{option}={given} exists and is not this command's earlier output; give a new file")
    return path


# the option a command's hydra.run.dir is made from, where it is one of its own (the user gave that, not hydra.run.dir)
OUTPUT_OPTIONS = {"teacher_pool": "out"}


def check_output_dir(run_dir: str, command: str | None = None) -> None:
    """ConfigError if `run_dir` (hydra.run.dir, or the `command`'s own option it is made from), or a folder above it,
    is a file: Hydra's makedirs then failed with `README.md: File exists`, which did not say that a folder was
    wanted."""
    from sim.errors import ConfigError

    blocking = Path(run_dir) if Path(run_dir).exists() and not Path(run_dir).is_dir() else file_in_the_way(run_dir)
    if blocking is not None:
        what = "is a file" if blocking == Path(run_dir) else f"lies under {blocking}, a file"
        raise ConfigError(f"{OUTPUT_OPTIONS.get(command or '', 'hydra.run.dir')}={run_dir} {what}; give a folder for "
                          "the command's output (a new one is made)")


def check_new_run_dir(run_dir: str, command: str) -> None:
    """ConfigError if `run_dir` already holds a run, which `command` would overwrite (its policy, its config,
    Hydra's record of its command) and whose checkpoints it would mix with its own, or anything else that is not
    an earlier attempt's record (NEW_RUN_NEIGHBOURS aside; an interrupted distillation's DISTILL_PROGRESS_FILES
    are such a record)."""
    from robo_rl.checkpoint import run_files
    from sim.errors import ConfigError

    found = run_files(run_dir)
    interrupted = command == "distill" and found == ["config.yaml"]
    if found and not interrupted:
        instead = f"continue it with resume={run_dir}, or give" if command == "train" else "give"
        raise ConfigError(f"hydra.run.dir={run_dir} already holds a run ({', '.join(found)}); {instead} a new folder "
                          "(or delete that one first)")
    # a bundle, a folder of runs or a user's files: the run's own files (learning_curve.png, tb/, ...) went in
    # among them; what an earlier attempt of `command` stopped before its config.yaml leaves is taken
    ours = {".hydra", f"{command}.log", *NEW_RUN_NEIGHBOURS.get(command, ()), *(DISTILL_PROGRESS_FILES if interrupted else ())}
    folder = Path(run_dir)
    foreign = sorted(entry.name for entry in folder.iterdir() if entry.name not in ours) if folder.is_dir() else []
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ConfigError(f"hydra.run.dir={run_dir} holds files that are not a {command} run's ({shown}); give a new "
                          "or empty folder for the run")


def check_not_a_run_or_bundle(run_dir: str, command: str) -> None:
    """ConfigError if `run_dir` (hydra.run.dir) is a training run's folder, an exported bundle or an earlier
    command's output folder: `command` would write Hydra's record of itself (.hydra/config.yaml, ...) over theirs,
    and its log and results over theirs (an earlier suite's robustness.json)."""
    from robo_rl.checkpoint import run_files
    from sim.errors import ConfigError

    found = run_files(run_dir) + [name for name in ("policy.json",) if (Path(run_dir) / name).exists()]
    if found:
        raise ConfigError(f"hydra.run.dir={run_dir} holds a run or a bundle ({', '.join(found)}), whose records "
                          f"{command} would overwrite; give a new folder, or omit hydra.run.dir= (a new folder "
                          "inside the run)")
    if (Path(run_dir) / ".hydra").exists():
        raise ConfigError(f"hydra.run.dir={run_dir} holds an earlier command's record and results (.hydra), which "
                          f"{command} would overwrite; give a new folder, or omit hydra.run.dir= (a new folder "
                          "inside the run)")


def hydra_command(config_path: str, config_name: str, version_base: str = "1.3") -> Callable[[F], F]:
    """`hydra.main(config_path, config_name, version_base)` for an entry point, with `command`'s errors:
    one line for a user's mistake, in composition or in the task, a traceback for a bug. The composed
    options are checked first (`robo_rl.options.check_options` for `config_name`)."""
    import hydra

    def decorate(task: F) -> F:
        @functools.wraps(task)  # Hydra finds config_path from the task's module through __wrapped__
        def guarded(cfg: Any, *args: Any, **kwargs: Any) -> Any:
            created, _HYDRA_CREATED[:] = list(_HYDRA_CREATED), []  # this task's, never a previous one's
            existing = dict(_HYDRA_EXISTING)
            _HYDRA_EXISTING.clear()
            try:
                from robo_rl.options import check_options

                check_options(cfg, config_name)  # every option's type and range, before any work
                result = task(cfg, *args, **kwargs)
                remove_empty_output(created)
                return result
            except Exception as error:  # noqa: BLE001 (reported by `command`, outside Hydra)
                if is_user_error(error):
                    remove_refused_record(created, existing)
                raise _TaskFailed(error) from None
            except KeyboardInterrupt:  # a new folder with nothing but Hydra's record and the log was litter in the run
                remove_refused_record(created, {})
                raise

        composed = hydra.main(config_path=config_path, config_name=config_name, version_base=version_base)(guarded)

        @functools.wraps(composed)
        def entry(*args: Any, **kwargs: Any) -> Any:
            check_hydra_arguments(sys.argv[1:])
            check_launcher_installed(sys.argv[1:])
            try:
                return composed(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 (re-raised, or as the user's one line)
                unknown = unknown_option(error, config_name) or unquoted_item(error)
                if unknown is not None:
                    raise unknown from None
                raise

        return command(entry)

    return decorate


def check_hydra_arguments(argv: list[str]) -> None:
    """ConfigError for command-line arguments Hydra's own parser refuses (an unknown --flag, a flag after the
    key=value options with more of them after it, a bad --cfg): its usage block of 8-9 lines instead of one."""
    from hydra._internal.utils import get_args_parser

    from sim.errors import ConfigError

    if any(arg.split("=")[0] in ("-h", "--help", "--hydra-help", "--version", "-i", "--info", "-sc",
                                 "--shell-completion") for arg in argv):
        return  # Hydra prints what they ask for, and exits

    def refuse(message: str) -> None:
        rest = message.partition("unrecognized arguments:")[2].split()
        if rest and not any(arg.startswith("-") for arg in rest):  # key=value options after a flag
            hint = "Hydra's flags (-m, --cfg, ...) go before the key=value options, e.g. -m vehicle=a,b run=<run dir>"
        else:
            hint = "this command's options are key=value; --hydra-help lists Hydra's flags"
        raise ConfigError(f"{message}; {hint}")

    parser = get_args_parser()
    parser.error = refuse  # type: ignore[method-assign]
    parser.parse_args(argv)


RAY_LAUNCHER = "hydra_plugins.hydra_ray_launcher"


def require_module(name: str) -> None:
    """ModuleNotFoundError for `name` (which `one_line` turns into how to install its extra) where it cannot be
    imported; nothing is imported."""
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or the module blocked in sys.modules
        found = False
    if not found:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def check_launcher_installed(argv: list[str]) -> None:
    """ModuleNotFoundError for a sweep on a Ray launcher (`hydra/launcher=ray_cluster`, or the plugin's own `ray`)
    where its plugin, of the ray extra, is not installed: Hydra says only that it could not load or find the config
    'hydra/launcher/ray'."""
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key == "hydra/launcher" and value.startswith("ray"):
            require_module(RAY_LAUNCHER)


def unquoted_item(error: BaseException) -> Exception | None:
    """For Hydra's parse error on a list item that holds `=` (teacher_pool's `overrides=[learning_starts=100]`: "no
    viable alternative at input '[learning_starts='"), a ConfigError that says to quote the item; None otherwise."""
    from sim.errors import ConfigError

    match = re.search(r"no viable alternative at input '(.*\[([^\]'\"]*?)=)'", str(error))
    if match is None:
        return None
    return ConfigError(f"{one_line(error).split('; See https')[0]}: a list item that holds '=' must be quoted, e.g. "
                       f"'overrides=[\"{match.group(2)}=...\"]'")


def unknown_option(error: BaseException, command: str) -> Exception | None:
    """For Hydra's refusal of an override whose key no config file defines ("Could not override 'eval_every'. To
    append to your config use +eval_every=..."; the + then got "unknown option"), a ConfigError naming the key and
    the command's options nearest to it; None for any other error."""
    import difflib

    from sim.errors import ConfigError

    match = re.match(r"Could not override '([^']+)'", str(error))
    if match is None or "not in struct" not in one_line(error):
        return None
    from robo_rl.options import known_keys

    def paths(tree: Any, prefix: str = "") -> list[str]:
        if not isinstance(tree, dict) or not tree:
            return [prefix[:-1]] if prefix else []
        return [path for key, below in tree.items() if key != "hydra" for path in paths(below, f"{prefix}{key}.")]

    key = match.group(1)
    tree = known_keys(command)
    parts = key.split(".")
    for depth in range(1, len(parts)):  # below a free-form mapping (env.overrides) new keys are added with +
        node: Any = tree
        for part in parts[:depth]:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None and not (isinstance(node, dict) and node):
            added = re.search(r"use (\+\S+)", str(error))
            return ConfigError(f"{key}: {'.'.join(parts[:depth])} takes keys of its own, added with + "
                               f"({added.group(1) if added else '+' + key + '=...'})")
    near = difflib.get_close_matches(key, paths(tree), n=3, cutoff=0.75)
    parent = key.rpartition(".")[0]
    node = tree
    for part in parent.split(".") if parent else []:
        node = node.get(part) if isinstance(node, dict) else None
    if near:
        hint = f"did you mean {' or '.join(near)}?"
    elif isinstance(node, dict) and node:
        hint = f"{parent or command} has: {', '.join(sorted(str(k) for k in node if k != 'hydra'))}"
    else:
        hint = f"see configs/{command}.yaml and its config groups"
    return ConfigError(f"{key} is not an option of {command}; {hint}")
