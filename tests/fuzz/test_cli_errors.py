"""One clear error from every CLI (robo_rl.cli): a user's mistake is one line on stderr, `error: ...`, and
exit status 2, for Hydra's own errors as for the project's; a bug is a traceback and status 1. A few real
subprocesses prove the whole path (Hydra included); the rule itself is tested in-process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from robo_rl.cli import INTERNAL_ERROR_STATUS, USER_ERROR_STATUS, command, is_user_error, one_line
from robo_rl.options import check_options
from sim.errors import ConfigError
from tests.fuzz.harness import ROOT, changed, snapshot

CONFIGS = str(ROOT / "configs")


def run_cli(args: list[str], tmp_path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python <args>` run from tmp_path/work, with its own HOME (caches) at tmp_path/home."""
    (tmp_path / "work").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path / "work", timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1",
                               "PYTHONPATH": str(ROOT), "MINARI_DATASETS_PATH": str(tmp_path / "minari"),
                               # the Makefile's bytecode cache, which spares each command compiling torch again
                               **{key: os.environ[key] for key in ("PYTHONPYCACHEPREFIX",) if key in os.environ}})


@pytest.mark.parametrize("args, message", [
    # the item 13: a NaN in an env config ran with exit 0 and NaN returns
    (["-m", "robo_rl.train", "+env.overrides.randomization.disturbance_force=nan", "hydra.run.dir=run"],
     "error: config.randomization.disturbance_force must be a finite number, got nan"),
    # Hydra's "Could not override 'no_such_option'. To append to your config use +no_such_option=1", and the + then
    # was refused as an unknown option
    (["-m", "robo_rl.train", "no_such_option=1", "hydra.run.dir=run"],
     "error: no_such_option is not an option of train; train has: agent, buffer, checkpoint,"),
    (["-m", "robo_rl.train", "total_env_step=1000", "hydra.run.dir=run"],
     "error: total_env_step is not an option of train; did you mean total_env_steps or env.total_env_steps?"),
    (["-m", "robo_rl.train", "eval.every=1000", "hydra.run.dir=run"],
     "error: eval.every is not an option of train; eval has: episodes, interval_env_steps, seed"),
    (["-m", "robo_rl.train", "env.overrides.vehicle=crazyflie_rltools", "hydra.run.dir=run"],
     "error: env.overrides.vehicle: env.overrides takes keys of its own, added with + "
     "(+env.overrides.vehicle=crazyflie_rltools)"),
    (["-m", "robo_rl.evaluate", "run=r", "latncy_steps=2"],
     "error: latncy_steps is not an option of evaluate; did you mean latency_steps?"),
    # Hydra's parse error alone, with no word of the quotes the item needs
    (["-m", "robo_rl.teacher_pool", "run=r", "overrides=[learning_starts=100]"],
     "error: no viable alternative at input '[learning_starts=': a list item that holds '=' must be quoted, e.g. "
     "'overrides=[\"learning_starts=...\"]'"),
    # it said "out= is a folder that holds no teacher pool"
    (["-m", "robo_rl.teacher_pool", "run=r", "out="], "error: out= is empty; give the pool's folder"),
    # a traceback (int() of nan) in the run's folder, and -5 trained with no takeovers at all
    (["-m", "robo_rl.train", "env=so_arm100_pick_cube", "agent=sac_arm", "intervention=scripted",
      "intervention.duration=nan", "hydra.run.dir=run"], "error: intervention.duration must be an integer, got nan"),
    (["-m", "robo_rl.train", "env=so_arm100_pick_cube", "agent=sac_arm", "intervention=scripted",
      "intervention.until_env_steps=-5", "hydra.run.dir=run"],
     "error: intervention.until_env_steps must lie in [0, 1000000000000], got -5"),
    (["-m", "robo_rl.train", "seed=[1", "hydra.run.dir=run"], "error: no viable alternative at input '[1'"),
    (["-m", "robo_rl.evaluate", "run=no_such_run"], "error: run=no_such_run is not a training run directory"),
    # any string counted as true: privileged_actor=no trained a privileged teacher; an empty actor was a traceback
    (["-m", "robo_rl.train", "env.privileged_actor=no", "hydra.run.dir=run"],
     "error: env.privileged_actor must be true or false, got 'no'"),
    (["-m", "robo_rl.train", "agent.actor_hidden=[]", "hydra.run.dir=run"],
     "error: agent.actor_hidden must list at least one layer width, got []"),
    (["-m", "robo_rl.record", "env=reach", "episodes=0", "hydra.run.dir=rec"], "error: episodes must lie in [1, "),
    # a folder path to write demos to was a Minari traceback after recording every episode
    (["-m", "robo_rl.record", "env=reach", "dataset=./my_demos", "hydra.run.dir=rec"],
     "error: dataset=./my_demos must be a Minari id"),
    # a dataset id without its version was a TypeError traceback out of Minari's parse_dataset_id
    (["-m", "robo_rl.record", "env=reach", "dataset=foo", "hydra.run.dir=rec"],
     "error: dataset=foo must be a Minari id, (namespace/)name-v<version> such as pick_cube/scripted-v0"),
    # of the form asked for, but Minari's namespaces take two characters or more
    (["-m", "robo_rl.record", "env=reach", "dataset=t/a-v0", "hydra.run.dir=rec"],
     "error: dataset=t/a-v0 must be a Minari id, (namespace/)name-v<version> such as pick_cube/scripted-v0 (letters, "
     "digits, - and _; a namespace of at least two)"),
    # a directory as the SpaceMouse: "Is a directory; stopping" at its first read, status 0
    (["-m", "robo_rl.record", "env=reach", "device=spacemouse", "device_path=.", "dataset=reach/mouse-v0",
      "hydra.run.dir=rec"], "error: device_path=. is a directory; a spacemouse's device_path must be its device file"),
    # silently ignored: the scripted expert recorded while the person held the gamepad
    (["-m", "robo_rl.record", "env=reach", "device_path=/dev/input/js0", "dataset=reach/x-v0", "hydra.run.dir=rec"],
     "error: device_path=/dev/input/js0 is for a teleoperation device; device=scripted records the scripted expert"),
    (["-m", "robo_rl.video", "run=no_such_run"], "error: "),
    (["-m", "robo_rl.success_classifier", "dataset=d", "out=c.pt", "device=gpu"],
     "error: device must be auto, cpu, cuda, cuda:<index> or mps, got 'gpu'"),
    (["-m", "robo_rl.success_classifier", "dataset=no_such/data-v0", "out=c.pt"], "error: no Minari dataset at "),
    # it said that demos cannot feed the (default) privileged critic: the user then turned that off for nothing
    (["-m", "robo_rl.train", "demos=/no/such", "hydra.run.dir=run"],
     "error: no Minari dataset at /no/such (from demos=/no/such): record one with `python -m robo_rl.record`"),
    (["-m", "robo_rl.success_classifier", "dataset=no_such/data-v0"], "error: out=<file.pt> is required"),
    # plain key=value CLIs: an argument without '=' was a ValueError traceback out of dict()
    (["-m", "robo_rl.video", "no_such_run"], "error: argument 'no_such_run': expected key=value with key one of run,"),
    (["-m", "robo_rl.export.in_the_loop", "bundle=b", "steps=many"], "error: steps=many: steps must be a whole number"),
    # it named [0, 2147483647], which the plant then refused past 10
    (["-m", "robo_rl.export.in_the_loop", "bundle=b", "latency_steps=-1"],
     "error: latency_steps=-1: latency_steps must lie in [0, 10]"),
    (["-m", "robo_rl.video", "run=r", "episodes=0"], "error: episodes=0: episodes must lie in [1, "),
    # every frame is held until the GIF is written (about 230 MB a hover episode): up to 2**31 episodes were taken
    (["-m", "robo_rl.video", "run=r", "episodes=1000"], "error: episodes=1000: episodes must lie in [1, 20]"),
    (["-m", "robo_rl.video", "run=r", "run=s"], "error: argument 'run=s': run is given twice"),
    # an unset shell variable: in_the_loop flew the current folder's bundle
    (["-m", "robo_rl.export.in_the_loop", "bundle="], "error: bundle= is empty; give a value; usage: "),
    # every mistake was a traceback: the entry point's @command had slid onto the bundle check above main
    (["-m", "robo_rl.export.arm_in_the_loop"], "error: bundle= is required"),
    (["-m", "robo_rl.export.arm_in_the_loop", "bundle=/nope"], "error: "),
    (["-m", "robo_rl.export.arm_in_the_loop", "bundle=/nope", "episodes=abc"], "error: "),
    # Hydra's flags: its argparse usage block of 8-9 lines
    (["-m", "robo_rl.evaluate", "run=r", "episodes=2", "-m", "latency_steps=[0,0],[2,2]"],
     "error: unrecognized arguments: latency_steps=[0,0],[2,2]; Hydra's flags (-m, --cfg, ...) go before the "
     "key=value options"),
    (["-m", "robo_rl.robustness", "run=r", "--bogus"],
     "error: unrecognized arguments: --bogus; this command's options are key=value; --hydra-help lists Hydra's flags"),
    (["-m", "robo_rl.export", "run=r", "--cfg", "bogus"], "error: argument --cfg/-c: invalid choice: 'bogus'"),
])
def test_a_users_mistake_is_one_line_and_status_2(args, message, tmp_path):
    result = run_cli(args, tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    # nothing written where the command was run from, beyond the run folder it was told to use (where Hydra
    # records the composed config before the task starts)
    written = changed({}, snapshot(tmp_path / "work"))
    assert all(name.startswith(("run/", "rec/")) for name in written), written


@pytest.mark.parametrize("args", [
    ["-m", "robo_rl.train", "seed=-1"],
    ["-m", "robo_rl.train", "+total_env_step=1000"],
    ["-m", "robo_rl.record", "env=reach", "episodes=0"],
    # refused in record's task, after Hydra had made the folder: a dataset id without its version was a
    # TypeError traceback (status 1) that left outputs/record/<date>/<time>/ behind
    ["-m", "robo_rl.record", "env=reach", "dataset=pick_cube/scripted"],
    # a directory as the gamepad: a session that stopped at its first read, status 0
    ["-m", "robo_rl.record", "env=reach", "device=gamepad", "device_path=.", "dataset=reach/pad-v0"],
    # an env config field the env refuses (checked when the env was built: after the folder was made)
    ["-m", "robo_rl.train", "+env.overrides.randomization.mass_scale=[2,1]"],
    ["-m", "robo_rl.train", "env=pick_cube", "+env.overrides.control_hz=nan"],
])
def test_a_refused_option_leaves_no_run_folder(args, tmp_path):
    # Hydra creates the run folder and writes its record before the task starts: a refused option left an
    # outputs/<date>/<time>/ with .hydra/ and a log behind, which looks like a run
    result = run_cli(args, tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert changed({}, snapshot(tmp_path / "work")) == [], "a refused command wrote files"


@pytest.mark.parametrize("run_dir, message", [
    ("notes.md", "error: hydra.run.dir=notes.md is a file; give a folder for the command's output"),
    ("notes.md/run", "error: hydra.run.dir=notes.md/run lies under notes.md, a file; give a folder"),
])
def test_a_run_folder_that_is_a_file_is_named_as_one(run_dir, message, tmp_path):
    """It was `error: notes.md: File exists`, Hydra's makedirs, which did not say that a folder was wanted."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.md").write_text("my notes\n")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.train", f"hydra.run.dir={run_dir}"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


def test_a_replay_buffer_larger_than_the_free_memory_is_refused_before_the_run_gets_a_policy(tmp_path):
    """buffer.capacity in its range [1, 1e10] but beyond the machine's memory was torch's allocator traceback at
    the first transition, leaving a run folder with the untrained best_policy.pt (on a GPU: CUDA's memory)."""
    result = run_cli(["-m", "robo_rl.train", "buffer.capacity=10000000000", "num_envs=2", "eval.episodes=2",
                      "torch_threads=1", "logging.progress_bar=false", "hydra.run.dir=run"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"error: buffer.capacity=10000000000 needs [0-9.]+ GB for the replay "
                                            r"buffer, more than the [0-9.]+ GB (this machine has free|free on cuda\S*); "
                                            "lower it", lines[0]), result.stderr
    assert changed({}, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("out, message", [
    # a file that is no rollout video was silently overwritten, exit 0
    ("notes.gif", "error: out=notes.gif already exists and is not this run's video (run/rollout.gif, which is "
                  "rewritten); give a new file, or delete that one first"),
    # after rendering: `ValueError: unknown file extension`, a traceback
    ("afile", "error: out=afile: the video is an animated GIF; give a file name ending .gif"),
    ("run/best_policy.pt", "error: out=run/best_policy.pt: the video is an animated GIF; give a file name ending .gif"),
    # refused only after rendering
    ("missing/x.gif", "error: out=missing/x.gif: there is no folder missing; give a file in an existing folder"),
    ("clips.gif", "error: out=clips.gif is a folder; give a new file ending .gif"),
    ("", "error: out= is empty; give a value, or omit out=; usage: python -m robo_rl.video run=<run dir> "
         "[out=<file.gif>] [episodes=1] [seed=0] [checkpoint=best]"),
])
def test_a_video_written_where_it_cannot_or_must_not_be_is_refused_before_rendering(out, message, tmp_path):
    run = tmp_path / "work" / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("env: {id: robo_rl/CrazyflieHover-v0}\nagent: {}\ntotal_env_steps: 1000\n")
    (run / "best_policy.pt").write_bytes(b"a policy")  # refused before it is read (it would be: no torch.save file)
    (tmp_path / "work" / "notes.gif").write_bytes(b"GIF89a my notes")
    (tmp_path / "work" / "clips.gif").mkdir()
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.video", "run=run", f"out={out}"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    assert result.stderr.strip().splitlines() == [message], result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


def test_the_runs_own_video_is_rewritten_and_a_new_file_written(tmp_path):
    """What the refusals above leave allowed: python -m robo_rl.video run=<run> again (and training's
    logging.video, which calls it) rewrites <run>/rollout.gif."""
    from robo_rl.video import output_path

    run = tmp_path / "run"
    run.mkdir()
    (run / "rollout.gif").write_bytes(b"GIF89a an earlier video")
    assert output_path(run, None) == run / "rollout.gif"
    assert output_path(run, str(run / "rollout.gif")) == run / "rollout.gif"
    assert output_path(run, str(tmp_path / "new.GIF")) == tmp_path / "new.GIF"
    # another run's checkpoint: video run=A checkpoint=<B's policy> wrote B's flight over A's rollout.gif
    theirs = tmp_path / "other" / "best_policy.pt"
    for out in (None, str(run / "rollout.gif")):
        with pytest.raises(ConfigError, match=f"checkpoint={theirs} is not a file of run={run}: its video would "
                                              "replace the run's own"):
            output_path(run, out, theirs)
    assert output_path(run, str(tmp_path / "b.gif"), theirs) == tmp_path / "b.gif"
    assert output_path(run, None, run / "checkpoints" / "checkpoint_000000001600.pt") == run / "rollout.gif"


@pytest.mark.parametrize("args", [
    ["-m", "robo_rl.train", "seed=3"],
    # a student written over its own teacher replaced the teacher's policy, config and Hydra record
    ["-m", "robo_rl.distill", "teacher=run", "checkpoint=best"],
])
def test_a_new_run_into_a_folder_that_holds_a_run_is_refused_and_the_run_left_as_it_was(args, tmp_path):
    run = tmp_path / "work" / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "config.yaml").write_text("env: {}\nagent: {}\ntotal_env_steps: 1000\n")  # what makes it a run's
    (run / "best_policy.pt").write_bytes(b"a policy")
    (run / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    before = snapshot(tmp_path / "work")
    result = run_cli([*args, "hydra.run.dir=run"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: hydra.run.dir=run already holds a run (config.yaml, best_policy.pt, checkpoints); "
        + ("continue it with resume=run, or give" if "robo_rl.train" in args else "give")
        + " a new folder (or delete that one first)"], result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("command, held, refused", [
    # a bundle, a make-train teachers folder, a user's files: the run's files went in among them
    ("distill", ["policy.json", "policy.onnx", "c/"], "c, policy.json, policy.onnx"),
    ("distill", ["family/", "fast_rotors/", "fast_rotors.log", "pool/"], "family, fast_rotors, fast_rotors.log and 1 more"),
    ("train", ["notes.txt"], "notes.txt"),
    ("train", ["teachers/"], "teachers"),  # only a student sits above its teachers
    # what an earlier attempt that stopped before its config.yaml leaves, and make train's student folder
    ("distill", [".hydra/", "distill.log", "teachers/"], None),
    ("train", [".hydra/", "train.log"], None),
])
def test_a_new_run_goes_only_into_a_new_or_empty_folder(command, held, refused, tmp_path):
    from robo_rl.cli import check_new_run_dir

    for name in held:
        (tmp_path / name.rstrip("/")).mkdir() if name.endswith("/") else (tmp_path / name).write_text("x")
    if refused is None:
        check_new_run_dir(str(tmp_path), command)
        return
    with pytest.raises(ConfigError, match=re.escape(f"hydra.run.dir={tmp_path} holds files that are not a {command} "
                                                    f"run's ({refused}); give a new or empty folder")):
        check_new_run_dir(str(tmp_path), command)


def test_a_bench_scripts_refused_argument_is_one_line_and_status_2(tmp_path):
    """It was the message alone, with status 1."""
    run = tmp_path / "work" / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("env: {id: robo_rl/CrazyflieHover-v0}\nagent: {}\ntotal_env_steps: 1000\n")
    (run / "best_policy.pt").write_bytes(b"a policy")
    result = run_cli([str(ROOT / "bench" / "student_gap.py"), "run", "--episodes", "0"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    assert result.stderr.strip().splitlines() == ["error: --episodes must be 1 or more, got 0"], result.stderr


@pytest.mark.parametrize("script, args, message", [
    ("checkpoint_io.py", ["--transitions", "-5"], "--transitions must each be 1 or more, got -5"),
    ("sim_speed.py", ["--repeats", "0"], "--repeats must be 1 or more, got 0"),
    ("sim_speed.py", ["--seconds", "-1"], "--seconds must be a finite number above 0, got -1.0"),
    ("sim_speed.py", ["--seconds", "nan"], "--seconds must be a finite number above 0, got nan"),
    ("mcu.py", ["--vectors", "0"], "--vectors must be 1 or more, got 0"),
    ("image_sac_speed.py", ["--sizes", "0"], "--sizes must each be 31 or more (the encoder's convolutions leave "
                                             "nothing of a smaller image), got 0"),
    ("noise_table.py", ["--envs", "0"], "--envs must each be 1 or more, got 0"),
    ("ray_throughput.py", ["--actors", "0"], "--actors must each be 1 or more, got 0"),
    # seeds: numpy's generators refuse a negative one, a traceback after the setup
    ("train_speed.py", ["--seeds", "0", "-1"], "--seeds must each be a whole number from 0 to 4294967295, got 0 -1"),
    ("mcu.py", ["--seed", "4294967296"], "--seed must be a whole number from 0 to 4294967295, got 4294967296"),
    ("teacher_pool.py", ["--pool-seed", "-3"], "--pool-seed must be a whole number from 0 to 4294967295, got -3"),
])
def test_a_bench_scripts_count_or_seconds_out_of_range_is_refused_before_any_work(script, args, message, tmp_path):
    """They were tracebacks part-way (checkpoint_io, mcu, image_sac_speed, noise_table), the whole benchmark
    (sim_speed --seconds -1: an l2f install first), or a hang (ray_throughput --actors 0)."""
    (tmp_path / "work").mkdir()
    before = snapshot(tmp_path / "work")
    result = run_cli([str(ROOT / "bench" / script), *args], tmp_path, timeout=120)
    assert result.returncode == USER_ERROR_STATUS, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [f"error: {message}"], result.stderr[-2000:]
    assert result.stdout == "" and changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("command, output", [
    ("robo_rl.evaluate", "run"), ("robo_rl.robustness", "run"), ("robo_rl.export", "run"), ("robo_rl.evaluate", "bundle"),
])
def test_an_evaluation_written_into_a_run_or_a_bundle_is_refused_and_leaves_them_as_they_were(command, output,
                                                                                              trained_run, tmp_path):
    """evaluate or robustness with hydra.run.dir=<the run> replaced the run's .hydra/config.yaml, hydra.yaml and
    overrides.yaml (Hydra's record of how it was trained) and left their logs and results among its files; into a
    bundle, a later export refused the folder."""
    import shutil

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run)
    (tmp_path / "work" / "bundle").mkdir()
    (tmp_path / "work" / "bundle" / "policy.json").write_text("{}\n")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", command, "run=run", f"hydra.run.dir={output}"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: hydra.run.dir={output} holds a run or a bundle ("), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("command", ["robo_rl.evaluate", "robo_rl.robustness", "robo_rl.export"])
def test_an_earlier_commands_output_folder_is_not_written_over(command, trained_run, tmp_path):
    """hydra.run.dir=<an earlier suite's folder> replaced its robustness.json, robustness.png and Hydra's record
    with a smaller suite's, without a word."""
    import shutil

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run)
    earlier = tmp_path / "work" / "earlier"
    (earlier / ".hydra").mkdir(parents=True)
    (earlier / ".hydra" / "overrides.yaml").write_text("- episodes=100\n")
    (earlier / "robustness.json").write_text("{}\n")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", command, "run=run", "hydra.run.dir=earlier"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: hydra.run.dir=earlier holds an earlier command's record and results "
                                    "(.hydra)"), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("command, out", [("robo_rl.export", "other/export"), ("robo_rl.video", "other/rollout.gif")])
def test_an_output_in_another_runs_folder_is_refused(command, out, trained_run, tmp_path):
    """export run=a out=b/export replaced run b's own bundle with a's (its policy.json then named run a); video
    run=a out=b/rollout.gif wrote a's video as b's own."""
    import shutil

    for name in ("run", "other"):
        shutil.copytree(trained_run, tmp_path / "work" / name)
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", command, "run=run", f"out={out}"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: out={out} lies in the folder of another run ("), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("args", [
    # one value given twice: the later replaced the other silently, and the evaluation's record kept only it
    ["-m", "robo_rl.evaluate", "+overrides.vehicle=crazyflie_brushless", "vehicle=crazyflie_rltools"],
    ["-m", "robo_rl.evaluate", "+overrides.randomization={mass_scale: [0.5, 0.6]}", "randomization={mass_scale: [1.5, 1.6]}"],
    # latency on an env whose randomization is off: none was applied, and the row recorded it as asked
    ["-m", "robo_rl.evaluate", "randomization={enabled: false}", "latency_steps=[2,2]"],
    ["-m", "robo_rl.evaluate", "latency_steps=[3,1]"],
    ["-m", "robo_rl.robustness", "checkpoint=no_such_file.pt"],
    ["-m", "robo_rl.export", "c_prefix=1bad"],
])
def test_a_command_refused_in_its_task_leaves_nothing_in_the_run(args, trained_run, tmp_path):
    """Refused after Hydra had made its output folder inside the run (evaluations/hydra/<time>, robustness/<time>,
    export_logs/<time>): the folder with Hydra's record and an empty log stayed, like an evaluation's."""
    import shutil

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run)
    before = snapshot(tmp_path / "work")
    result = run_cli([*args, "run=run"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("args, message", [
    (["seed=1"], r"error: resume=\S*run: seed is 0 in the run and 1 here"),
    ([], r"error: resume=\S*run: the run is complete \(1600 of 1600 env steps\)"),
    (["total_env_steps=1000"], r"error: resume=\S*run: total_env_steps=1000, but the run is at 1600 env steps"),
])
def test_a_refused_resume_leaves_nothing_in_the_run(args, message, trained_run, tmp_path):
    """Refused in the task, after Hydra had written its record of the resume into the run: train.log and
    .hydra_resumes/<time>_<pid>/ stayed, the record of a command that never ran."""
    import shutil

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run)
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.train", "resume=run", *args], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert re.match(message, result.stderr), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("kept", ["summary.json", "best_policy.pt"])
def test_a_run_whose_checkpoints_were_deleted_is_not_started_again_over_its_results(kept, trained_run, tmp_path):
    """Checkpoints hold the replay buffer (GB): a user deletes them, then resumes to extend the run. It warned "no
    checkpoint yet", started again from step 0 and replaced the trained best_policy.pt and summary.json."""
    import shutil

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run, ignore=shutil.ignore_patterns("checkpoints", *{"summary.json", "best_policy.pt"}
                                                                     - {kept}))
    if kept == "best_policy.pt":  # evaluated after its first checkpoint (that at 1600 env steps, as its last)
        import torch

        from robo_rl.checkpoint import seal
        state = torch.load(run / "best_policy.pt", weights_only=False)
        state["evaluation"]["env_steps"] = 2400
        torch.save(seal(state), run / "best_policy.pt")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.train", "resume=run", "total_env_steps=3200"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    trained = "to its end (summary.json)" if kept == "summary.json" else "2,400 env steps (best_policy.pt)"
    assert f"error: resume=run: no checkpoint, but the run has trained {trained}: resuming would start it again" \
        in result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


def test_resuming_a_distilled_student_with_train_is_refused_as_such(trained_run, tmp_path):
    # it warned that the run would start again from step 0, then refused "unknown option distill", and left
    # train.log and .hydra_resumes/ in the student's folder
    import shutil

    run = tmp_path / "work" / "student"
    shutil.copytree(trained_run, run, ignore=shutil.ignore_patterns("checkpoints"))  # a student keeps its best only
    with (run / "config.yaml").open("a") as config:
        config.write("distill:\n  teacher: teacher\n")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.train", "resume=student"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and result.stderr.strip().splitlines() == [
        "error: resume=student is a student that python -m robo_rl.distill trained, which train cannot continue; "
        "distill again into a new folder"], result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


@pytest.mark.parametrize("sweep, message", [
    (["episodes=1,abc"], "error: episodes must be an integer, got 'abc'"),
    (["latency_steps=[0,0],[-1,0]"], "error: latency_steps[0] must lie in [0, 50], got -1"),
    (["episodes=1", "seed=0,-1"], "error: seed must lie in [0, 4294967295], got -1"),
])
def test_a_sweep_with_a_bad_value_in_a_later_job_is_refused_before_its_first_job(sweep, message, trained_run, tmp_path):
    # each job's options were checked only when it started: -m seed=1,abc trained all of job 0 before refusing abc
    import shutil

    shutil.copytree(trained_run, tmp_path / "work" / "run")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.evaluate", "-m", "run=run", *sweep], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []  # no evaluation of job 0, no multirun folder


def test_a_sweep_on_a_ray_cluster_where_nothing_answers_is_one_line_before_any_job(tmp_path):
    """Ray retried the address for minutes, printing its warnings, before the sweep failed."""
    before = snapshot(tmp_path / "work")
    result = run_cli(["-m", "robo_rl.train", "-m", "seed=0,1", "hydra/launcher=ray_cluster",
                      "hydra.launcher.ray.init.address=127.0.0.1:1"], tmp_path, timeout=60)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: hydra.launcher.ray.init.address=127.0.0.1:1: nothing answers there")
    assert changed(before, snapshot(tmp_path / "work")) == []


def test_a_bug_is_a_traceback_and_status_1(tmp_path):
    program = ("from robo_rl.cli import command\n"
               "@command\n"
               "def main():\n"
               "    return {}['missing']\n"
               "main()\n")
    result = run_cli(["-c", program], tmp_path)
    assert result.returncode == INTERNAL_ERROR_STATUS
    assert "Traceback" in result.stderr and "KeyError: 'missing'" in result.stderr
    assert "internal error (a bug in robo-rl" in result.stderr


def _raise(error: Exception) -> Exception:
    try:
        raise error
    except Exception as caught:  # noqa: BLE001
        return caught


def test_what_counts_as_a_users_mistake():
    assert is_user_error(_raise(ConfigError("config.x must be a finite number, got nan")))  # the project's type
    assert not is_user_error(_raise(ValueError("raised outside robo-rl's code")))  # tests/ is not the project
    assert is_user_error(_raise(FileNotFoundError(2, "No such file or directory", "x.pt")))
    assert one_line(_raise(FileNotFoundError(2, "No such file or directory", "x.pt"))) == "x.pt: No such file or directory"
    assert not is_user_error(_raise(KeyError("missing")))
    assert not is_user_error(_raise(TypeError("unsupported operand")))
    try:
        [1, 2] + 3  # a TypeError from inside the interpreter, no raise statement
    except TypeError as error:
        assert not is_user_error(error)
    try:
        import numpy as np

        np.zeros(3)[:] = np.zeros(4)  # a ValueError from NumPy's C code: a bug wherever it happens
    except ValueError as error:
        assert not is_user_error(error)


def test_a_missing_optional_dependency_is_one_line_naming_its_extra():
    # make train installs robo-rl without its extras: a command that needs one is a setup to finish, not a bug
    for module, package, extra in (("ray", "ray", "ray"), ("minari.data_collector", "minari", "datasets"),
                                   ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", "ray")):
        error = _raise(ModuleNotFoundError(f"No module named {module!r}", name=module))
        assert is_user_error(error)
        assert one_line(error).startswith(f"{package} is not installed: this needs robo-rl's {extra} extra")
        assert f"'.[{extra}]'" in one_line(error) and "make venv" in one_line(error)
    assert not is_user_error(_raise(ModuleNotFoundError("No module named 'numpy'", name="numpy")))  # a core one
    # raised from a missing extra (Hydra wraps a failed import so): still that extra; a bug raised while one was
    # being handled is a bug
    try:
        try:
            raise ModuleNotFoundError("No module named 'ray'", name="ray")
        except ModuleNotFoundError as missing:
            raise ImportError("Error loading 'ray.util'") from missing
    except ImportError as wrapped:
        assert is_user_error(wrapped) and one_line(wrapped).startswith("ray is not installed")
    try:
        try:
            raise ModuleNotFoundError("No module named 'ray'", name="ray")
        except ModuleNotFoundError:
            {}["missing"]
    except KeyError as bug:
        assert bug.__context__ is not None and not is_user_error(bug)


@pytest.mark.parametrize("blocked, package, extra, command", [
    ("ray", "ray", "ray", ["robo_rl.train", "runner=ray", "total_env_steps=1000", "learning_starts=100"]),
    ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", "ray",
     ["robo_rl.train", "-m", "seed=0,1", "hydra/launcher=ray_cluster"]),
    ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher", "ray", ["robo_rl.train", "-m", "seed=0,1",
                                                                        "hydra/launcher=ray"]),
    ("minari", "minari", "datasets", ["robo_rl.record", "env=so_arm100_pick_cube", "episodes=2"]),
])
def test_a_command_whose_extra_is_not_installed_is_one_line_and_status_2(blocked, package, extra, command, tmp_path):
    # the import fails as it does without the extra: a None in sys.modules stops it
    program = (f"import runpy, sys; sys.modules[{blocked!r}] = None; sys.argv = {command!r}; "
               f"runpy.run_module({command[0]!r}, run_name='__main__', alter_sys=True)")
    before = snapshot(tmp_path / "work")
    result = run_cli(["-c", program], tmp_path, timeout=120)
    assert result.returncode == USER_ERROR_STATUS, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    assert result.stderr.startswith(f"error: {package} is not installed") and f"'.[{extra}]'" in result.stderr
    assert changed(before, snapshot(tmp_path / "work")) == []


