"""The fuzz harness itself: each way an input can go wrong is seen and counted (a harness that saw nothing
would pass every loader)."""

from __future__ import annotations

import math
import time

import numpy as np

from sim.errors import ConfigError
from tests.fuzz import harness
from tests.fuzz.harness import Tally, mutate, mutate_bytes


def test_each_outcome_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "INPUT_TIME_BOUND_S", 0.2)
    tally = Tally("probe", watch=tmp_path, owned=(tmp_path / "run",))
    (tmp_path / "run").mkdir()

    def refuse():
        raise ConfigError("x must be a finite number, got nan")

    def write(path):
        path.write_text("x")
        return 1.0

    tally.run("fine", lambda: {"obs": np.zeros(3)})
    tally.run("refused", refuse)
    tally.run("bug", lambda: {}["missing"])
    tally.run("nan", lambda: {"reward": np.array([0.0, math.nan])})
    tally.run("hang", lambda: time.sleep(5))
    tally.run("owned write", lambda: write(tmp_path / "run" / "ok.txt"))
    tally.run("stray write", lambda: write(tmp_path / "stray.txt"))
    assert (tally.inputs, tally.accepted, tally.refused) == (7, 3, 1)
    assert [r.split(":")[0] for r in tally.raw] == ["bug"] and tally.hangs == ["hang"]
    assert tally.non_finite == ["nan: output.reward"] and tally.touched == ["stray write: stray.txt"]
    assert len(tally.failures()) == 4


def test_a_loader_that_refuses_valid_input_fails_its_tally():
    def refuse():
        raise ConfigError("x must be a finite number, got nan")

    tally = Tally("refuses everything")
    tally.run("intact", refuse)
    tally.run("#0 mutated", refuse)
    assert tally.refused == 2 and not tally.raw
    assert tally.failures() == ["no input accepted: the loader refuses valid input too",
                                "unmutated input refused: intact: x must be a finite number, got nan"]


def test_mutations_are_seeded_and_change_the_input():
    value = {"a": [1.0, 2.0], "b": {"c": "text", "d": True}}
    first = [mutate(value, np.random.default_rng(1)) for _ in range(3)]
    again = [mutate(value, np.random.default_rng(1)) for _ in range(3)]
    assert first == again and value == {"a": [1.0, 2.0], "b": {"c": "text", "d": True}}  # the seed is untouched
    rng = np.random.default_rng(2)
    assert sum(mutate(value, rng)[0] != value for _ in range(50)) >= 45
    data = bytes(range(256)) * 64
    assert sum(mutate_bytes(data, rng)[0] != data for _ in range(50)) >= 45
