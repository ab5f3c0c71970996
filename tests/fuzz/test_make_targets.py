"""The Makefile's own variables (SEED, RUN, TEACHER, TEACHERS, TASK, SPECIALIST_LATENCIES): a mistake is refused in one
line before anything is trained or written. The Python commands are replaced by a recorder, so nothing trains."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`make <args>` in the repository with PY a recorder of the commands it would run (`-c` checks run for real)."""
    calls = tmp_path / "calls"
    recorder = tmp_path / "py"
    recorder.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\necho "$@" >> {calls}\n')
    recorder.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args, f"PY={recorder}", "STAMP=",
                             "CORE_STAMP="], capture_output=True, text=True, env=env, timeout=120)
    return result, calls.read_text().splitlines() if calls.exists() else []


def _digest(folder: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else b"") for p in folder.rglob("*"))


@pytest.mark.parametrize("seed", ["abc", "-1", "1.5", "4294967296", "123456789012"])
def test_a_seed_that_is_not_a_whole_number_is_refused_before_a_teacher_starts(tmp_path, seed):
    # SEED=abc once left <run>/teachers/fast_rotors.log behind, the fast-rotor teacher refused inside it
    result, calls = _make(tmp_path, "train", f"SEED={seed}", f"RUN={tmp_path / 'run'}")
    assert result.returncode != 0 and calls == []
    assert f"SEED={seed} must be a whole number from 0 to 4294967295" in result.stderr
    assert not (tmp_path / "run").exists()


def test_run_that_holds_an_earlier_run_is_refused_without_teachers_and_nothing_in_it_changes(tmp_path):
    # once its fast_rotors.log was overwritten, or new teachers trained into a student's folder for 15 minutes
    run = tmp_path / "run"
    (run / "teachers" / "family").mkdir(parents=True)
    (run / "teachers" / "fast_rotors.log").write_text("an earlier teacher's result")
    (run / "best_policy.pt").write_bytes(b"a policy")
    before = _digest(run)
    result, calls = _make(tmp_path, "train", f"RUN={run}")
    assert result.returncode != 0 and calls == []
    assert f"RUN={run} already exists; give a new folder (TEACHERS={run}/teachers reuses its teachers)" in result.stderr
    assert _digest(run) == before
    (tmp_path / "empty").mkdir()  # an empty folder is a new one
    result, calls = _make(tmp_path, "train", f"RUN={tmp_path / 'empty'}")
    assert result.returncode == 0, result.stderr
    assert [call.split()[:3] for call in calls] == [["-m", "robo_rl.distill", "teacher=expert"],
                                                    ["-m", "robo_rl.export", f"run={tmp_path / 'empty'}"]]
    (tmp_path / "calls").unlink()
    result, calls = _make(tmp_path, "train", f"RUN={tmp_path / 'empty'}", "DISTILL_ARGS=checkpoint_every_evaluation=true")
    assert result.returncode == 0 and calls[0].split()[-1] == "checkpoint_every_evaluation=true", calls
    (tmp_path / "calls").unlink()
    (tmp_path / "teachers").mkdir()  # the trained-teacher recipe: two teachers, then their student
    result, calls = _make(tmp_path, "train", f"RUN={tmp_path / 'teachers'}", "TEACHER=rl")
    assert result.returncode == 0, result.stderr
    assert [call.split()[:2] for call in calls] == [["-m", "robo_rl.train"]] * 2 + [["-m", "robo_rl.distill"],
                                                                                  ["-m", "robo_rl.export"]]
    assert calls[2].split()[2] == f"teacher={tmp_path / 'teachers'}/teachers/family"