def test_ctrl_c_while_a_command_still_imports_is_one_line(tmp_path):
    """Ctrl-C in the first seconds, while torch and Hydra import and before the command's own handler is in place,
    printed a traceback of those imports. The interrupt is raised right after the package loads, as
    `python -m robo_rl.<command>` loads it (argv[0] "-m"); a program that only imports robo_rl keeps Python's own."""
    import signal

    interrupted_import = "import sys; sys.argv[:1] = {argv}; import robo_rl; raise KeyboardInterrupt"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = subprocess.run([sys.executable, "-c", interrupted_import.format(argv=["-m"])], capture_output=True,
                             text=True, timeout=60, env=env)
    assert command.stderr.strip().splitlines() == ["interrupted"], command.stderr
    assert command.returncode in (-signal.SIGINT, 130)
    library = subprocess.run([sys.executable, "-c", interrupted_import.format(argv=["x.py"])], capture_output=True,
                             text=True, timeout=60, env=env)
    assert "Traceback" in library.stderr and "KeyboardInterrupt" in library.stderr


def test_one_line_folds_multiline_messages():
    assert one_line(_raise(ConfigError("a\n  b\n\nc"))) == "a; b; c"


@pytest.mark.parametrize("overrides, message", [
    (["seed=-1"], r"seed must lie in \[0, 4294967295\], got -1"),
    (["num_envs=0"], r"num_envs must lie in \[1, 1048576\], got 0"),
    (["torch_threads=0"], r"torch_threads must lie in \[1, 4096\], got 0"),  # was torch's RuntimeError, a traceback
    (["buffer.offline_ratio=nan"], "buffer.offline_ratio must be a finite number, got nan"),
    (["device=gpu"], "device must be auto, cpu, cuda, cuda:<index> or mps, got 'gpu'"),
    (["privileged_critic=maybe"], "privileged_critic must be true, false or auto"),
    (["agent.actor_hidden=[64,0]"], r"agent.actor_hidden\[1\] must lie in \[1, 65536\], got 0"),
    (["+agent.fancy=1"], "unknown option agent.fancy"),
    (["eval.episodes=1.5"], "eval.episodes must be an integer, got 1.5"),
    # a key added with + that no config file defines: nothing reads it (`+total_env_step=1000` trained 500k steps)
    (["+total_env_step=1000"], r"unknown option total_env_step \(added with \+"),
    (["+env.foo=1"], "unknown option env.foo .*env has: backend, compile, id, overrides, privileged_actor, privileged_observation"),
    (["+eval.epsiodes=3"], "unknown option eval.epsiodes"),
    # removed options and names that do not exist were refused only after the run folder was made
    (["~seed"], r"option seed of train is missing \(removed with ~seed\?\)"),
    (["env.id=robo_rl/Nope-v0"], "env.id must be one of robo_rl/ArmPickCube-v0"),
    (["intervention.kind=bogus"], "intervention.kind must be one of none, scripted, got 'bogus'"),
    (["agent.critic_updates_per_actor_update=1000000000000"], r"critic_updates_per_actor_update must lie in \[1, 1024\]"),
    # an env group's training budget, even where total_env_steps is given and the budget goes unread
    (["env=takeoff_land", "env.total_env_steps=-5", "total_env_steps=100"], r"env.total_env_steps must lie in \[0, "),
    (["env=takeoff_land", "env.total_env_steps=abc"], "env.total_env_steps must be an integer, got 'abc'"),
    # a level past the first went unchecked until the curriculum reached it, hours in, named as the env's difficulty
    (["curriculum.levels=[0.5,2]"], r"curriculum.levels\[1\] must lie in \[0, 1\], got 2"),
    (["curriculum.levels=[-0.5,0.5]"], r"curriculum.levels\[0\] must lie in \[0, 1\], got -0.5"),
    # Ray refused the empty actor name only once the cluster was up: a traceback after 20 s, and a run folder
    (["runner=ray", "runner.inbox="], "runner.inbox='' is not an inbox name: give null"),
    (["runner=ray", "runner.inbox=a b"], "runner.inbox='a b' is not an inbox name"),
    # the arm env refused its own setting, as `unknown option config.privileged; valid options: task, ...`
    (["env=pick_cube", "privileged_critic=true"], "privileged_critic=true: robo_rl/ArmPickCube-v0 provides no "
     "privileged observation for the critic .*; give privileged_critic=false or auto"),
    (["env=pick_cube", "env.privileged_observation=true"], "env.privileged_observation=true with privileged_critic=auto"),
    # an empty value is no null: `resume=` silently started a new 500k-step run, `demos=` trained without demos
    (["resume="], "resume= is empty; give the run folder to continue, or omit resume="),
    (["demos="], "demos= is empty; give a Minari dataset id or folder, or omit demos="),
    # trained on the simulator's reward, as if reward_classifier had not been given
    (["reward_classifier="], "reward_classifier= is empty; give the success classifier's file"),
    # a budget that cannot train: total_env_steps=0 made a run without a policy; a buffer below one minibatch
    (["total_env_steps=0"], r"total_env_steps=0 is less than one step of each of the num_envs=32 envs; give at least 32"),
    (["buffer.capacity=100"], r"buffer.capacity=100 holds less than one minibatch \(agent.batch_size=128\)"),
    # camera images make a Dict observation, which the Ray actors do not take
    (["env=so_arm100_pick_cube", "+env.overrides.cameras.enabled=true", "runner=ray"],
     "env.overrides.cameras.enabled: camera observations are recorded, trained and evaluated by robo_rl.record"),
])
def test_train_options_are_checked_once_composed(overrides, message):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
        with pytest.raises(ConfigError, match=message):
            check_options(cfg, "train")
        check_options(compose(config_name="train"), "train")  # the defaults pass


