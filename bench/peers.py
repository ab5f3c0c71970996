"""Shared by the benchmarks: peer software, each in its own virtual environment under bench/ (never the
package's), and writing the results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def peer_python(venv: Path, requirements: list[str], probe: str) -> Path:
    """The Python of `venv`, created and given `requirements` on first use (checked by importing `probe`)."""
    python = venv / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", f"import {probe}"], capture_output=True).returncode:
        print(f"installing {', '.join(requirements)} into {venv} (first run only) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *requirements], check=True)
    return python


def write_results(path: Path, results: Any) -> None:
    """Write a benchmark's results as JSON (creating bench/results/) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    print(f"wrote {path}")