@pytest.mark.parametrize("variable, message", [
    # RUN= trained the teachers into /teachers, at the root of the disk
    ("RUN=", "RUN= is empty; give the run's folder or leave RUN out"),
    ("TEACHERS={nothing}", "TEACHERS={nothing} holds no family teacher run ({nothing}/family/config.yaml)"),
    ("TASK=hovr", "TASK=hovr is not a quadrotor task; known: hover, reach, figure_eight"),
    # `mkdir -p $(RUN)/teachers` made {nothing}/my and ./run/teachers, and the family teacher started
    ("RUN={nothing}/my run", "RUN={nothing}/my run holds a space, which make splits into several paths"),
    # a folder named yes in the repository got the 2 h pool
    ("POOL=yes", "POOL=yes: give POOL=1 (the pool in <teachers>/pool), POOL=0 or nothing (none), or POOL=<folder>"),
    ("TEACHER=ppo", "TEACHER=ppo: give TEACHER=expert (the model-based expert, the default) or TEACHER=rl"),
    # the student's options after the recipe's: a hydra.run.dir there wrote the student past RUN's checks
    ("DISTILL_ARGS=iterations=2 hydra.run.dir={nothing}",
     "DISTILL_ARGS=iterations=2 hydra.run.dir={nothing}: give the run's folder as RUN=<folder>, not as a hydra. option"),
    ("DISTILL_ARGS='hydra.run.dir={nothing}'",
     "DISTILL_ARGS='hydra.run.dir={nothing}': give the run's folder as RUN=<folder>, not as a hydra. option"),
    # pasted into the recipe's lines, a lone quote stopped make with the shell's "Unterminated quoted string"
    ("DISTILL_ARGS=eval.episodes=20 it's",
     "DISTILL_ARGS=eval.episodes=20 it's: the shell cannot read it (a quote not closed?); quote each option whole"),
    ('DISTILL_ARGS=x="a b',
     'DISTILL_ARGS=x="a b: the shell cannot read it (a quote not closed?); quote each option whole'),
])
def test_teachers_or_task_that_do_not_exist_are_refused_before_anything_runs(tmp_path, variable, message):
    nothing = tmp_path / "nothing"
    result, calls = _make(tmp_path, "train", f"RUN={tmp_path / 'run'}", variable.format(nothing=nothing))
    assert result.returncode != 0 and calls == [] and not (tmp_path / "run").exists() and not nothing.exists()
    assert message.format(nothing=nothing) in result.stderr


def test_specialist_latencies_outside_the_suite_are_refused_before_the_first_specialist(tmp_path):
    # SPECIALIST_LATENCIES=abc once trained the first specialist (2-4 min) before reaching the bad value
    result, calls = _make(tmp_path, "specialists", "SPECIALIST_LATENCIES=0 abc")
    assert result.returncode != 0 and calls == []
    assert "SPECIALIST_LATENCIES=0 abc: each must be one of the suite's latencies 0 1 2 3, got abc" in result.stderr


@pytest.mark.parametrize("folder, message", [
    # SPECIALISTS= trained a 500k-step specialist into /crazyflie_rltools, at the root of the disk
    ("", "SPECIALISTS= is empty; give the folder to train the specialists into or leave SPECIALISTS out"),
    # '/tmp/x y' ran `p/crazyflie_rltools` as a command, then a training with hydra.run.dir= empty
    ("{tmp}/x y", "SPECIALISTS={tmp}/x y holds a space, which make splits into several paths"),
])
def test_an_empty_or_spaced_specialists_folder_is_refused_before_the_first_specialist(tmp_path, folder, message):
    result, calls = _make(tmp_path, "specialists", f"SPECIALISTS={folder.format(tmp=tmp_path)}")
    assert result.returncode == 2 and calls == []
    assert result.stderr.strip().splitlines()[0] == (message.format(tmp=tmp_path) + "; give a path without spaces"
                                                     if "space" in message else message + " for outputs/specialists")