@pytest.mark.parametrize("command, run_option", [("evaluate", "run"), ("export", "run"), ("robustness", "run"),
                                                 ("distill", "teacher")])
def test_an_empty_checkpoint_is_refused_not_taken_as_the_current_folder(command, run_option):
    """export checkpoint= exported the newest checkpoint of the folder it ran in (not the best policy), or named
    `checkpoints/checkpoints` elsewhere."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name=command, overrides=[f"{run_option}=/nonexistent", "checkpoint="])
        with pytest.raises(ConfigError, match="checkpoint= is empty; give best, last or a checkpoint file of the run"):
            check_options(cfg, command)


def test_a_budget_that_runs_no_update_is_warned_about():
    """learning_starts beyond total_env_steps: the run's policy stays the untrained initial one (a smoke test of the
    run's machinery may want that; a user who lowered total_env_steps learns it before waiting for the run)."""
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        with pytest.warns(UserWarning, match=r"learning_starts=10000 lies beyond the run's last env step \(5024, "
                                             r"total_env_steps=5000 with num_envs=32\): no update"):
            check_options(compose(config_name="train", overrides=["total_env_steps=5000"]), "train")
        with warnings.catch_warnings():  # the run's last step, 10016, reaches learning_starts: it updates
            warnings.simplefilter("error")
            check_options(compose(config_name="train", overrides=["total_env_steps=10000"]), "train")


