"""Checkpoints as untrusted input: safe loading, integrity, fallback, architecture checks, resume semantics,
and commands that must not create a run directory."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from robo_rl.checkpoint import (CheckpointError, agent_from_checkpoint, check_compatible, content_digest, list_checkpoints,
                                load_checkpoint, remove_orphans, seal, write_atomically)
from robo_rl.evaluate import evaluate_run
from robo_rl.export.bundle import export_bundle
from robo_rl.train import ResumeError, Trainer
from tests.robo_rl.quick import quick_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory) -> Path:
    """A short quick run with checkpoints at 400, 800 and 1200 env steps (and a best policy)."""
    run = tmp_path_factory.mktemp("three") / "run"
    Trainer(quick_config("total_env_steps=1200", "learning_starts=400", "eval.interval_env_steps=1200",
                         "eval.episodes=4", "checkpoint.interval_env_steps=400", "logging.tensorboard=false"),
            run).run()
    assert [p.name for p in list_checkpoints(run)] == [f"checkpoint_{s:012d}.pt" for s in (400, 800, 1200)]
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def _unsafe(path: Path) -> dict:
    """A checkpoint as plain torch.load gives it: for tests that edit one (trusted: written by these tests)."""
    return torch.load(path, weights_only=False)


class _RunsCode:
    """What a malicious checkpoint holds: unpickling it calls os.system."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_that_would_run_code_is_refused_and_nothing_runs(trained_run, tmp_path):
    marker = tmp_path / "ran"
    state = _unsafe(trained_run / "best_policy.pt")
    state["agent_config"] = _RunsCode(marker)
    evil = tmp_path / "evil.pt"
    torch.save(state, evil)
    with pytest.raises(CheckpointError, match=r"refused.*(system|posix)"):
        load_checkpoint(evil)
    with pytest.raises(CheckpointError, match="refused"):
        evaluate_run(trained_run, checkpoint=str(evil), episodes=2)
    with pytest.raises(CheckpointError, match="refused"):
        export_bundle(trained_run, checkpoint=str(evil), out=tmp_path / "bundle")
    assert not marker.exists() and not (tmp_path / "bundle").exists()
    # the old loader (weights_only=False) would have run it: the test's pickle is live
    torch.load(evil, weights_only=False)
    assert marker.exists()


def test_checkpoints_of_format_1_still_load_with_a_warning(trained_run, tmp_path):
    # what the previous robo-rl wrote: no checksum, no probe, numpy.random.get_state()'s array in the RNG state
    state = _unsafe(list_checkpoints(trained_run)[-1])
    state = {k: v for k, v in state.items() if k not in ("content_sha256", "policy_probe")}
    state["format"] = 1
    state["rng"]["numpy"] = np.random.get_state()
    torch.save(state, tmp_path / "old.pt")
    with pytest.warns(UserWarning, match="format 1.*cannot be verified"):
        loaded = load_checkpoint(tmp_path / "old.pt")
    assert isinstance(loaded["rng"]["numpy"][1], np.ndarray)
    agent = agent_from_checkpoint(loaded)
    assert torch.isfinite(agent.act(torch.zeros(2, state["env_spec"]["observation_size"]), deterministic=True)).all()