def test_make_clean_removes_only_the_checkouts_own_environments(tmp_path):
    """`make clean VENV=..` (or a VENV the shell's environment held) removed that folder, whatever it was. Run on a
    copy of the Makefile in a scratch checkout: on a Makefile with the fault, what it removes is the test's own."""
    import shutil

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(ROOT / "Makefile", checkout / "Makefile")
    outside = tmp_path / "venv"
    (outside / "bin").mkdir(parents=True)
    (outside / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (checkout / "user_data").mkdir()
    (checkout / "user_data" / "notes.txt").write_text("mine")
    own = checkout / ".venv"
    (own / "bin").mkdir(parents=True)
    (own / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}

    def clean(*variables: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-C", str(checkout), "clean", *variables],
                              capture_output=True, text=True, env=env, timeout=60)

    for venv, message in [(outside, f"{outside} lies outside this checkout"), ("..", ".. lies outside this checkout"),
                          (".", ". lies outside this checkout"),
                          ("user_data", "user_data is no virtual environment (no pyvenv.cfg)")]:
        result = clean(f"VENV={venv}")
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert (outside / "pyvenv.cfg").exists() and (checkout / "user_data" / "notes.txt").read_text() == "mine"
    assert clean().returncode == 0 and not own.exists() and (checkout / "Makefile").exists()  # its own .venv goes


def test_a_kept_or_resumed_specialist_must_have_been_trained_with_the_args_given_now(tmp_path):
    """make specialists kept every specialist it found finished (and resumed every one with checkpoints) whatever ARGS
    now asked for, so that the suite printed ceilings of other training than the one asked for."""
    from sim.quadrotor.model import VEHICLES

    first = next(iter(VEHICLES))
    kept = tmp_path / "specialists" / first
    (kept / ".hydra").mkdir(parents=True)
    (kept / ".hydra" / "overrides.yaml").write_text(f"- +experiment=specialist\n- +env.overrides.vehicle={first}\n")
    (kept / "summary.json").write_text("{}")
    before = _digest(kept)
    result, calls = _make(tmp_path, "specialists", f"SPECIALISTS={tmp_path / 'specialists'}", "SPECIALIST_LATENCIES=",
                          "ARGS=seed=1 total_env_steps=1000")
    assert result.returncode == 2 and calls == [], result.stderr
    assert result.stderr.strip().splitlines()[0] == (  # then make's own line
        f"error: {kept} was trained with nothing where ARGS now gives ['seed=1', 'total_env_steps=1000']; delete it "
        "to train it again, or give the ARGS it was trained with")
    assert _digest(kept) == before
    (kept / "checkpoints").mkdir()  # an unfinished one is resumed only under the same condition
    (kept / "summary.json").unlink()
    result, calls = _make(tmp_path, "specialists", f"SPECIALISTS={tmp_path / 'specialists'}", "SPECIALIST_LATENCIES=",
                          "ARGS=seed=1")
    assert result.returncode == 2 and calls == [] and "delete it to train it again" in result.stderr
    # an option that changes how it is shown or run, not what it learns, is no other training (it was refused)
    (kept / ".hydra" / "overrides.yaml").write_text(f"- +experiment=specialist\n- +env.overrides.vehicle={first}\n"
                                                    "- logging.progress_bar=false\n- seed=1\n")
    result, calls = _make(tmp_path, "specialists", f"SPECIALISTS={tmp_path / 'specialists'}", "SPECIALIST_LATENCIES=",
                          "ARGS=seed=1 torch_threads=1")
    assert "delete it to train it again" not in result.stderr, result.stderr
    (kept / ".hydra" / "overrides.yaml").write_text(f"- +experiment=specialist\n- +env.overrides.vehicle={first}\n")
    # with the ARGS it was trained with (none), it is resumed and the next vehicle trained
    result, calls = _make(tmp_path, "specialists", f"SPECIALISTS={tmp_path / 'specialists'}", "SPECIALIST_LATENCIES=")
    assert result.returncode == 0, result.stderr
    assert calls[0] == f"-m robo_rl.train resume={kept}"
    assert calls[1].startswith("-m robo_rl.train +experiment=specialist +env.overrides.vehicle=")


@pytest.mark.parametrize("python", ["pythn3", "/bin/true", "ls"])
def test_a_python_that_is_no_python_3_is_refused_without_apt_get(tmp_path, python):
    """A typo in PYTHON= made `python3 -m venv` fail, which the recipe took for Debian's missing python3-venv: it ran
    apt-get update and install as root. apt-get is a recorder here, so the old Makefile installs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt_calls"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    (bin_dir / "apt-get").chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "venv", f"PYTHON={python}",
                             f"VENV={venv}"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"PYTHON={python} is not a Python 3.10 or newer on PATH; give one, e.g. PYTHON=python3" in result.stderr
    assert not calls.exists() and not venv.exists()


@pytest.mark.parametrize("uv_works", [True, False])
def test_the_core_install_takes_uv_and_falls_back_to_pip_where_uv_fails(tmp_path, uv_works):
    # uv cannot read pip's configuration (a proxy's certificate, a local index): pip must then install robo-rl
    calls, venv = tmp_path / "calls", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\necho "python $@" >> {calls}\n')
    uv = venv / "bin" / "uv"
    uv.write_text(f'#!/bin/sh\necho "uv $@" >> {calls}\nexit {0 if uv_works else 1}\n')
    for script in (python, uv):
        script.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), f"{venv}/.robo-rl-core-installed",
                             f"VENV={venv}", f"PYTHON={python}", f"PY={python}"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in calls.read_text().splitlines()]
    assert lines[0][:3] == ["python", "-m", "venv"]
    assert lines[1][:4] == ["python", "-m", "pip", "install"] and {"torch==2.13.0", "uv==0.13.9"} <= set(lines[1])
    assert lines[2][:3] == ["uv", "pip", "install"] and lines[2][-2:] == ["-e", "."]
    if uv_works:
        assert len(lines) == 3
    else:
        assert lines[3][:4] == ["python", "-m", "pip", "install"] and lines[3][-2:] == ["-e", "."]
        assert "uv could not install them: pip does" in result.stdout
    assert (venv / ".robo-rl-core-installed").exists()
