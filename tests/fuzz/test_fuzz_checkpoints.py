"""Fuzzed checkpoints through what `evaluate`, `export` and `resume=` do with them: load (robo_rl.checkpoint),
check against the env, rebuild the agent and act. Damaged bytes, and damaged structure resealed with a valid
checksum (what an editor, not a disk, does), are refused with one CheckpointError, or load into an agent
whose actions are finite."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from robo_rl.checkpoint import (agent_from_checkpoint, check_compatible, list_checkpoints, load_checkpoint, policy_file,
                                seal)
from tests.fuzz.harness import SEED, mutate, mutate_bytes

BYTE_INPUTS = 1000
STRUCTURE_INPUTS = 200
RESUME_INPUTS = 30


def act(path, spec: dict) -> dict:
    """What evaluate_run does with a checkpoint, short of the rollouts."""
    state = load_checkpoint(path)
    check_compatible(state, spec)
    agent = agent_from_checkpoint(state)
    observations = torch.randn(16, spec["observation_size"], generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return {"actions": agent.act(observations, deterministic=True)}


@pytest.fixture
def seed_policy(trained_run):
    """The trained run's policy checkpoint: (its bytes, its state without the loader's `path`)."""
    path = policy_file(trained_run, "best")
    state = load_checkpoint(path)
    state.pop("path")
    return path.read_bytes(), state


@pytest.mark.filterwarnings("ignore")
def test_fuzzed_checkpoint_bytes(seed_policy, sandbox, report):
    data, state = seed_policy
    spec = state["env_spec"]
    tally = report.tally("checkpoint bytes")
    rng = np.random.default_rng([SEED, 1])
    target = sandbox / "policy.pt"
    target.write_bytes(data)
    tally.run("intact", lambda: act(target, spec))
    for index in range(BYTE_INPUTS):
        damaged, what = mutate_bytes(data, rng)
        target.write_bytes(damaged)
        tally.run(f"#{index} {what}", lambda: act(target, spec))


@pytest.mark.filterwarnings("ignore")
def test_fuzzed_checkpoint_structure(seed_policy, sandbox, report):
    _, state = seed_policy
    spec = state["env_spec"]
    tally = report.tally("checkpoint structure")
    rng = np.random.default_rng([SEED, 2])
    target = sandbox / "policy.pt"
    for index in range(STRUCTURE_INPUTS):
        edited, what = mutate(state, rng)
        try:
            torch.save(seal(edited) if isinstance(edited, dict) else edited, target)
        except Exception:  # noqa: BLE001 (the mutation made something torch cannot even write: not an input)
            torch.save(edited if not isinstance(edited, dict) else {k: v for k, v in edited.items()}, target)
        tally.run(f"#{index} {what}", lambda: act(target, spec))


@pytest.mark.filterwarnings("ignore")
def test_fuzzed_newest_checkpoint_on_resume(trained_run, sandbox, report):
    """resume= loads a run's newest intact checkpoint: a damaged newest one falls back to the older one."""
    newest = list_checkpoints(trained_run)[-1]
    data = newest.read_bytes()
    run = sandbox / "run"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(newest, run / "checkpoints" / "checkpoint_000000000001.pt")
    state = load_checkpoint(newest)
    spec = state["env_spec"]
    tally = report.tally("checkpoint resume (newest damaged)")
    rng = np.random.default_rng([SEED, 3])
    for index in range(RESUME_INPUTS):
        damaged, what = mutate_bytes(data, rng)
        (run / "checkpoints" / newest.name).write_bytes(damaged)

        def resume() -> dict:
            loaded = load_checkpoint(run)
            assert loaded["path"].endswith(("checkpoint_000000000001.pt", newest.name))
            return act(loaded["path"], spec)

        tally.run(f"#{index} {what}", resume)