def test_what_an_inbox_may_be_named():
    from robo_rl.distributed.cluster import check_inbox_name

    for name in (None, "robot", "robot_actor_test", "lab-2.arm"):  # the names the README and tests give
        check_inbox_name(name)
    for name in ("", " ", "robot ", "a/b", "-robot", "x" * 129):
        with pytest.raises(ConfigError, match="is not an inbox name"):
            check_inbox_name(name)


@pytest.mark.parametrize("command, overrides, message", [
    ("evaluate", ["run=r", "episodes=0"], r"episodes must lie in \[1, 1000000\], got 0"),
    ("evaluate", ["run=r", "latency_steps=[1]"], "latency_steps must be a list of 2 integers"),
    ("evaluate", ["run=r", "vehicle="], "vehicle= is not a known vehicle"),  # it evaluated the run's own, "changes: none"
    ("evaluate", ["run=r", "vehicle=crazyflie_rltool"], "vehicle=crazyflie_rltool is not a known vehicle"),
    ("export", ["run=r", "pairs=4"], r"pairs must lie in \[8, 1024\], got 4"),
    # once allowed up to 100000: recording takes 3 pairs^2 env steps, and beyond about 1300 (with the 1001 random
    # vectors) the STM32F405 check's image overflowed its 1 MB flash, a linker error after minutes
    ("export", ["run=r", "pairs=2048"], r"pairs must lie in \[8, 1024\], got 2048"),
    ("export", ["run=r", "safe_action=[nan, 0]"], "safe_action"),
    ("record", ["dataset=d", "expert_noise=-1"], r"expert_noise must lie in \[0, 10\], got -1"),
    # NaN actions at the first key press ended the session and lost its accepted episodes; a dead zone of 1 divides
    # every stick reading by zero
    ("record", ["dataset=d", "teleop.keyboard.speed=nan"], "teleop.keyboard.speed must be a finite number, got nan"),
    ("record", ["dataset=d", "teleop.gamepad.dead_zone=1"], r"teleop.gamepad.dead_zone must lie in \[0, 1\), got 1"),
    ("record", ["dataset=d", "teleop.spacemouse.full_scale=0"], r"teleop.spacemouse.full_scale must lie in \(0, 100000\]"),
    ("record", ["dataset=d", "teleop.keyboard.hold_steps=-1"], r"teleop.keyboard.hold_steps must lie in \[1, 1000\]"),
    # an IndexError or a broadcast error at the first action, inside the session
    ("record", ["dataset=d", "teleop.spacemouse.axes=[5,0,1]"], r"teleop.spacemouse.axes\[0\] must lie in \[0, 2\]"),
    ("record", ["dataset=d", "teleop.spacemouse.axes=[1,0]"], "teleop.spacemouse.axes"),
    ("record", ["dataset=d", "teleop.gamepad.mapping.axes=[1,0]"], "teleop.gamepad.mapping.axes"),
    ("distill", ["teacher=r", "num_envs=0"], r"num_envs must lie in \[1, 1048576\], got 0"),
    ("distill", ["teacher=r", "torch_threads=0"], r"torch_threads must lie in \[1, 4096\], got 0"),
    ("distill", ["teacher=r", "distillation.pre_squash_weight=-1"], r"distillation.pre_squash_weight must lie in \[0, 100\]"),
    ("export", ["run=r", "onnx.opset=7"], r"onnx.opset must lie in \[8, 20\], got 7"),
    ("distill", ["teacher=r", "difficulty=1.5"], r"difficulty must lie in \[0, 1\], got 1.5"),
    ("distill", ["teacher=/nonexistent"], "teacher=/nonexistent is not a training run directory"),
    ("distill", ["teacher=r", "teacher_pool_share=1.5"], r"teacher_pool_share must lie in \[0, 1\], got 1.5"),
    ("distill", ["teacher=r", "teacher_pool_latency_from=0"], r"teacher_pool_latency_from must lie in \[1, 50\], got 0"),
    ("distill", ["teacher=r", "rollout_episode_seconds=0"], r"rollout_episode_seconds must lie in \(0, 3600\], got 0"),
    ("distill", ["teacher=r", "rollout_episode_seconds=nan"], "rollout_episode_seconds must be a finite number, got nan"),
    ("teacher_pool", ["run=r", "out=p", "stop_at_success=1.5"], r"stop_at_success must lie in \(0, 1\], got 1.5"),
    ("teacher_pool", ["run=r", "out=p", "stop_at_success=0"], r"stop_at_success must lie in \(0, 1\], got 0"),
    # an empty value is no null: `out=` exported into <run>/export, `teacher_pool=` distilled without the pool,
    # `device_path=` opened the first gamepad, each without a word
    ("export", ["run=r", "out="], "out= is empty; give the bundle's folder, or omit out="),
    ("distill", ["teacher=r", "teacher_pool="], "teacher_pool= is empty; give the teacher pool's folder"),
    ("distill", ["teacher=r", "fast_rotor_teacher="], "fast_rotor_teacher= is empty; give the fast-rotor teacher's run"),
    ("robustness", ["run=r", "specialists_dir="], "specialists_dir= is empty; give the folder of specialist runs"),
    ("record", ["dataset=d", "device_path="], "device_path= is empty; give the device file"),
    ("teacher_pool", ["run=r", "out=p", "ray_address="], "ray_address= is empty; give the Ray cluster's address"),
])
def test_other_commands_options(command, overrides, message):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name=command, overrides=overrides)
        with pytest.raises(ConfigError, match=message):
            check_options(cfg, command)


