"""Fuzz-suite fixtures: a sandbox working directory per test and the tallies (printed by tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.fuzz.harness import Tally, changed, repository_files


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """An empty working directory for the loaders (relative paths, Minari's datasets and any file a loader
    writes land there, where the suite can see them)."""
    work = tmp_path / "sandbox"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return work


@pytest.fixture
def report(record_property, sandbox):
    """Collects the tallies of a test and fails it on any finding: a raw traceback, a hang, a non-finite
    output, a file changed in the sandbox outside what the loader owns (checked around every input) or among
    the repository's own files (over the whole test)."""
    tallies: list[Tally] = []
    before_repo = repository_files()

    class Report:
        def tally(self, loader: str, owned: tuple = ()) -> Tally:
            """A new tally whose inputs may write only under `owned` (a run, a bundle) in the sandbox."""
            tallies.append(Tally(loader, watch=sandbox, owned=tuple(owned)))
            return tallies[-1]

    yield Report()
    if tallies:  # the repository's own files, over the whole test (the sandbox is checked per input)
        tallies[-1].touched.extend(f"repository file {name}" for name in changed(before_repo, repository_files()))
    for tally in tallies:
        record_property("fuzz", tally.line())
        print(tally.line())
    failures = [f"{t.loader}: {f}" for t in tallies for f in t.failures()]
    assert not failures, f"{len(failures)} findings:\n" + "\n".join(failures[:60])

