"""Peer software for the benchmarks, each in its own virtual environment under bench/ (never the package's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def peer_python(venv: Path, requirements: list[str], probe: str) -> Path:
    """The Python of `venv`, created and given `requirements` on first use (checked by importing `probe`)."""
    python = venv / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", f"import {probe}"], capture_output=True).returncode:
        print(f"installing {', '.join(requirements)} into {venv} (first run only) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *requirements], check=True)
    return python