@pytest.mark.parametrize("command, option", [("distill", "teacher"), ("teacher_pool", "run")])
def test_an_arm_run_where_a_quadrotor_run_is_needed_is_one_error(command, option, tmp_path):
    """distill teacher=<an arm run> was an AttributeError traceback; the teacher pool's was about latency."""
    arm = tmp_path / "arm"
    arm.mkdir()
    (arm / "config.yaml").write_text("env: {id: robo_rl/ArmReach-v0}\nagent: {}\ntotal_env_steps: 600\n")
    (arm / "best_policy.pt").write_bytes(b"a policy")
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name=command, overrides=[f"{option}={arm}", "checkpoint=best" if command == "distill"
                                                      else f"out={tmp_path / 'pool'}"])
        with pytest.raises(ConfigError, match=f"{option}={arm}: .* flies quadrotors \\(robo_rl/Crazyflie.*\\); this "
                                              "run's env is robo_rl/ArmReach-v0"):
            check_options(cfg, command)
        if command == "teacher_pool":  # a run given as the pool's folder got its pool.json and logs
            quadrotor = tmp_path / "quadrotor"
            quadrotor.mkdir()
            (quadrotor / "config.yaml").write_text("env: {id: robo_rl/CrazyflieHover-v0}\nagent: {}\ntotal_env_steps: 1\n")
            cfg = compose(config_name=command, overrides=[f"run={quadrotor}", f"out={arm}"])
            with pytest.raises(ConfigError, match=f"out={arm} is a folder that holds no teacher pool"):
                check_options(cfg, command)


