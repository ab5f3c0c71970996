"""Every bench script still imports what it uses from the library and from its sibling scripts: a function moved
or renamed in robo_rl must not leave a bench script that fails on its first line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# peers that bench scripts compare against, installed only where those benchmarks are run
PEER_PACKAGES = {"stable_baselines3"}

IMPORT_ALL = """
import importlib.util, sys
from pathlib import Path
bench = Path(sys.argv[1])
sys.path[:0] = [str(bench), str(bench.parent)]
peers = set(sys.argv[2].split(","))
for script in sorted(bench.glob("*.py")):
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = sys.modules[script.stem] = importlib.util.module_from_spec(spec)  # as `import` does: dataclasses need it
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as error:
        if error.name not in peers:
            print(f"{script.name}: {error!r}")
    except Exception as error:
        print(f"{script.name}: {error!r}")
"""


def test_every_bench_script_imports() -> None:
    """Each bench/*.py module loads (its `main` is not run); a missing peer package is allowed."""
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, str(REPO / "bench"), ",".join(sorted(PEER_PACKAGES))],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", f"bench scripts that fail to import:\n{done.stdout}"


def test_results_go_only_to_a_new_json_file_or_over_an_earlier_benchmarks(tmp_path) -> None:
    """--json <a run's config.yaml> overwrote it with the results; --json <a folder> was a traceback after the
    measuring. Both are refused as the arguments are parsed."""
    import argparse
    import json

    import pytest

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from peers import results_file
    finally:
        sys.path.remove(str(REPO / "bench"))
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    (tmp_path / "notes.json").write_text('{"mine": 1}')
    (tmp_path / "earlier.json").write_text(json.dumps({"machine": {"cpu": "x"}, "rows": []}))
    for given, message in (("config.yaml", "give a file ending .json"), (".", "give a file ending .json"),
                           ("config.yaml/x.json", "lies under .*config.yaml, a file"),
                           ("notes.json", "exists and is not this command's earlier output")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            results_file(str(tmp_path / given))
    assert results_file(str(tmp_path / "earlier.json")) == tmp_path / "earlier.json"
    assert results_file(str(tmp_path / "new" / "r.json")) == tmp_path / "new" / "r.json"
    assert (tmp_path / "config.yaml").read_text() == "seed: 0\n"
