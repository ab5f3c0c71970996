"""Fuzzed Minari datasets through `robo_rl.datasets.load_transitions` (what `train demos=` does): damaged
HDF5 bytes, edited metadata.json, and HDF5 files whose episodes were edited (NaN, wrong shapes and dtypes,
missing arrays and episodes). Refused with one DatasetError, or finite transitions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest

import sim  # noqa: F401  (the dataset's env id must be registered for Minari)
from robo_rl.datasets import load_transitions, write_dataset
from tests.fuzz.harness import SEED, SPECIAL, mutate, mutate_bytes

BYTE_INPUTS = 350
METADATA_INPUTS = 450
STRUCTURE_INPUTS = 300
ENV_ID = "robo_rl/ArmReach-v0"
SPEC = {"id": ENV_ID, "observation_size": 16, "action_size": 4, "action_low": [-1.0] * 4, "action_high": [1.0] * 4}
ARRAYS = ("observations", "actions", "rewards", "terminations", "truncations", "infos/is_success")


@pytest.fixture
def seed_dataset(sandbox) -> Path:
    """A valid dataset of three short episodes of the arm reach env's shapes."""
    rng = np.random.default_rng([SEED, 6])
    episodes = []
    for index in range(3):
        steps = 10
        episodes.append({
            "observations": rng.normal(size=(steps + 1, 16)).astype(np.float32),
            "actions": rng.uniform(-1, 1, (steps, 4)).astype(np.float32), "rewards": rng.normal(size=steps),
            "terminations": np.zeros(steps, bool), "truncations": np.arange(steps) == steps - 1,
            "is_success": np.zeros(steps, bool), "seed": index})
    space = gym.spaces.Box(-np.inf, np.inf, (16,), np.float32)
    path = write_dataset("fuzz/seed-v0", episodes, ENV_ID, space, gym.spaces.Box(-1.0, 1.0, (4,), np.float32))
    seed = sandbox.parent / "seed_dataset"  # outside the sandbox: not an input's doing
    shutil.move(path, seed)
    return seed


def fresh_copy(seed: Path, sandbox: Path) -> Path:
    target = sandbox / "dataset"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(seed, target)
    return target


def edit_hdf5(path: Path, rng: np.random.Generator) -> str:
    """Damage one episode of the HDF5 file in place, structure-aware; returns what was done."""
    with h5py.File(path, "r+") as file:
        episode = f"episode_{int(rng.integers(3))}"
        name = ARRAYS[int(rng.integers(len(ARRAYS)))]
        where = f"{episode}/{name}"
        kind = int(rng.integers(8))
        if where not in file:  # an earlier edit removed it
            return f"{where} already gone"
        if kind == 0:
            del file[episode]
            return f"del {episode}"
        data = file[where][()]
        del file[where]
        if kind == 1:
            return f"del {where}"
        if kind == 2 and data.dtype.kind == "f" and data.size:
            data = data.copy()
            data.flat[int(rng.integers(data.size))] = rng.choice([np.nan, np.inf, -np.inf, 1e38])
            what = "a non-finite or huge entry"
        elif kind == 3:
            data = data[: max(len(data) - int(rng.integers(1, 4)), 0)]
            what = "rows cut"
        elif kind == 4:
            data = data.reshape(-1) if data.ndim > 1 else data[:, None].repeat(2, axis=1)
            what = "reshaped"
        elif kind == 5:
            data = data.astype("S8")
            what = "bytes"
        elif kind == 6:
            data = np.asarray(data, dtype=np.float64) * float(rng.choice([1e30, -5.0]))
            what = "scaled"
        else:
            file[episode].attrs["total_steps"] = SPECIAL[int(rng.integers(6))]
            what = "total_steps attribute"
        file.create_dataset(where, data=data)
        return f"{where}: {what}"


def test_fuzzed_dataset_bytes(seed_dataset, sandbox, report):
    tally = report.tally("Minari dataset HDF5 bytes")
    data = (seed_dataset / "data" / "main_data.hdf5").read_bytes()
    rng = np.random.default_rng([SEED, 7])
    target = fresh_copy(seed_dataset, sandbox)
    tally.run("intact", lambda: load_transitions(target, SPEC))
    for index in range(BYTE_INPUTS):
        damaged, what = mutate_bytes(data, rng)
        (target / "data" / "main_data.hdf5").write_bytes(damaged)
        tally.run(f"#{index} {what}", lambda: load_transitions(target, SPEC))


def test_fuzzed_dataset_metadata(seed_dataset, sandbox, report):
    tally = report.tally("Minari dataset metadata.json")
    metadata = json.loads((seed_dataset / "data" / "metadata.json").read_text())
    rng = np.random.default_rng([SEED, 8])
    target = fresh_copy(seed_dataset, sandbox)
    for index in range(METADATA_INPUTS):
        edited, what = mutate(metadata, rng)
        (target / "data" / "metadata.json").write_text(json.dumps(edited))
        tally.run(f"#{index} {what}", lambda: load_transitions(target, SPEC))


def test_fuzzed_dataset_episodes(seed_dataset, sandbox, report):
    tally = report.tally("Minari dataset episodes (HDF5 structure)")
    rng = np.random.default_rng([SEED, 9])
    for index in range(STRUCTURE_INPUTS):
        target = fresh_copy(seed_dataset, sandbox)
        what = "; ".join(edit_hdf5(target / "data" / "main_data.hdf5", rng) for _ in range(int(rng.integers(1, 3))))
        tally.run(f"#{index} {what}", lambda: load_transitions(target, SPEC))