def test_ctrl_c_that_compiled_code_turns_into_its_own_error_is_an_interrupt(capsys):
    """A Ctrl-C during the arm agent's compiled update reached the command as `RuntimeError:
    aoti_torch_call_dispatcher(...) API call failed`, reported as a bug in robo-rl with status 1."""
    import os
    import signal

    def compiled_operator() -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**6):  # the handler runs between bytecodes
                pass
        except KeyboardInterrupt:
            raise RuntimeError("aoti_torch_call_dispatcher(\"robo_rl::onednn_matmul\", ...) API call failed") from None

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as exited:
            command(compiled_operator)()
        assert exited.value.code == 130 and capsys.readouterr().err.strip() == "interrupted"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
        with pytest.raises(SystemExit) as exited:  # the same error without a Ctrl-C is still a bug
            command(lambda: (_ for _ in ()).throw(RuntimeError("API call failed")))()
        assert exited.value.code == 1
    finally:
        signal.signal(signal.SIGINT, previous)


def test_command_passes_through_success_and_system_exit():
    assert command(lambda: 7)() == 7
    with pytest.raises(SystemExit) as exited:
        command(lambda: sys.exit(3))()
    assert exited.value.code == 3


@pytest.mark.parametrize("command, overrides", [
    ("train", ["+env.overrides.vehicle=crazyflie_rltools"]),  # free-form: checked by the env's config
    ("train", ["+experiment=pick_cube_hil", "demos=null"]),  # a config group, global package (its demos unrecorded)
    ("train", ["env=pick_cube", "agent=sac_arm", "intervention=scripted"]),
    ("evaluate", ["run=r", "+randomization.mass=0.1", "+overrides.vehicle=crazyflie_rltools"]),
    ("record", ["dataset=d", "env=reach", "teleop.keyboard.speed=0.5"]),
])
def test_keys_the_config_files_define_or_leave_free_form_pass(command, overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        check_options(compose(config_name=command, overrides=overrides), command)


@pytest.mark.parametrize("path", ["/tmp/run x,1", "/tmp/it's", "/tmp/[a]=b", "/tmp/back\\slash", "/tmp/end\\",
                                  "/tmp/a\\'b", "/tmp/{x: 1}"])
def test_paths_the_commands_pass_to_hydra_arrive_as_given(path):
    """teacher_pool's members got hydra.run.dir=<path> unquoted: a comma made every
    member fail with Hydra's 'Ambiguous value' in its log."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from robo_rl.teacher_pool import member_command

    command = member_command(Path(path), {"mass": 0.03, "latency_steps": 1}, 1000)
    overrides = OverridesParser.create().parse_overrides(command[3:])
    assert {o.key_or_group: o.value() for o in overrides}["hydra.run.dir"] == path


def test_a_second_training_into_a_folder_in_use_is_refused(tmp_path, trained_run):
    """Two trainings started into one folder both passed the new-folder check and both ended with status 0, every
    file the second's; two resumes of one run wrote the same checkpoints."""
    import shutil
    import time

    (tmp_path / "work").mkdir()
    shutil.copytree(trained_run, tmp_path / "work" / "done")
    args = ["-m", "robo_rl.train", "num_envs=8", "total_env_steps=100000000", "torch_threads=1",
            "logging.progress_bar=false", "hydra.run.dir=run"]
    first = subprocess.Popen([sys.executable, *args], cwd=tmp_path / "work", stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1",
                                  "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "work" / "run" / ".hydra").exists() and time.monotonic() < deadline:
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.2)
        second = run_cli([*args[:-1], "seed=2", "hydra.run.dir=run"], tmp_path)
        assert second.returncode == USER_ERROR_STATUS and len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert "error: hydra.run.dir=" in second.stderr and "/run is in use: another train" in second.stderr
        assert first.poll() is None  # the first goes on
    finally:
        first.kill()
        first.wait()
    # a finished run is not locked: the lock ends with its process
    resumed = run_cli(["-m", "robo_rl.train", "resume=done", "total_env_steps=1600"], tmp_path)
    assert "is in use" not in resumed.stderr


def test_a_file_as_the_teacher_pools_folder_is_named_as_out(tmp_path):
    """It was named hydra.run.dir=afile, an option the user had not given."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "afile").write_text("mine")
    result = run_cli(["-m", "robo_rl.teacher_pool", "run=r", "out=afile"], tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: out=afile is a file; give a folder for the command's output (a new one is made)"), result.stderr
    assert (tmp_path / "work" / "afile").read_text() == "mine"


@pytest.mark.parametrize("damage", ["truncated", "another policy"])
def test_in_the_loop_names_a_policy_onnx_that_onnx_runtime_cannot_run(damage, exported_bundle, tmp_path):
    """A truncated policy.onnx, or another policy's model copied into the bundle: a 29-line traceback that called
    itself a bug in robo-rl."""
    import shutil

    import numpy as np
    import onnx

    bundle = tmp_path / "work" / "bundle"
    shutil.copytree(exported_bundle, bundle)
    model = bundle / "policy.onnx"
    if damage == "truncated":
        model.write_bytes(model.read_bytes()[:100])
    else:  # a policy of 7 observations (as the arm bundle's of 16 was)
        from onnx import TensorProto, helper, numpy_helper

        weights = numpy_helper.from_array(np.zeros((7, 4), np.float32), "weights")
        graph = helper.make_graph([helper.make_node("MatMul", ["observation", "weights"], ["action"])], "other",
                                  [helper.make_tensor_value_info("observation", TensorProto.FLOAT, ["batch", 7])],
                                  [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", 4])], [weights])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), model)
    result = run_cli(["-m", "robo_rl.export.in_the_loop", "bundle=bundle", "steps=5", "cortex_m4=false"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    expected = "is not an ONNX model that ONNX Runtime can load" if damage == "truncated" else \
        "does not take this bundle's observations"
    assert result.stderr.startswith(f"error: bundle/policy.onnx {expected} ("), result.stderr


def test_in_the_loop_names_a_bundles_training_checkpoint_that_is_gone(trained_run, tmp_path):
    """A bundle whose run was moved: 'checkpoint .../best_policy.pt does not exist', and no way to say where it is."""
    import shutil

    from robo_rl.export.bundle import export_bundle

    run = tmp_path / "work" / "run"
    shutil.copytree(trained_run, run)
    export_bundle(run, out=tmp_path / "work" / "bundle", pairs=8)
    shutil.rmtree(run)
    result = run_cli(["-m", "robo_rl.export.in_the_loop", "bundle=bundle", "steps=5", "cortex_m4=false"], tmp_path)
    assert result.returncode == USER_ERROR_STATUS and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: the bundle's training checkpoint {run / 'best_policy.pt'} is gone"), \
        result.stderr
    assert "give checkpoint=<that file where it is now>" in result.stderr
