"""Shared by the benchmarks: peer software, each in its own virtual environment under bench/ (never the
package's), writing the results, and the command line's checks (`BenchArgumentParser`, `Positive`,
`NonNegative`). Standard library only: peer scripts import it from their own virtual environments."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn


class BenchArgumentParser(argparse.ArgumentParser):
    """A bench script's parser: a refused argument is one line, `error: ...`, and exit 2 (the project's rule for a
    user's mistake, as the `python -m robo_rl...` commands do), without argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


class Positive(argparse.Action):
    """`action=Positive` with `type=int` or `type=float`: each value (all of them, with nargs) must be finite and
    above 0, as a count or a number of seconds must. Refused while the arguments are parsed, so before any work:
    0 or a negative had given a traceback part-way, an empty measurement, or a benchmark that never ended."""

    zero_allowed = False
    maximum: float = math.inf

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = values if isinstance(values, list) else [values]
        # finite: inf seconds would time a window forever (nan fails the comparison anyway)
        if not all(math.isfinite(v) and (v >= 0 if self.zero_allowed else v > 0) and v <= self.maximum for v in given):
            each = "each " if isinstance(values, list) else ""
            parser.error(f"{option_string} must {each}be {self.allowed()}, got {' '.join(map(str, given))}")
        setattr(namespace, self.dest, values)

    def allowed(self) -> str:
        """What the option takes, in words."""
        most = f" and at most {self.maximum:g}" if math.isfinite(self.maximum) else ""
        if self.type is int:
            return ("0 or more" if self.zero_allowed else "1 or more") + most
        return ("a finite number of 0 or more" if self.zero_allowed else "a finite number above 0") + most


class NonNegative(Positive):
    """`action=NonNegative`: as `Positive`, with 0 allowed (a count where 0 means none)."""

    zero_allowed = True


class Seed(NonNegative):
    """`action=Seed` with `type=int`: a seed as the training commands take one, 0 to 2**32 - 1 (numpy's generators
    refuse a negative one, a traceback after the setup)."""

    maximum = 2**32 - 1

    def allowed(self) -> str:
        """What the option takes, in words."""
        return f"a whole number from 0 to {self.maximum}"


def peer_python(venv: Path, requirements: list[str], probe: str) -> Path:
    """The Python of `venv`, created and given `requirements` on first use (checked by importing `probe`)."""
    python = venv / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", f"import {probe}"], capture_output=True).returncode:
        print(f"installing {', '.join(requirements)} into {venv} (first run only) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *requirements], check=True)
    return python


def machine() -> dict[str, Any]:
    """The CPU these numbers come from: model, x86 family/model, CPUs, AVX-512. Ratios against the same peer
    moved by ~15% between two CPUs of this VM kind (Zen 3 and Zen 5), so every result file records it."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:  # not Linux
        pass
    flags = info.get("flags", "").split()
    return {"processor": info.get("model name", platform.processor()), "cpu_family": info.get("cpu family"),
            "cpu_model": info.get("model"), "cpus": os.cpu_count(), "avx512": "avx512f" in flags,
            "python": platform.python_version()}


def machine_line() -> str:
    """`machine()` in one line, printed at the top of a benchmark's output."""
    m = machine()
    return (f"machine: {m['processor']} (x86 family {m['cpu_family']}, model {m['cpu_model']}), {m['cpus']} CPUs, "
            f"AVX-512 {'yes' if m['avx512'] else 'no'}")


def results_file(text: str) -> Path:
    """`--json`'s argparse type: a .json file in a folder that is (or can be) made, new or an earlier benchmark's
    results (a JSON object with its "machine"), checked before measuring: any file was overwritten (a run's
    config.yaml), and a folder failed with a traceback after the minutes of measuring."""
    from robo_rl.cli import check_new_file
    from sim.errors import ConfigError

    def earlier_results(path: Path) -> bool:
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        return isinstance(earlier, dict) and "machine" in earlier

    try:
        return check_new_file(text, ".json", "--json", earlier_results)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def write_results(path: Path, results: Any) -> None:
    """Write a benchmark's results as JSON (creating bench/results/), with the machine, and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(results, dict):
        results = {"machine": {**machine(), **results.get("machine", {})}, **results}
    path.write_text(json.dumps(results, indent=2))
    print(f"wrote {path}")


def peer_bench_arguments(doc: str, json_name: str, peer: str, seconds: float = 2.0,
                         repeats: int = 3) -> BenchArgumentParser:
    """The options every peer benchmark takes: --seconds and --repeats per measurement, --json (default
    bench/results/<json_name>), --no-peer to skip the named peer."""
    parser = BenchArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, action=Positive, default=seconds)
    parser.add_argument("--repeats", type=int, action=Positive, default=repeats)
    parser.add_argument("--json", type=results_file, default=Path(__file__).resolve().parent / "results" / json_name)
    parser.add_argument("--no-peer", action="store_true", help=f"skip {peer}")
    return parser