def test_flipped_bytes_truncation_and_edits_are_refused(trained_run, tmp_path):
    newest = list_checkpoints(trained_run)[-1]
    data = newest.read_bytes()
    rng = np.random.default_rng(0)
    for trial in range(20):  # 4,000 flipped bytes anywhere (a resume once went on from such a file with exit 0)
        damaged = bytearray(data)
        for index in rng.choice(len(data), 4000, replace=False):
            damaged[index] ^= 0xFF
        (tmp_path / f"flipped{trial}.pt").write_bytes(bytes(damaged))
        with pytest.raises(CheckpointError):
            load_checkpoint(tmp_path / f"flipped{trial}.pt")
    for trial in range(20):  # one flipped byte inside a tensor's data: the zip's framing stays intact
        damaged = bytearray(data)
        index = int(rng.integers(len(data) // 4, len(data) * 3 // 4))
        damaged[index] ^= 0x01
        (tmp_path / "one.pt").write_bytes(bytes(damaged))
        try:
            load_checkpoint(tmp_path / "one.pt")
        except CheckpointError:
            continue
        pytest.fail(f"a flipped byte at {index} loaded")  # (a byte of zip padding would load unchanged: none here)
    for length in (4, 30, 5000, len(data) // 2, len(data) - 1):  # cut short: torch said "[Errno 22] Invalid
        (tmp_path / "torn.pt").write_bytes(data[:length])        # argument" or a paragraph on miniz's codes
        with pytest.raises(CheckpointError, match="is unreadable: its zip archive is cut short or damaged"):
            load_checkpoint(tmp_path / "torn.pt")
    edited = _unsafe(newest)
    edited["counters"]["env_steps"] = 10**6  # an edit that keeps the file well-formed
    torch.save(edited, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(tmp_path / "edited.pt")


def test_the_content_digest_is_the_same_after_a_round_trip_and_sees_every_value(trained_run):
    state = _unsafe(list_checkpoints(trained_run)[-1])
    assert content_digest(state) == state["content_sha256"]
    for path, value in ((("counters", "updates"), 1), (("config", "seed"), 7), (("history", 0, "mean_return"), 1.5)):
        changed = _unsafe(list_checkpoints(trained_run)[-1])
        target = changed
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert content_digest(changed) != state["content_sha256"], path


def test_non_finite_weights_are_refused_even_with_a_valid_checksum(trained_run, tmp_path):
    state = _unsafe(trained_run / "best_policy.pt")
    weight = next(k for k in state["agent"]["model"] if k.startswith("actor.") and k.endswith("weight"))
    state["agent"]["model"][weight][0, 0] = float("nan")
    torch.save(seal(state), tmp_path / "nan.pt")
    with pytest.raises(CheckpointError, match=rf"agent\.model\.{weight}.*NaN"):
        load_checkpoint(tmp_path / "nan.pt")


def test_an_architecture_that_does_not_match_its_weights_is_refused(trained_run, tmp_path):
    state = _unsafe(trained_run / "best_policy.pt")
    assert state["agent_config"]["activation"] == "relu"
    state["agent_config"]["activation"] = "tanh"  # same shapes, another network
    torch.save(state, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="checksum"):
        export_bundle(trained_run, checkpoint=str(tmp_path / "edited.pt"), out=tmp_path / "bundle")
    torch.save(seal(state), tmp_path / "resealed.pt")  # even when whoever edited it recomputed the checksum
    with pytest.raises(CheckpointError, match="activation='tanh'.*does not reproduce"):
        export_bundle(trained_run, checkpoint=str(tmp_path / "resealed.pt"), out=tmp_path / "bundle")
    with pytest.raises(CheckpointError, match="does not reproduce"):
        evaluate_run(trained_run, checkpoint=str(tmp_path / "resealed.pt"), episodes=2)
    state["agent_config"]["actor_hidden"] = [16, 16]  # weights that do not fit: one error, not load_state_dict's
    torch.save(seal(state), tmp_path / "shapes.pt")
    with pytest.raises(CheckpointError, match="do not make an agent"):
        agent_from_checkpoint(load_checkpoint(tmp_path / "shapes.pt"))
    assert not (tmp_path / "bundle").exists()


def test_resume_falls_back_to_the_newest_intact_checkpoint_and_names_the_damaged_one(three_checkpoints, tmp_path):
    run = _copy(three_checkpoints, tmp_path)
    newest = list_checkpoints(run)[-1]
    newest.write_bytes(newest.read_bytes()[:5000])  # torn (e.g. a disk that lost its tail)
    (run / "checkpoints" / ".checkpoint_000000001600.pt.tmp").write_bytes(b"half a checkpoint")  # a killed write
    before = _digest(run)
    with pytest.raises(ResumeError, match="seed"), pytest.warns(UserWarning, match="skipping a damaged"):
        Trainer(quick_config(f"resume={run}", "seed=5"), run, overrides=[f"resume={run}", "seed=5"])
    assert _digest(run) == before  # a refused resume changes nothing, not even what a kill left behind
    with pytest.warns(UserWarning) as caught:
        trainer = Trainer(quick_config(f"resume={run}", "total_env_steps=1600"), run,
                          overrides=[f"resume={run}", "total_env_steps=1600"])
    messages = [str(w.message) for w in caught]
    assert any("skipping a damaged checkpoint" in m and newest.name in m for m in messages), messages
    assert any(".checkpoint_000000001600.pt.tmp" in m and "removed" in m for m in messages), messages
    assert any(f"renamed the damaged checkpoint {newest}" in m for m in messages), messages
    assert trainer.env_steps == 800
    assert (run / "checkpoints" / f"{newest.name}.damaged").is_file()  # kept aside, never read again
    summary = trainer.run()
    assert summary["env_steps"] == 1600
    assert [p.name for p in list_checkpoints(run)][-1] == "checkpoint_000000001600.pt"
    assert load_checkpoint(run)["counters"]["env_steps"] == 1600

    for path in list_checkpoints(run):
        path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="no intact checkpoint"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Trainer(quick_config(f"resume={run}"), run)


def test_resume_refuses_changed_options_and_training_nothing(three_checkpoints, tmp_path):
    run = _copy(three_checkpoints, tmp_path)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for overrides, match in (
            (["seed=5", "total_env_steps=2000"], r"seed is 0 in the run and 5 here"),
            (["agent.actor_lr=0.1"], "agent.actor_lr"),
            (["env=arm_reach"], r"env is \{"),
            (["total_env_steps=1000"], r"total_env_steps=1000, but the run is at 1200"),
            ([], r"complete \(1200 of 1200 env steps\)")):
        with pytest.raises(ResumeError, match=match):
            Trainer(quick_config(f"resume={run}", *overrides), run, overrides=[f"resume={run}", *overrides])
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # nothing touched
    # fewer env steps than the run's learning_starts: the refusal alone (a warning that the run's policy would stay
    # untrained, which it would not, came first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ResumeError, match=r"total_env_steps=300, but the run is at 1200"):
            Trainer(quick_config(f"resume={run}", "total_env_steps=300"), run,
                    overrides=[f"resume={run}", "total_env_steps=300"])
    # a hand edit of the run's config.yaml was silently ignored (the checkpoint's config trains on), and the edited
    # file stayed as the run's record
    recorded = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(recorded.replace("seed: 0", "seed: 7"))
    with pytest.raises(ResumeError, match=r"config.yaml was edited .*: seed is 7 there, 0 in the checkpoint; a resume "
                                          r"goes on with the checkpoint's config"):
        Trainer(quick_config(f"resume={run}", "total_env_steps=1600"), run,
                overrides=[f"resume={run}", "total_env_steps=1600"])
    (run / "config.yaml").write_text(recorded)
    # the options a resume may change, and an option given again with the run's own value
    trainer = Trainer(quick_config(f"resume={run}", "total_env_steps=1600", "seed=0", "checkpoint.keep=5"), run,
                      overrides=[f"resume={run}", "total_env_steps=1600", "seed=0", "checkpoint.keep=5"])
    assert trainer.cfg.total_env_steps == 1600 and trainer.cfg.checkpoint.keep == 5 and trainer.cfg.seed == 0
    assert trainer.run()["env_steps"] == 1600
    assert load_checkpoint(run)["config"]["total_env_steps"] == 1600


def test_a_run_killed_before_its_first_checkpoint_starts_again_from_its_config(tmp_path):
    run = tmp_path / "run"
    cfg = quick_config("total_env_steps=800", "learning_starts=400", "eval.interval_env_steps=800",
                       "eval.episodes=4", "checkpoint.interval_env_steps=800", "logging.tensorboard=false", "seed=3")
    Trainer(cfg, run)  # what a kill before the first checkpoint leaves: config.yaml, no checkpoint
    recorded = (run / "config.yaml").read_text()
    with pytest.warns(UserWarning, match="no checkpoint yet.*starts again from step 0"):
        trainer = Trainer(quick_config(f"resume={run}"), run, overrides=[f"resume={run}"])
    assert trainer.env_steps == 0 and trainer.cfg.seed == 3 and trainer.cfg.total_env_steps == 800
    assert trainer.run()["env_steps"] == 800
    assert (run / "config.yaml").read_text() == recorded
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="not a training run directory .*holds no config.yaml written by"):
        Trainer(quick_config(f"resume={empty}"), empty)  # nothing to start again from: not a run at all


def test_orphaned_temporary_files_are_the_only_files_removed(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    orphans = [tmp_path / "checkpoints" / ".checkpoint_000000000800.pt.tmp", tmp_path / ".best_policy.pt.tmp",
               tmp_path / ".config.yaml.tmp"]
    kept = [tmp_path / "checkpoints" / "checkpoint_000000000400.pt", tmp_path / "notes.tmp",
            tmp_path / "checkpoints" / ".other.pt.tmp", tmp_path / "config.yaml"]
    for path in orphans + kept:
        path.write_text("x")
    assert sorted(remove_orphans(tmp_path)) == sorted(orphans)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in orphans)


def _digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_commands_given_a_missing_run_create_nothing(tmp_path):
    not_a_run = tmp_path / "documents"
    not_a_run.mkdir()
    (not_a_run / "letter.txt").write_text("mine")
    missing = tmp_path / "missing"
    commands = [("robo_rl.evaluate", f"run={missing}"), ("robo_rl.export", f"run={missing}"),
                ("robo_rl.train", f"resume={missing}"), ("robo_rl.evaluate", f"run={not_a_run}"),
                ("robo_rl.export", f"run={not_a_run}"), ("robo_rl.train", f"resume={not_a_run}")]
    # every command in one process (each as `python -m`): a Python with torch starts in seconds, not once per case
    script = ("import runpy, sys, warnings\nwarnings.simplefilter('ignore', RuntimeWarning)\n"
              f"for module, arg in {commands!r}:\n"
              "    sys.argv = [module, arg]\n"
              "    try:\n        runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
              "    except SystemExit as exit:\n        print('status', exit.code, file=sys.stderr, flush=True)\n")
    before = _digest(tmp_path), sorted(tmp_path.rglob("*"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 * len(commands), result.stderr[-3000:]
    for (module, arg), error, status in zip(commands, lines[::2], lines[1::2]):
        assert error.startswith(f"error: {arg} is not a training run directory"), (module, result.stderr[-3000:])
        assert status == "status 2", (module, status)
    assert (_digest(tmp_path), sorted(tmp_path.rglob("*"))) == before


def test_a_file_that_is_not_a_checkpoint_is_refused_with_a_reason(tmp_path):
    # an empty file (a run's train.log when nothing was logged) gives torch.load an EOFError with no message:
    # the error said "is unreadable: " and stopped
    text = tmp_path / "train.log"
    text.write_text("")
    with pytest.raises(CheckpointError, match=r"is unreadable: it is empty \(0 bytes\)"):
        load_checkpoint(text)
    # a JSON record given for a checkpoint said only "is unreadable: Unsupported operand 123"
    record = tmp_path / "pool.json"
    record.write_text('{"members": []}')
    with pytest.raises(CheckpointError, match=r"pool.json is unreadable: not a file torch.save wrote \(it begins "
                                              r"b'\{\"members\": \[\]\}'\); a checkpoint is a run's best_policy.pt"):
        load_checkpoint(record)
    for zip_archive in (True, False):  # both of torch.save's formats reach the checkpoint's own checks
        torch.save({"format": 0}, tmp_path / "old.pt", _use_new_zipfile_serialization=zip_archive)
        with pytest.raises(CheckpointError) as refused:
            load_checkpoint(tmp_path / "old.pt")
        assert "not a file torch.save wrote" not in str(refused.value)


def test_a_folder_is_a_run_only_with_the_config_train_writes(trained_run, tmp_path):
    # any config.yaml made a folder a "run": evaluate and resume= then wrote their records into it
    from robo_rl.checkpoint import require_run_dir

    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("a: 1\n")
    with pytest.raises(CheckpointError, match="holds no config.yaml written by `python -m robo_rl.train`"):
        require_run_dir(other)
    started = tmp_path / "started"
    started.mkdir()
    shutil.copy(trained_run / "config.yaml", started / "config.yaml")
    assert require_run_dir(started, "resume") == str(started)  # killed before its first checkpoint
    with pytest.raises(CheckpointError, match="holds no best_policy.pt and no checkpoint yet"):
        require_run_dir(started, need_policy=True)
    assert require_run_dir(trained_run, need_policy=True) == str(trained_run)


def test_a_full_disk_while_saving_keeps_the_previous_file_removes_the_partial_one_and_reads_as_one_line(tmp_path):
    """Seen on a full disk: torch.save reported ENOSPC as a RuntimeError about a zip position, which the CLI
    printed as an internal error with a traceback, leaving the half-written temporary file."""
    import errno

    from robo_rl.checkpoint import save_atomically
    from robo_rl.cli import is_user_error, one_line

    final = tmp_path / "best_policy.pt"
    save_atomically(final, {"weights": torch.ones(3)})
    before = final.read_bytes()

    def torch_on_a_full_disk(f):
        f.write(b"partial")
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 14400 vs 14304")

    with pytest.raises(OSError) as raised:
        write_atomically(final, torch_on_a_full_disk)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(final)
    assert is_user_error(raised.value) and "no space left on the device" in one_line(raised.value)
    assert str(final) in one_line(raised.value)
    assert final.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_policy.pt"]  # no .best_policy.pt.tmp left
    with pytest.raises(ValueError, match="not a disk"):  # any other failure passes through unchanged
        write_atomically(final, lambda f: (_ for _ in ()).throw(ValueError("not a disk problem")))
    assert final.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["best_policy.pt"]


def test_a_checkpoint_file_of_another_env_is_refused_not_recorded_as_the_runs(trained_run, tmp_path):
    """evaluate run=<hover run> checkpoint=<an arm run's policy> flew the arm and wrote the result into the hover
    run's evaluations; export wrote an arm bundle that named the hover run."""
    from omegaconf import OmegaConf

    other = tmp_path / "arm"
    other.mkdir()
    config = OmegaConf.load(trained_run / "config.yaml")
    config.env.id = "robo_rl/ArmReach-v0"
    OmegaConf.save(config, other / "config.yaml")
    policy = trained_run / "best_policy.pt"
    expected = f"checkpoint={policy} is a policy of robo_rl/CrazyflieHover-v0, run={other} flies robo_rl/ArmReach-v0"
    with pytest.raises(CheckpointError, match=expected):
        evaluate_run(other, checkpoint=str(policy), episodes=2)
    with pytest.raises(CheckpointError, match=expected):
        export_bundle(other, checkpoint=str(policy), out=tmp_path / "bundle", pairs=8, c="false")
    assert sorted(p.name for p in other.iterdir()) == ["config.yaml"]
    # a file of the run's own env is taken as before (a checkpoint copied out of the run, say)
    assert evaluate_run(trained_run, checkpoint=str(policy), episodes=2)["env_id"] == "robo_rl/CrazyflieHover-v0"
    shutil.copy(policy, tmp_path / "copy.pt")
    assert evaluate_run(trained_run, checkpoint=str(tmp_path / "copy.pt"), episodes=2)["changes"] == {}
    # but another run's policy of the same env id, trained on another env config, flew its own env and was
    # recorded as this run's, with no changes
    state = _unsafe(policy)
    state["config"]["env"]["overrides"] = dict(state["config"]["env"]["overrides"] or {}, floor_height=0.5)
    torch.save(seal(state), tmp_path / "theirs.pt")
    with pytest.raises(CheckpointError, match=f"checkpoint={tmp_path / 'theirs.pt'} is not a file of run={trained_run} "
                                              r"and was trained with env.overrides.floor_height=0.5 where the run has "
                                              "None"):
        evaluate_run(trained_run, checkpoint=str(tmp_path / "theirs.pt"), episodes=2)
    # another simulation backend steps the same dynamics: that is not another env
    state = _unsafe(policy)
    other_backend = {"torch": "mujoco_batch", "mujoco_batch": "torch"}[state["config"]["env"]["backend"]]
    state["config"]["env"].update(backend=other_backend, compile=not state["config"]["env"]["compile"])
    torch.save(seal(state), tmp_path / "backend.pt")
    assert evaluate_run(trained_run, checkpoint=str(tmp_path / "backend.pt"), episodes=2)["changes"] == {}
    with pytest.raises(CheckpointError, match="checkpoint=last: .* keeps no checkpoints, only its best_policy.pt; "
                                              "give checkpoint=best"):
        shutil.copytree(trained_run, tmp_path / "kept", ignore=shutil.ignore_patterns("checkpoints"))
        evaluate_run(tmp_path / "kept", checkpoint="last", episodes=2)


def test_a_policy_flown_at_another_control_rate_is_refused(trained_run):
    """evaluate '+overrides.control_hz=50' flew a 100 Hz policy at 50 Hz and recorded the result as the policy's;
    a checkpoint from before the rate was recorded is checked as before."""
    state = load_checkpoint(trained_run / "best_policy.pt")
    assert state["env_spec"]["control_hz"] == 100.0
    with pytest.raises(CheckpointError, match="control_hz is 100.0 there, 50.0 here"):
        evaluate_run(trained_run, episodes=2, changes={"control_hz": 50.0})
    older = {**state, "env_spec": {k: v for k, v in state["env_spec"].items() if k != "control_hz"}}
    check_compatible(older, {**state["env_spec"], "control_hz": 50.0})


def test_a_checkpoint_that_is_no_file_names_what_is_allowed(trained_run):
    """checkpoint=lsat said "checkpoint lsat does not exist"; checkpoint=<run>/checkpoints looked for
    checkpoints/checkpoints."""
    with pytest.raises(CheckpointError, match=r"checkpoint=lsat is no file \(from .*\); give best, last or a checkpoint "
                                              "file of the run"):
        evaluate_run(trained_run, checkpoint="lsat", episodes=2)
    with pytest.raises(CheckpointError, match=f"checkpoint={trained_run / 'checkpoints'} is a folder; give best"):
        export_bundle(trained_run, checkpoint=str(trained_run / "checkpoints"), out=trained_run.parent / "nowhere")


def test_a_torn_evaluation_record_is_left_out_of_the_table_with_a_warning(tmp_path):
    """A truncated eval_*.json (a kill, a full disk) made every later `evaluate` of the run end in a traceback
    after writing its own result; records are now written atomically and the table skips what it cannot read."""
    import json

    from robo_rl.evaluate import robustness_table

    folder = tmp_path / "evaluations"
    folder.mkdir()
    good = {"changes": {"vehicle": "crazyflie_rltools"}, "episodes": 100, "success_rate": 0.97, "mean_return": 51.2}
    (folder / "eval_1.json").write_text(json.dumps(good))
    (folder / "eval_2.json").write_text(json.dumps(good)[:40])
    (folder / "eval_3.json").write_text("[]")
    (folder / "eval_4.json").write_text('{"run": 1}')
    with pytest.warns(UserWarning) as caught:
        table = robustness_table(tmp_path)
    assert len(table.splitlines()) == 2 and "97.0%" in table
    # the changes whole, the checkpoint named (the changes were cut at 60 characters; best and last looked alike)
    long = {**good, "checkpoint": "/r/checkpoints/ckpt_000400000.pt",
            "changes": {"vehicle_overrides": {"mass": 0.034, "inertia": [1e-5, 1e-5, 2e-5]}, "vehicle": "crazyflie_rltools"}}
    (folder / "eval_5.json").write_text(json.dumps(long))
    with pytest.warns(UserWarning):
        row = robustness_table(tmp_path).splitlines()[-1]
    assert row.startswith("ckpt_000400000.pt") and row.endswith(json.dumps(long["changes"]))
    assert sorted(str(w.message).split(" is not")[0] for w in caught) == [str(folder / f"eval_{i}.json") for i in (2, 3, 4)]
