"""Teacher-student distillation: the student imitates a privileged teacher from its own observations and is a
run that evaluation and export take like any other; a fast-rotor teacher labels exactly the vehicles whose rotors
respond fast, a latency teacher the late ones; a privileged teacher is never exported."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from robo_rl.agents.distillation import AggregatedDataset, DistillationConfig
from robo_rl.checkpoint import CheckpointError, load_checkpoint, policy_file
from robo_rl.distill import check_teacher

PYTHON = sys.executable
REPO = Path(__file__).resolve().parents[2]
ROOT = Path(__file__).resolve().parents[2]
# one pytest-xdist worker runs this module (make test: --dist loadgroup): the teacher is trained once, not per worker
pytestmark = pytest.mark.xdist_group("distill_teacher")


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    """A briefly trained hover teacher (quick settings) whose actor reads the privileged observation."""
    from robo_rl.train import Trainer
    from tests.robo_rl.quick import quick_config

    run = tmp_path_factory.mktemp("teacher")
    # seed 1: a teacher that flies after 24k env steps (return ~60 against ~-10 untrained); seed 0's barely
    # flies (~14), too little to measure what a student takes from it
    cfg = quick_config("env.privileged_actor=true", "+env.overrides.state_history=2", "total_env_steps=24000",
                       "eval.interval_env_steps=24000", "checkpoint.interval_env_steps=24000", "seed=1",
                       "agent.actor_average_rate=0.0", "logging.tensorboard=false")  # as test_short_run_learns...
    Trainer(cfg, run).run()
    return run


def _distill(teacher, out, *extra):
    return subprocess.run([PYTHON, "-m", "robo_rl.distill", f"teacher={teacher}", f"hydra.run.dir={out}",
                           "num_envs=64", "rollout_steps=50", "iterations=8", "eval.interval_iterations=4",
                           "eval.episodes=20", "torch_threads=1",
                           "distillation.compile=false", "logging.progress_bar=false",
                           "distillation.batch_size=512", "distillation.updates_per_iteration=100",
                           "distillation.teacher_iterations=2", *extra],
                          capture_output=True, text=True, timeout=600)


def test_the_teacher_share_falls_from_one_to_zero_and_the_dataset_keeps_the_newest_rows():
    config = DistillationConfig(teacher_iterations=4)
    assert [config.teacher_share(i) for i in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    data = AggregatedDataset(5, 2, 1, torch.device("cpu"))
    for start in (0, 3):
        data.add(torch.arange(start, start + 3.0)[:, None].repeat(1, 2), torch.zeros(3, 1))
    assert data.size == 5
    assert sorted(data.obs[:, 0].tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0]  # row 0 overwritten by row 5
    with pytest.raises(ValueError, match="distillation.batch_size must be at least 1"):
        DistillationConfig(batch_size=0).validate()


def test_the_students_learning_rate_falls_along_a_half_cosine_to_its_final_fraction():
    from robo_rl.agents.distillation import StudentRegression
    from robo_rl.agents.networks import TanhGaussianActor

    actor = TanhGaussianActor(3, 4, [8], "relu", -torch.ones(4), torch.ones(4))
    regression = StudentRegression(actor, lr=1e-3, total_updates=10, final_lr_fraction=0.1)
    rates = [regression.optimizer.param_groups[0]["lr"]]
    for _ in range(10):
        regression.update(torch.randn(16, 3), torch.zeros(16, 4))
        rates.append(regression.optimizer.param_groups[0]["lr"])
    assert rates[0] == pytest.approx(1e-3) and rates[5] == pytest.approx(0.55e-3) and rates[10] == pytest.approx(1e-4)
    assert all(a > b for a, b in zip(rates, rates[1:]))
    for wrong in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="distillation.final_lr_fraction must be in"):
            DistillationConfig(final_lr_fraction=wrong).validate()


def test_the_compiled_regression_step_fits_as_the_eager_one_does():
    """distillation.compile=true (make train's): forward, backward and Adam in one graph give the eager step's
    losses, parameters, learning rates and optimizer state up to float rounding, pre-squash term included; the
    log_std head, which the student's action never reads, is left as it was by both."""
    import copy

    from robo_rl.agents.distillation import StudentRegression
    from robo_rl.agents.networks import TanhGaussianActor

    torch.manual_seed(0)
    eager_actor = TanhGaussianActor(20, 4, [16, 16], "relu", -torch.ones(4), torch.ones(4))
    compiled_actor, log_std = copy.deepcopy(eager_actor), copy.deepcopy(eager_actor.log_std.state_dict())
    eager = StudentRegression(eager_actor, 1e-2, 40, 0.1, pre_squash_weight=0.2)
    compiled = StudentRegression(compiled_actor, 1e-2, 40, 0.1, pre_squash_weight=0.2, compile=True)
    data = torch.Generator().manual_seed(1)
    for _ in range(40):
        obs, target = torch.randn(64, 20, generator=data), torch.rand(64, 4, generator=data) * 2 - 1
        assert compiled.update(obs, target) == pytest.approx(eager.update(obs, target), rel=1e-4)
    assert compiled.compiled and not eager.compiled  # compiled, not fallen back to eager
    for (name, a), b in zip(eager_actor.named_parameters(), compiled_actor.parameters()):
        assert torch.allclose(a, b, atol=2e-4), name  # measured: 3e-5 after 40 steps at this rate
    assert all(torch.equal(value, getattr(compiled_actor.log_std, key)) for key, value in log_std.items())
    assert compiled.optimizer.param_groups[0]["lr"] == eager.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    assert [float(s["step"]) for s in compiled.optimizer.state.values()] == [40.0] * len(compiled.fitted)
    assert eager.optimizer.state_dict()["state"].keys() == compiled.optimizer.state_dict()["state"].keys()
    # a restored optimizer state is the one the compiled step goes on from, not the tensors it replaced
    compiled_actor.load_state_dict(eager_actor.state_dict())
    compiled.optimizer.load_state_dict(copy.deepcopy(eager.optimizer.state_dict()))  # as from a checkpoint
    obs, target = torch.randn(64, 20, generator=data), torch.rand(64, 4, generator=data) * 2 - 1
    assert compiled.update(obs, target) == pytest.approx(eager.update(obs, target), rel=1e-5)
    for (name, a), b in zip(eager_actor.named_parameters(), compiled_actor.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name
    assert [float(s["step"]) for s in compiled.optimizer.state.values()] == [41.0] * len(compiled.fitted)


def test_the_pre_squash_term_fits_saturated_commands_that_the_squashed_error_leaves_short():
    """A teacher's full-thrust command (0.999 of the half range): the squashed error alone stalls where tanh
    flattens; with the pre-squash term the student's command comes closer to it."""
    from robo_rl.agents.distillation import StudentRegression
    from robo_rl.agents.networks import TanhGaussianActor

    obs, target = torch.randn(64, 3, generator=torch.Generator().manual_seed(0)), torch.full((64, 1), 0.999)
    shortfall = {}
    for weight in (0.0, 0.2):
        torch.manual_seed(0)
        actor = TanhGaussianActor(3, 1, [16], "relu", -torch.ones(1), torch.ones(1))
        regression = StudentRegression(actor, lr=1e-2, total_updates=100, final_lr_fraction=1.0,
                                       pre_squash_weight=weight)
        for _ in range(100):
            regression.update(obs, target)
        with torch.no_grad():
            shortfall[weight] = float((target - actor.deterministic(obs)).abs().max())
    # over seeds 0-5 here: 0.059-0.105 without the term, 0.007-0.016 with it
    assert shortfall[0.2] < 0.3 * shortfall[0.0] and shortfall[0.2] < 0.03, shortfall
    with torch.no_grad():  # a student that flies the target exactly has nothing left to fit
        assert float(StudentRegression(actor, 1e-3, 1, 1.0).loss(obs, actor.deterministic(obs))) == 0.0
    for wrong in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="distillation.pre_squash_weight must be 0 or a positive number"):
            DistillationConfig(pre_squash_weight=wrong).validate()


@pytest.fixture(scope="module")
def student_run(teacher_run, tmp_path_factory):
    """The teacher's distilled student (a run that reads the student's observation)."""
    out = tmp_path_factory.mktemp("distilled") / "student"
    done = _distill(teacher_run, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_a_student_learns_the_teachers_flying_from_its_own_observations_and_evaluates_like_any_run(teacher_run, student_run):
    out = student_run
    summary = json.loads((out / "summary.json").read_text())
    first, last = summary["history"][0], summary["history"][-1]
    teacher_return = last["teacher_mean_return"]
    # the untrained student falls sooner than the teacher; the distilled one closes most of the gap
    assert teacher_return > first["mean_return"] + 40 and last["teacher_mean_length"] > first["mean_length"] + 15
    assert last["mean_return"] - first["mean_return"] >= 0.75 * (teacher_return - first["mean_return"]), summary["history"]
    assert last["mean_length"] >= 0.9 * last["teacher_mean_length"], summary["history"]
    state = load_checkpoint(policy_file(out, "last"))
    teacher_state = load_checkpoint(policy_file(teacher_run, "last"))
    assert state["env_spec"]["observation_size"] < teacher_state["env_spec"]["observation_size"]
    assert OmegaConf.create(state["config"]).env.privileged_actor is False
    evaluated = subprocess.run([PYTHON, "-m", "robo_rl.evaluate", f"run={out}", "episodes=20"],
                               capture_output=True, text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]


MODERATE_STARTS = ("'env_overrides={initial_state: {position_range: 0.2, max_tilt_deg: 30.0, velocity_range: 0.5, "
                   "angular_velocity_range: 0.5, hover_fraction: 0.0}}'")


def test_a_student_of_the_model_based_expert_needs_no_teacher_run_learns_to_fly_and_evaluates_like_any_run(tmp_path):
    out = tmp_path / "student"
    done = _distill("expert", out, "difficulty=0.2", MODERATE_STARTS.strip("'"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the model-based expert 100% on the same episodes" in done.stdout, done.stdout
    summary = json.loads((out / "summary.json").read_text())
    rates = [entry["success_rate"] for entry in summary["history"]]
    assert summary["teacher"] == "expert" and rates[0] <= 0.1 and rates[-1] >= 0.3, rates
    state = load_checkpoint(policy_file(out, "last"))
    recorded = OmegaConf.create(state["config"])
    # hover_family's vehicles, observation and student network, at the difficulty asked for
    assert recorded.env.overrides.state_history == 8 and recorded.env.overrides.randomization.difficulty == 0.2
    assert recorded.distill.teacher == "expert" and recorded.distill.teacher_checkpoint is None
    assert state["agent_config"]["actor_hidden"] == [64, 64]
    evaluated = subprocess.run([PYTHON, "-m", "robo_rl.evaluate", f"run={out}", "episodes=10"],
                               capture_output=True, text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]


@pytest.mark.parametrize("option, message", [
    ("fast_rotor_teacher=runs/fast", "fast_rotor_teacher=runs/fast: teacher=expert labels every vehicle itself; omit "
                                     "fast_rotor_teacher="),
    ("expert_experiment=pick_cube_hil", "expert_experiment=pick_cube_hil: teacher=expert flies quadrotors"),
    ("expert_experiment=hover", "expert_experiment=hover: with teacher=expert, one of hover_family, "),
    # its collective thrust stays near the weight: it flew 0% of take-off-and-landing episodes
    ("task=takeoff_land", "task=takeoff_land: teacher=expert does not land"),
])
def test_what_the_model_based_expert_cannot_label_is_one_line_before_any_folder(option, message, tmp_path):
    done = _distill("expert", tmp_path / "student", option)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {message}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()


def test_a_run_folder_named_expert_is_not_silently_taken_for_the_model_based_expert(tmp_path):
    (tmp_path / "expert").mkdir()
    (tmp_path / "expert" / "config.yaml").write_text("env: {}\n")
    done = subprocess.run([PYTHON, "-m", "robo_rl.distill", "teacher=expert", f"hydra.run.dir={tmp_path / 'student'}"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and done.stderr.startswith(
        "error: teacher=expert names the model-based expert, and ./expert is also a run here"), done.stderr
    assert not (tmp_path / "student").exists()


def test_a_teacher_is_refused_by_export_and_a_folder_without_a_run_by_distill_with_one_line(teacher_run, tmp_path):
    exported = subprocess.run([PYTHON, "-m", "robo_rl.export", f"run={teacher_run}", f"out={tmp_path / 'bundle'}"],
                              capture_output=True, text=True, timeout=600)
    assert exported.returncode == 2
    assert exported.stderr.strip().splitlines() == [exported.stderr.strip()]
    assert "is a teacher (env.privileged_actor=true)" in exported.stderr
    assert not (tmp_path / "bundle").exists()
    (tmp_path / "empty").mkdir()
    refused = _distill(tmp_path / "empty", tmp_path / "student")
    assert refused.returncode == 2
    assert "is not a training run directory" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "student").exists()
    missing = _distill(teacher_run, tmp_path / "student", f"checkpoint={tmp_path / 'nope.pt'}")
    assert missing.returncode == 2 and f"checkpoint={tmp_path / 'nope.pt'} is no file" in missing.stderr
    assert not (tmp_path / "student").exists()
    # another run's policy, or a copy, was distilled while teacher='s config described the student's teacher
    shutil.copy(teacher_run / "best_policy.pt", tmp_path / "copy.pt")
    with pytest.raises(CheckpointError, match=f"checkpoint={tmp_path / 'copy.pt'} is not a file of teacher={teacher_run}; "
                                              "give best, last or one of its checkpoints"):
        check_teacher(teacher_run, str(tmp_path / "copy.pt"))
    assert check_teacher(teacher_run, str(teacher_run / "best_policy.pt")) == str(teacher_run)


def test_an_interrupted_distillation_is_started_again_by_the_same_command(teacher_run, tmp_path):
    """Ctrl-C left config.yaml and TensorBoard events: the same command was then refused ("already holds a run"),
    though no student was kept; now it starts again with fresh events. A kept student is still refused."""
    import signal
    import time

    out = tmp_path / "student"
    args = [PYTHON, "-m", "robo_rl.distill", f"teacher={teacher_run}", f"hydra.run.dir={out}", "num_envs=64",
            "rollout_steps=50", "iterations=200", "torch_threads=1",
            "distillation.compile=false", "logging.progress_bar=false"]
    # CI's workers run with SIGINT ignored, which a child inherits and Python then keeps (the Ctrl-C did nothing); a
    # handler in place here is reset to the default in the child, as in a terminal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 300
    while not (out / "config.yaml").exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=120)
    assert (out / "config.yaml").exists() and not (out / "summary.json").exists()
    old_events = sorted((out / "tensorboard").iterdir())
    assert old_events
    again = _distill(teacher_run, out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "holds an interrupted distillation (config.yaml, no checkpoint): it starts again" in again.stderr
    assert not set(old_events) & set((out / "tensorboard").iterdir())  # one attempt's events, not two mixed
    assert (out / "summary.json").exists() and (out / "best_policy.pt").exists()
    kept = _distill(teacher_run, out)  # a finished student is not started again over
    assert kept.returncode == 2 and "already holds a run" in kept.stderr


def test_the_fast_rotor_teacher_labels_exactly_the_fast_rotor_vehicles_that_env_overrides_add(
        teacher_run, student_run, tmp_path):
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller, fast_rotors
    from tests.robo_rl.quick import CONFIGS

    params = {"motor_tau_rise": [0.01, 0.01, 0.05, 0.0], "motor_tau_fall": [0.01, 0.05, 0.01, 0.0]}
    assert fast_rotors(params, 0.02).tolist() == [True, False, False, True]

    def distiller(*extra):
        with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
            cfg = compose(config_name="distill", overrides=[
                f"teacher={teacher_run}", f"fast_rotor_teacher={student_run}", "fast_rotor_checkpoint=last",
                "num_envs=64", "rollout_steps=1", "eval.episodes=4", "torch_threads=1",
                "logging.tensorboard=false", *extra])
        made = Distiller(cfg, tmp_path / "routed")
        obs, info = made.env.reset(seed=3)
        made._observe(made.rollouts[0], obs, info)
        return made, obs, info

    # the teacher's vehicles (rotor constants 0.8-1.25x 55 / 249 ms) are all slow at fast_rotor_tau=0.02
    plain, _, info = distiller()
    assert not plain.rollouts[0].fast_rows.any()
    assert plain.regression.compiled  # distillation.compile's default, make train's (compiled at the first step)
    # env_overrides widen the student's vehicles to rotor constants scaled from 0: some go to each teacher
    distiller, obs, info = distiller("env_overrides={randomization: {motor_tau_scale: [0.0, 1.0]}}")
    assert list(distiller.student_env_cfg.overrides.randomization.motor_tau_scale) == [0.0, 1.0]
    fast = distiller.rollouts[0].fast_rows[:, 0]
    assert 0 < int(fast.sum()) < 64
    obs_t, privileged = torch.as_tensor(obs), torch.as_tensor(info["privileged_obs"])
    distiller._rollout(distiller.rollouts[0], teacher_share=1.0)
    labels = distiller.dataset.action[:64]
    assert torch.allclose(labels[fast], distiller.fast_teacher.act(obs_t, deterministic=True)[fast])
    assert torch.allclose(labels[~fast], distiller.teacher.act(privileged, deterministic=True)[~fast])
    assert not torch.allclose(distiller.fast_teacher.act(obs_t, deterministic=True)[fast],
                              distiller.teacher.act(privileged, deterministic=True)[fast])


def test_a_student_with_more_past_states_than_its_teachers_is_labelled_from_their_own_newest_past_states(
        teacher_run, student_run, tmp_path):
    """env_overrides={state_history: 4} on teachers trained with 2: the privileged teacher reads exactly the
    privileged observation its own 2-state env gives, and the fast-rotor teacher the student's newest 2 states."""
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller
    from robo_rl.envs import make_vector_env
    from tests.robo_rl.quick import CONFIGS

    overrides = "env_overrides={state_history: 4, randomization: {motor_tau_scale: [0.0, 1.0]}}"
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", f"fast_rotor_teacher={student_run}", "fast_rotor_checkpoint=last", overrides,
            "num_envs=32", "rollout_steps=1", "eval.episodes=4", "torch_threads=1",
            "distillation.compile=false", "logging.tensorboard=false"])
    distiller = Distiller(cfg, tmp_path / "longer")
    assert distiller.student_env.state_history == 4 and distiller.teacher.obs_dim < distiller.env.privileged_size
    own_cfg = distiller.student_env_cfg.copy()
    own_cfg.overrides.state_history = 2
    own = make_vector_env(own_cfg, 32, distiller.device, privileged=True)
    rollout = distiller.rollouts[0]
    obs, info = rollout.env.reset(seed=5)
    own_obs, own_info = own.reset(seed=5)
    distiller._observe(rollout, obs, info)
    for _ in range(3):  # the same actions in both: their histories fill with the same past states
        action = torch.rand(32, 4) * 2 - 1
        obs, _, _, _, info = rollout.env.step(action if rollout.env.backend == "torch" else action.numpy())
        own_obs, _, _, _, own_info = own.step(action if own.backend == "torch" else action.numpy())
    distiller._observe(rollout, obs, info)
    privileged, own_privileged = torch.as_tensor(info["privileged_obs"]), torch.as_tensor(own_info["privileged_obs"])
    assert privileged.shape[1] == own_privileged.shape[1] + 12
    assert torch.allclose(distiller.views["teacher"](privileged), own_privileged)
    assert torch.allclose(distiller.views["fast_rotor_teacher"](torch.as_tensor(obs)), torch.as_tensor(own_obs))
    fast = rollout.fast_rows[:, 0]
    assert 0 < int(fast.sum()) < 32
    distiller._rollout(rollout, teacher_share=1.0)
    labels = distiller.dataset.action[:32]
    assert torch.allclose(labels[fast], distiller.fast_teacher.act(torch.as_tensor(own_obs), deterministic=True)[fast])
    assert torch.allclose(labels[~fast], distiller.teacher.act(own_privileged, deterministic=True)[~fast])
    # fewer past states than a teacher reads are refused in one line
    fewer = _distill(teacher_run, tmp_path / "fewer", "env_overrides={state_history: 1}")
    assert fewer.returncode == 2 and f"teacher={teacher_run} reads 8 past actions and 2 past states, the student 8 and 1" in fewer.stderr
    assert len(fewer.stderr.strip().splitlines()) == 1 and not (tmp_path / "fewer").exists()


class _Constant:
    """A stand-in labelling teacher whose every action is `value`: which teacher labelled a row is then plain."""

    def __init__(self, value: float):
        self.value = value

    def act(self, obs, deterministic=True):
        return torch.full((len(obs), 4), self.value)


def test_the_latency_teacher_labels_the_late_vehicles_and_the_fast_rotor_teacher_keeps_its_own_at_any_latency(
        teacher_run, student_run, tmp_path):
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller, long_latency
    from tests.robo_rl.quick import CONFIGS

    assert long_latency({"latency_steps": [0, 2, 3, 5]}, 3).tolist() == [False, False, True, True]
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", f"fast_rotor_teacher={student_run}", "fast_rotor_checkpoint=last",
            f"latency_teacher={student_run}", "latency_checkpoint=last", "latency_from=2",
            "env_overrides={randomization: {motor_tau_scale: [0.0, 1.0], latency_steps: [0, 3]}}",
            "num_envs=64", "rollout_steps=1", "eval.episodes=4", "torch_threads=1",
            "distillation.compile=false", "logging.tensorboard=false"])
    distiller = Distiller(cfg, tmp_path / "routed")
    rollout = distiller.rollouts[0]
    obs, info = rollout.env.reset(seed=3)
    distiller._observe(rollout, obs, info)
    fast, late = rollout.fast_rows[:, 0], rollout.late_rows[:, 0]
    latency = torch.as_tensor(info["params"]["latency_steps"]).reshape(-1)
    assert torch.equal(late, latency >= 2)
    assert (late & ~fast).any() and (~late & ~fast).any() and fast.any()
    distiller.fast_teacher, distiller.latency_teacher = _Constant(0.75), _Constant(0.25)
    distiller._rollout(rollout, teacher_share=1.0)
    labels = distiller.dataset.action[:64]
    assert torch.all(labels[fast] == 0.75)
    assert torch.all(labels[late & ~fast] == 0.25)
    family = distiller.teacher.act(torch.as_tensor(info["privileged_obs"]), deterministic=True)
    assert torch.allclose(labels[~late & ~fast], family[~late & ~fast])


def test_a_privileged_fast_rotor_teacher_and_invalid_env_overrides_are_refused_with_one_line_before_any_folder(
        teacher_run, student_run, tmp_path):
    for option in ("fast_rotor_teacher", "latency_teacher"):
        refused = _distill(teacher_run, tmp_path / "student", f"{option}={teacher_run}")
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert f"{option}={teacher_run} was trained with env.privileged_actor=true" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "student").exists()
    # a latency teacher for vehicles the student never flies (the quick teacher's act at most 1 step late) teaches nothing
    idle = _distill(teacher_run, tmp_path / "student", f"latency_teacher={student_run}", "latency_checkpoint=last")
    assert idle.returncode == 2, idle.stderr[-2000:]
    assert "the student's vehicles act at most 1 late" in idle.stderr and len(idle.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "student").exists()
    # a labelling teacher that observes other histories than the student's (a run trained with another state history)
    other = tmp_path / "other_histories"
    shutil.copytree(student_run, other, ignore=shutil.ignore_patterns("tensorboard", "checkpoints"))
    config = OmegaConf.load(other / "config.yaml")
    config.env.overrides.state_history = 4
    OmegaConf.save(config, other / "config.yaml")
    wide = _distill(teacher_run, tmp_path / "student", f"fast_rotor_teacher={other}")
    assert wide.returncode == 2, wide.stderr[-2000:]
    assert f"fast_rotor_teacher={other} reads 8 past actions and 4 past states, the student 8 and 2" in wide.stderr
    assert len(wide.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()
    late = _distill(teacher_run, tmp_path / "student", "latency_from=0")
    assert late.returncode == 2 and "latency_from must be a whole number of control steps >= 1" in late.stderr
    assert len(late.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()
    wrong = _distill(teacher_run, tmp_path / "student", "env_overrides={randomization: {motor_tau_scale: [1.0, 0.5]}}")
    assert wrong.returncode == 2 and "motor_tau_scale must be a [low, high] range" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()


def test_a_student_of_another_task_flies_it_on_the_teachers_vehicles(teacher_run, tmp_path):
    """task=reach: the student (and the teacher's labels) fly reach's targets and success criterion, with the
    teacher's nominal vehicle (each task's defaults name their own) and histories; an unknown task is one line."""
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller
    from robo_rl.envs import task_env
    from tests.robo_rl.quick import CONFIGS

    hover = OmegaConf.create({"id": "robo_rl/CrazyflieHover-v0", "backend": "torch", "overrides": {"state_history": 8}})
    reach = task_env(hover, "reach")
    assert reach.id == "robo_rl/CrazyflieReach-v0" and reach.overrides.vehicle == "crazyflie_l2f_paper"
    assert reach.overrides.state_history == 8 and task_env(hover, None) is hover
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", "task=reach", "num_envs=64", "rollout_steps=1", "eval.episodes=4",
            "torch_threads=1", "distillation.compile=false", "logging.tensorboard=false"])
    distiller = Distiller(cfg, tmp_path / "reach")
    assert distiller.spec["id"] == "robo_rl/CrazyflieReach-v0"
    assert distiller.student_env_cfg.overrides.vehicle == "crazyflie_rltools"  # the quick teacher's own
    assert distiller.run_cfg.env.id == "robo_rl/CrazyflieReach-v0"
    _, info = distiller.env.reset(seed=1)
    targets = info["params"]["target"]
    assert abs(targets[:, 0]).max() > 0.2 and targets.std(0).min() > 0.05  # reach's targets, not the centre

    refused = _distill(teacher_run, tmp_path / "student", "task=backflip")
    assert refused.returncode == 2 and "unknown quadrotor task 'backflip'" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()


def test_the_kept_student_is_the_final_annealed_one_even_when_an_earlier_evaluation_scored_higher(
        teacher_run, tmp_path, monkeypatch):
    """An evaluation of 100 episodes moves by several points between students that fly different vehicles: a
    student kept for its best score was once a 6th-iteration one that flew crazyflie_pybullet_drones from 38% of
    moderate starts (the final one: 99%). Here every evaluation scores lower than the one before it."""
    from hydra import compose, initialize_config_dir

    import robo_rl.distill as distill
    from tests.robo_rl.quick import CONFIGS

    scores = iter([0.5, 0.9, 0.8, 0.7, 0.6, 0.5])  # the teacher's, then the untrained student's and each iteration's
    evaluate = distill.evaluate_policy

    def falling(*args, **kwargs):
        return {**evaluate(*args, **kwargs), "success_rate": next(scores)}

    monkeypatch.setattr(distill, "evaluate_policy", falling)
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", "num_envs=16", "rollout_steps=5", "iterations=4", "eval.interval_iterations=1",
            "eval.episodes=4", "torch_threads=1", "distillation.compile=false", "logging.tensorboard=false",
            "logging.progress_bar=false", "distillation.batch_size=64", "distillation.updates_per_iteration=10", "distillation.final_lr_fraction=0.1"])
    run = tmp_path / "student"
    distiller = distill.Distiller(cfg, run)
    summary = distiller.run()
    assert [entry["success_rate"] for entry in summary["history"]] == [0.9, 0.8, 0.7, 0.6, 0.5]
    kept, final = load_checkpoint(policy_file(run, "best")), load_checkpoint(policy_file(run, "last"))
    assert kept["evaluation"]["success_rate"] == 0.5 and kept["evaluation"]["env_steps"] == summary["env_steps"]
    actor = [name for name in final["agent"]["model"] if name.startswith("actor.")]
    assert actor and all(torch.equal(kept["agent"]["model"][name], final["agent"]["model"][name]) for name in actor)
    assert distiller.regression.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * cfg.distillation.lr)


def test_also_tasks_share_the_rollouts_and_the_student_stays_a_student_of_its_own_task(teacher_run, tmp_path):
    """also_tasks=[figure_eight]: half the rollout vehicles fly the figure-eight, each labelled by the teacher
    from that env's own observation; the student is evaluated and recorded on hover alone. Bad lists are one
    line before any folder."""
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller
    from tests.robo_rl.quick import CONFIGS

    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", "also_tasks=[figure_eight]", "num_envs=64", "rollout_steps=3", "iterations=1",
            "eval.episodes=4", "distillation.batch_size=64", "distillation.updates_per_iteration=2",
            "torch_threads=1", "distillation.compile=false", "logging.tensorboard=false", "logging.progress_bar=false"])
    distiller = Distiller(cfg, tmp_path / "mixed")
    hover, eight = distiller.rollouts
    assert hover.env is distiller.env and (hover.env.num_envs, eight.env.num_envs) == (32, 32)
    assert (hover.env.config.task, eight.env.config.task) == ("hover", "figure_eight")
    assert distiller.spec["id"] == distiller.run_cfg.env.id == "robo_rl/CrazyflieHover-v0"
    summary = distiller.run()
    assert summary["env_steps"] == 64 * 3 and distiller.dataset.size == 64 * 3
    # each env's rows hold its own observations, labelled by the teacher from its privileged observation
    obs, info = eight.env.reset(seed=5)
    expected = distiller.teacher.act(torch.as_tensor(info["privileged_obs"]), deterministic=True)
    distiller._observe(eight, obs, info)
    distiller._rollout(eight, teacher_share=1.0)
    rows = slice(64 * 3, 64 * 3 + 32)
    assert torch.equal(distiller.dataset.obs[rows], torch.as_tensor(obs))
    assert torch.allclose(distiller.dataset.action[rows], expected)

    for extra, message in ((["also_tasks=[backflip]"], "unknown quadrotor task 'backflip'"),
                           (["also_tasks=[figure_eight,reach]", "num_envs=2"],
                            "num_envs=2 cannot share its vehicles among 3 tasks")):
        refused = _distill(teacher_run, tmp_path / "student", *extra)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr[-2000:]
        assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "student").exists()


def _pool_member(source, folder, best_success, **overrides):
    """A pool run: `source`'s policy, its config's env overrides changed by `overrides`, and a training summary
    whose best evaluation is `best_success`."""
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("tensorboard", "checkpoints"))
    config = OmegaConf.load(folder / "config.yaml")
    config.env.overrides = OmegaConf.merge(config.env.overrides, overrides)
    OmegaConf.save(config, folder / "config.yaml")
    (folder / "summary.json").write_text(json.dumps({"history": [{"success_rate": 0.0}, {"success_rate": best_success}]}))
    return folder


def test_a_teacher_pool_flies_its_own_vehicles_labelled_by_their_runs_and_the_family_below_its_latency(
        teacher_run, student_run, tmp_path):
    """teacher_pool: each kept run flies its own vehicle at its latency in its share of the rollouts, labelled by
    its own policy; the family's rollouts fly the latencies below teacher_pool_latency_from while the student's
    recorded distribution keeps them all and family_starts only the family's starts; a run below
    teacher_pool_min_success is left out. Pools that cannot teach the student are refused with one line before
    any folder."""
    from hydra import compose, initialize_config_dir

    from robo_rl.distill import Distiller
    from robo_rl.evaluate import load_policy
    from robo_rl.options import check_options
    from tests.robo_rl.quick import CONFIGS

    pool = tmp_path / "pool"
    pool.mkdir()
    _pool_member(student_run, pool / "v0", 0.9, vehicle_overrides={"mass": 0.033}, randomization={"latency_steps": [2, 2]})
    _pool_member(student_run, pool / "v10", 0.2, vehicle_overrides={"mass": 0.030}, randomization={"latency_steps": [2, 2]})
    _pool_member(student_run, pool / "v2", 0.6, vehicle_overrides={"mass": 0.026}, randomization={"latency_steps": [3, 3]})
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="distill", overrides=[
            f"teacher={teacher_run}", f"teacher_pool={pool}", "teacher_pool_latency_from=2",
            "env_overrides={randomization: {latency_steps: [0, 3]}}", "num_envs=64", "rollout_steps=2",
            "family_starts={max_tilt_deg: 2.0, hover_fraction: 0.0}",
            "iterations=1", "eval.episodes=4", "distillation.batch_size=64", "distillation.updates_per_iteration=2",
            "torch_threads=1", "distillation.compile=false", "logging.tensorboard=false", "logging.progress_bar=false"])
    distiller = Distiller(cfg, tmp_path / "student")
    family, heavy, light = distiller.rollouts
    assert distiller.pool_runs == [str(pool / "v0"), str(pool / "v2")]  # v10 is below teacher_pool_min_success
    assert (family.env.num_envs, heavy.env.num_envs, light.env.num_envs) == (32, 16, 16)
    assert list(family.env.config.randomization.latency_steps) == [0, 1]
    assert list(distiller.run_cfg.env.overrides.randomization.latency_steps) == [0, 3]
    for rollout, mass, latency in ((heavy, 0.033, 2), (light, 0.026, 3)):
        obs, info = rollout.env.reset(seed=7)
        params = info["params"]
        assert torch.all(torch.as_tensor(params["latency_steps"]).reshape(-1) == latency)
        drawn = torch.as_tensor(params["mass"]).reshape(-1)
        assert torch.all((drawn > 0.9 * mass) & (drawn < 1.1 * mass)), drawn
        distiller._observe(rollout, obs, info)
    obs, info = family.env.reset(seed=7)
    assert int(torch.as_tensor(info["params"]["latency_steps"]).max()) <= 1
    # the family's rollouts start within 2 degrees of level (body z's world z: the rotation matrix's last entry,
    # as the privileged observation holds it without noise), the pool's from the student's own starts
    # (quick_config's: up to 10 degrees); the student's env keeps its own
    tilt_cosine = distiller.env.layout.slices()["rotation_matrix"].stop - 1
    assert torch.all(torch.as_tensor(info["privileged_obs"])[:, tilt_cosine] > 0.9993)
    pool_obs = torch.cat([torch.as_tensor(r.env.reset(seed=7)[1]["privileged_obs"]) for r in (heavy, light)])
    assert pool_obs[:, tilt_cosine].min() < 0.995
    assert distiller.run_cfg.env.overrides.initial_state.max_tilt_deg == 10.0
    member = load_policy(pool / "v2", "best", torch.device("cpu"))[2]
    start = distiller.dataset.size
    distiller._rollout(light, teacher_share=1.0)
    rows = slice(start, start + 16)
    assert torch.allclose(distiller.dataset.action[rows], member.act(distiller.dataset.obs[rows], deterministic=True))
    summary = Distiller(cfg, tmp_path / "student").run()
    assert summary["teacher_pool_runs"] == 2
    recorded = OmegaConf.load(tmp_path / "student" / "config.yaml").distill
    assert list(recorded.teacher_pool_runs) == [str(pool / "v0"), str(pool / "v2")]

    # rollout_episode_seconds: every labelled rollout, the family's and the pool's, restarts after that long and
    # the evaluation keeps the task's episodes
    short_cfg = OmegaConf.merge(cfg, {"rollout_episode_seconds": 1.0})
    check_options(short_cfg, "distill")  # beside env_overrides
    short = Distiller(short_cfg, tmp_path / "short_student")
    assert [rollout.env.config.episode_steps for rollout in short.rollouts] == [100, 100, 100]
    assert short.eval_env.config.episode_steps == 500

    # a member trained below teacher_pool_latency_from flies its own vehicle at its own latency beside the family's
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "v0").symlink_to(pool / "v0")
    _pool_member(student_run, mixed / "v1", 0.9, vehicle_overrides={"mass": 0.026}, randomization={"latency_steps": [0, 0]})
    beside = Distiller(OmegaConf.merge(cfg, {"teacher_pool": str(mixed)}), tmp_path / "mixed_student")
    assert beside.pool_runs == [str(mixed / "v0"), str(mixed / "v1")]
    params = beside.rollouts[2].env.reset(seed=7)[1]["params"]
    assert torch.all(torch.as_tensor(params["latency_steps"]).reshape(-1) == 0)

    wider = _pool_member(student_run, tmp_path / "wider" / "v0", 0.9, state_history=4)
    early = _pool_member(student_run, tmp_path / "early" / "v0", 0.9, randomization={"latency_steps": [1, 1]})
    (tmp_path / "empty").mkdir()
    for extra, message in (
            ([f"teacher_pool={tmp_path / 'empty'}"], "holds no training run"),
            # a run given for the pool: its .hydra folder was read as a member that had not finished training
            ([f"teacher_pool={pool / 'v0'}"], "is a training run, not a pool; give the folder that holds the pool's runs"),
            ([f"teacher_pool={pool}", "teacher_pool_share=1.0"], "teacher_pool_share must be in (0, 1)"),
            ([f"teacher_pool={pool}", "teacher_pool_min_success=0.95"], "none of the 3 runs of teacher_pool="),
            ([f"teacher_pool={wider.parent}"], "a teacher needs the same past actions and no more past states than the student"),
            ([f"teacher_pool={early.parent}", "teacher_pool_latency_from=2",
              "env_overrides={randomization: {latency_steps: [0, 3]}}"], "flies its vehicle at that many control steps or more"),
            ([f"teacher_pool={pool}", "teacher_pool_latency_from=1", "env_overrides={randomization: {latency_steps: [1, 3]}}"],
             "the student's vehicles act at least 1 control steps late"),
            ([f"teacher_pool={pool}", "family_starts={max_tilt: 30.0}"],
             "family_starts={'max_tilt': 30.0}: unknown option config.initial_state.max_tilt"),
            (["rollout_episode_seconds=0.5"],
             "rollout_episode_seconds=0.5: config.success_window_seconds must lie in [0, episode_seconds=0.5]")):
        refused = _distill(teacher_run, tmp_path / "refused", *extra)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr[-2000:]
        assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "refused").exists()

    # a member whose config leaves its past actions at the env's default (8) reads 8, whatever the student's:
    # with a teacher (and so a student) of 4 it is refused before any folder, not when its policy is first fed
    four = _pool_member(teacher_run, tmp_path / "four", 0.9, action_history=4)
    refused = _distill(four, tmp_path / "refused", "checkpoint=best", f"teacher_pool={pool}")
    assert refused.returncode == 2 and "reads 8 past actions and 2 past states, the student 4" in refused.stderr, \
        refused.stderr[-2000:]
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "refused").exists()


def test_a_teacher_reads_the_students_observation_cut_to_its_own_past_states_with_its_own_error_limit():
    from robo_rl.teacher_pool import teacher_input

    obs = torch.tensor([[0.3, 0.0, 0.4, *range(10)], [0.03, 0.0, 0.04, *range(10)]], dtype=torch.float32)
    # a teacher with fewer past states reads the leading entries; one trained with a 0.1 m limit sees a 0.5 m
    # error of an unlimited student as 0.1 m in its direction, and a 0.05 m one as it is
    seen = teacher_input(8, 0.1)(obs)
    assert seen.shape == (2, 8) and torch.equal(seen[:, 3:], obs[:, 3:8])
    assert torch.allclose(seen[0, :3], torch.tensor([0.06, 0.0, 0.08])) and torch.equal(seen[1, :3], obs[1, :3])
    # a student limited alike (or a teacher without a limit) is read as it is, bit for bit
    assert torch.equal(teacher_input(13, 0.1, student_limit=0.1)(obs), obs)
    assert torch.equal(teacher_input(13, 0.0)(obs), obs)


def test_teacher_pool_trains_a_specialist_per_vehicle_drawn_from_a_runs_distribution_and_distill_takes_the_pool(
        teacher_run, student_run, tmp_path):
    """python -m robo_rl.teacher_pool: the vehicles of pool.json are the run's own draw at min_latency or more, each
    member a robo_rl.train run on its vehicle at its latency observing the position error limited as the draw's
    distribution does (no replay-buffer checkpoints kept); a rerun trains nothing again, a folder of another draw
    or another limit is refused in one line, and robo_rl.distill takes the pool."""
    from omegaconf import OmegaConf as Conf

    from robo_rl.distill import env_at
    from robo_rl.teacher_pool import draw_pool

    out = tmp_path / "pool"
    command = [PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}", f"out={out}", "size=2", "min_latency=1",
               "steps=2000", "jobs=2", "stop_at_success=0.98"]
    limited = "env_overrides={position_error_limit: 0.12}"
    made = subprocess.run([*command, limited], capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr[-3000:]
    assert json.loads((out / "pool.json").read_text())["position_error_limit"] == 0.12
    vehicles = json.loads((out / "pool.json").read_text())["vehicles"]
    assert vehicles == draw_pool(env_at(Conf.load(student_run / "config.yaml").env, 1.0, False), 2, 4242, 1)
    assert [v["latency_steps"] for v in vehicles] == [1, 1] and vehicles[0]["mass"] != vehicles[1]["mass"]
    for i, vehicle in enumerate(vehicles):
        env = Conf.load(out / f"v{i}" / "config.yaml").env.overrides
        assert Conf.to_container(env.vehicle_overrides) == {k: v for k, v in vehicle.items() if k != "latency_steps"}
        assert list(env.randomization.latency_steps) == [1, 1] and env.position_error_limit == 0.12
        assert (out / f"v{i}" / "best_policy.pt").is_file() and not (out / f"v{i}" / "checkpoints").exists()
        assert Conf.load(out / f"v{i}" / "config.yaml").stop_at_success == 0.98
    assert json.loads((out / "pool.json").read_text())["stop_at_success"] == 0.98
    stamps = [(out / f"v{i}" / "best_policy.pt").stat().st_mtime_ns for i in range(2)]
    again = subprocess.run([*command, limited], capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and stamps == [(out / f"v{i}" / "best_policy.pt").stat().st_mtime_ns for i in range(2)]
    # a focus region grows the pool: its member is trained after the others, which are kept as they are
    grown = subprocess.run([*command, limited, "focus=[{size: 1, where: {latency_steps: [1, 3]}}]"],
                           capture_output=True, text=True, timeout=900)
    assert grown.returncode == 0, grown.stderr[-3000:]
    assert stamps == [(out / f"v{i}" / "best_policy.pt").stat().st_mtime_ns for i in range(2)]
    record = json.loads((out / "pool.json").read_text())
    assert record["vehicles"][:2] == vehicles and len(record["vehicles"]) == 3 and (out / "v2" / "best_policy.pt").is_file()
    assert record["focus"] == [{"size": 1, "where": {"latency_steps": [1, 3]}}]
    for other_draw in (["seed=1", limited], []):  # another seed's vehicles; the same vehicles without the limit
        other = subprocess.run([*command, *other_draw], capture_output=True, text=True, timeout=900)
        assert other.returncode == 2 and "v0 was trained on another vehicle, latency or position error limit" in other.stderr, other.stderr[-2000:]
        assert len(other.stderr.strip().splitlines()) == 1

    # env_overrides of other fields than the latency: the family's rollouts still fly the latencies below the pool's
    done = _distill(teacher_run, tmp_path / "student", f"teacher_pool={out}", "teacher_pool_min_success=0.0",
                    "teacher_pool_latency_from=1", "env_overrides={randomization: {motor_tau_scale: [0.5, 1.0]}}")
    assert done.returncode == 0, done.stderr[-3000:]
    recorded = Conf.load(tmp_path / "student" / "config.yaml").distill
    assert list(recorded.teacher_pool_runs) == [str(out / f"v{i}") for i in range(3)]

    # make train POOL=1 draws from its family teacher with the student's env_overrides: the student's own vehicles
    overrides = Conf.create({"randomization": {"motor_tau_scale": [0.5, 1.0]}})
    from_student = draw_pool(env_at(Conf.load(tmp_path / "student" / "config.yaml").env, 1.0, False), 4, 4242, 1)
    from_teacher = draw_pool(env_at(Conf.load(teacher_run / "config.yaml").env, 1.0, False, overrides), 4, 4242, 1)
    assert from_teacher == from_student != draw_pool(env_at(Conf.load(teacher_run / "config.yaml").env, 1.0, False), 4, 4242, 1)
    narrowed = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={teacher_run}", f"out={tmp_path / 'narrow'}",
                               "min_latency=1", "env_overrides={randomization: {latency_steps: [0, 0]}}"],
                              capture_output=True, text=True, timeout=300)
    assert narrowed.returncode == 2 and "with its env_overrides act at most 0 control steps late" in narrowed.stderr, narrowed.stderr
    assert not (tmp_path / "narrow").exists()


def test_a_pool_member_that_fails_leaves_the_others_trained_and_is_named_with_its_log(student_run, tmp_path):
    """A member whose training fails does not stop the others; the command then names the failed members and the
    log to read, in one line."""
    out = tmp_path / "pool"
    # demos that cannot be read (a dataset folder without episodes): every member's robo_rl.train fails loading them
    missing = tmp_path / "no_demos"
    (missing / "data").mkdir(parents=True)
    failing = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}", f"out={out}", "size=2",
                              "min_latency=1", "steps=2000", f'overrides=["privileged_critic=false","demos={missing}"]'],
                             capture_output=True, text=True, timeout=600)
    assert failing.returncode == 2, failing.stderr[-2000:]
    last = failing.stderr.strip().splitlines()[-1]  # after the progress bar's lines
    assert "2 of the 2 pool members to train failed (v0, v1); see" in last and "Traceback" not in failing.stderr
    for i in range(2):
        assert str(missing) in (out / f"v{i}.log").read_text()
    # an override that does not compose, or that robo_rl.train refuses (batch_size=0 failed every member, each in
    # its log), is refused once, before the pool's folder or any member
    for override, message in (("agent.batch_sise=64", "agent.batch_sise is not an option of train; did you mean "
                               "agent.batch_size?"), ("agent.batch_size=0", "agent.batch_size must lie in"),
                              (f"demos={tmp_path / 'absent'}", f"no Minari dataset at {tmp_path / 'absent'}"),
                              (f"resume={student_run}", "resume is the pool's own (each member is a new run")):
        refused = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}",
                                  f"out={tmp_path / 'refused'}", "size=2", "min_latency=1", "steps=2000",
                                  f"overrides=[\"{override}\"]"], capture_output=True, text=True, timeout=600)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, refused.stderr
        assert lines[0].startswith(f"error: overrides=['{override}']: {message}"), lines
        assert not (tmp_path / "refused").exists()
    # a second pool on one out= while the first runs: it failed every member, its errors in the first one's logs
    import fcntl
    import os

    busy = tmp_path / "busy"
    busy.mkdir()
    holder = os.open(busy, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        second = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}", f"out={busy}", "size=1",
                                 "min_latency=1", "steps=2000"], capture_output=True, text=True, timeout=600)
    finally:
        os.close(holder)
    assert second.returncode == 2 and "is in use: another teacher_pool" in second.stderr, second.stderr
    assert list(busy.iterdir()) == []


FAMILY_ENV = {"id": "robo_rl/CrazyflieHover-v0", "backend": "torch", "compile": False, "overrides": {"randomization": {
    "mass_scale": [0.85, 1.75], "thrust_to_weight": [1.4, 3.0], "motor_tau_scale": [0.0, 1.0],
    "motor_tau_rise_scale": [0.0, 1.1], "motor_tau_fall_scale": [0.0, 2.0], "latency_steps": [0, 3]}}}


def test_a_focus_region_adds_vehicles_where_the_plain_draw_holds_few_and_keeps_the_plain_ones():
    """The light, slow-rotor vehicles at 2 steps of latency are about 1 in 60 of the family's draw: a focus region
    brings as many as asked, each inside its bounds (at min_latency or more where they leave the latency open),
    after the plain draw's own vehicles, which stay those of a pool without it."""
    from robo_rl.teacher_pool import draw_pool, focus_regions
    from sim.quadrotor.model import QuadrotorParams, load_model

    env = OmegaConf.create(FAMILY_ENV)
    region = {"latency_steps": [2, 2], "thrust_to_weight": [1.4, 2.4], "motor_tau_rise": [0.08, 1.0],
              "motor_tau_fall": [0.08, 1.0]}
    plain = draw_pool(env, 6, 4242, 2)
    grown = draw_pool(env, 6, 4242, 2, focus_regions([{"size": 5, "where": region}]))
    assert grown[:6] == plain and len(grown) == 11
    gravity = QuadrotorParams.from_model(load_model()).gravity
    for vehicle in grown[6:]:
        assert vehicle["latency_steps"] == 2 and vehicle["motor_tau_rise"] >= 0.08 and vehicle["motor_tau_fall"] >= 0.08
        assert 1.4 <= 4 * sum(vehicle["thrust_curve"]) / (vehicle["mass"] * gravity) <= 2.4
    assert len({v["mass"] for v in grown[6:]}) == 5
    # a region that leaves latency_steps unbounded draws at min_latency or more; one that bounds it, at its own
    # latencies, below min_latency too (the weak vehicles at 0-10 ms)
    light = draw_pool(env, 2, 4242, 3, focus_regions([{"size": 3, "where": {"thrust_to_weight": [1.4, 2.0]}}]))
    assert all(v["latency_steps"] == 3 for v in light)
    early = draw_pool(env, 2, 4242, 3, focus_regions([{"size": 6, "where": {"latency_steps": [0, 1]}}]))
    assert all(v["latency_steps"] == 3 for v in early[:2]) and {v["latency_steps"] for v in early[2:]} == {0, 1}


def test_a_focus_region_no_draw_fills_is_one_error_naming_it(monkeypatch):
    from robo_rl import teacher_pool
    from sim.errors import ConfigError

    monkeypatch.setattr(teacher_pool, "FOCUS_MAX_DRAWS", 2 * teacher_pool.FOCUS_BATCH)
    regions = teacher_pool.focus_regions([{"size": 1, "where": {"thrust_to_weight": [5.0, 6.0]}}])
    with pytest.raises(ConfigError, match=r"focus\[0\]: only 0 of 8192 drawn vehicles lie in .*widen it or lower its size"):
        teacher_pool.draw_pool(OmegaConf.create(FAMILY_ENV), 2, 4242, 0, regions)


@pytest.mark.parametrize("focus, message", [
    ({"size": 4}, r"focus must be a list of \{size: <vehicles>, where: \{<latency_steps\|thrust_to_weight"),
    ([3], r"focus\[0\] must be \{size: <vehicles>, where: \{<key>: \[low, high\]\}\}, got 3"),
    ([{"size": 4}], r"focus\[0\] must be \{size"),
    ([{"size": 0, "where": {"latency_steps": [2, 2]}}], r"focus\[0\].size must be a whole number of vehicles >= 1, got 0"),
    ([{"size": 2.5, "where": {"latency_steps": [2, 2]}}], r"focus\[0\].size must be a whole number"),
    ([{"size": 4, "where": {}}], r"focus\[0\].where must bound at least one of latency_steps"),
    ([{"size": 4, "where": {"wind": [0, 1]}}], r"focus\[0\].where.wind: not a drawn value; bound one of latency_steps"),
    ([{"size": 4, "where": {"thrust_to_weight": [2.4, 1.4]}}],
     r"focus\[0\].where.thrust_to_weight must be \[low, high\] with finite low <= high, got \[2.4, 1.4\]"),
    ([{"size": 4, "where": {"mass": [0.02, float("nan")]}}], r"focus\[0\].where.mass must be \[low, high\]"),
    ([{"size": 4, "where": {"mass": 0.03}}], r"focus\[0\].where.mass must be \[low, high\]"),
])
def test_a_malformed_focus_is_one_error_naming_the_entry(focus, message):
    from robo_rl.teacher_pool import focus_regions
    from sim.errors import ConfigError

    for given in (focus, OmegaConf.create(focus)):  # as Python and as the composed config holds it
        with pytest.raises(ConfigError, match=message):
            focus_regions(given)


def test_a_malformed_focus_on_the_command_line_is_one_line_and_makes_no_folder(student_run, tmp_path):
    out = tmp_path / "pool"
    refused = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}", f"out={out}", "size=2",
                              "focus=[{size: 2, where: {wind: [0, 1]}}]"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "error: focus[0].where.wind: not a drawn value; bound one of latency_steps, thrust_to_weight, mass, "
        "motor_tau_rise, motor_tau_fall, rotor_offset, yaw_torque_ratio"], refused.stderr
    assert not out.exists()
    # a region that no draw fills is refused before the pool's folder is made too
    unfilled = subprocess.run([PYTHON, "-m", "robo_rl.teacher_pool", f"run={student_run}", f"out={out}", "size=2",
                               "min_latency=1", "focus=[{size: 2, where: {thrust_to_weight: [9, 10]}}]"],
                              capture_output=True, text=True, timeout=300)
    assert unfilled.returncode == 2 and len(unfilled.stderr.strip().splitlines()) == 1, unfilled.stderr
    assert "focus[0]: only 0 of 262144 drawn vehicles lie in" in unfilled.stderr and not out.exists()


def test_the_option_check_and_the_command_take_one_draw_of_the_pool(monkeypatch, tmp_path):
    """The option check draws the pool (a region no draw fills is refused before the folder exists) and the
    command takes that draw again: it is drawn once per set of options, and each caller gets its own copy."""
    from robo_rl import teacher_pool

    (tmp_path / "config.yaml").write_text(OmegaConf.to_yaml({"env": FAMILY_ENV}))
    draws = []

    def counting_draw(env_cfg, size, seed, min_latency, focus=()):
        draws.append((size, seed))
        return [{"mass": 0.03, "thrust_curve": [0.0, 0.05, 0.07]} for _ in range(size)]

    monkeypatch.setattr(teacher_pool, "draw_pool", counting_draw)
    options = OmegaConf.create({"run": str(tmp_path), "env_overrides": None, "size": 2, "seed": 4242,
                                "min_latency": 0, "focus": []})
    _, first = teacher_pool.drawn_pool(options)
    first[0]["mass"] = 1.0
    _, second = teacher_pool.drawn_pool(options)
    assert draws == [(2, 4242)] and second[0]["mass"] == 0.03
    options.size = 3
    assert len(teacher_pool.drawn_pool(options)[1]) == 3 and draws == [(2, 4242), (3, 4242)]


@pytest.mark.parametrize("change", [{"steps": 1000}, {"stop_at_success": 0.98}, {"overrides": ["agent.actor_lr=0.01"]}])
def test_a_pool_rerun_with_other_member_training_is_refused_before_pool_json_is_rewritten(change, tmp_path):
    """A rerun with another steps=, stop_at_success= or overrides= kept the members trained so far and wrote the
    new value over theirs in pool.json, which then described them wrongly."""
    from robo_rl.teacher_pool import POOL_FILE, check_same_training, train_pool
    from sim.errors import ConfigError

    record = {"steps": 500000, "stop_at_success": None, "overrides": [], "vehicles": []}
    (tmp_path / "v0").mkdir()
    (tmp_path / "v0" / "summary.json").write_text(json.dumps({"history": [{"success_rate": 1.0}]}))
    (tmp_path / POOL_FILE).write_text(json.dumps(record))
    option, value = next(iter(change.items()))
    with pytest.raises(ConfigError, match=f"the 1 members already in out={tmp_path} trained with {option}="):
        train_pool(tmp_path, [], 500000, 1, progress=False, record={**record, **change})
    assert json.loads((tmp_path / POOL_FILE).read_text()) == record
    check_same_training(tmp_path, {**record, "size": 120})  # a pool grown with the same training: kept, not refused
    (tmp_path / "v0" / "summary.json").unlink()
    check_same_training(tmp_path, {**record, **change})  # no member trained yet: nothing kept to contradict


def test_make_train_pools_family_starts_are_the_robustness_suites_moderate_starts():
    """`make train POOL=1` keeps the family's labels to the suite's moderate starts (README, section 3): the
    Makefile's FAMILY_STARTS and configs/robustness.yaml's moderate set must not drift apart."""
    import re
    from pathlib import Path

    from tests.robo_rl.quick import CONFIGS

    makefile = (Path(CONFIGS).parent / "Makefile").read_text()
    given = re.search(r"^FAMILY_STARTS := 'family_starts=(\{.*\})'$", makefile, re.MULTILINE)
    assert given, "the Makefile no longer sets FAMILY_STARTS as 'family_starts={...}'"
    moderate = OmegaConf.load(Path(CONFIGS) / "robustness.yaml").start_sets.moderate
    assert OmegaConf.to_container(OmegaConf.create(given[1])) == OmegaConf.to_container(moderate)


def test_a_checkpoint_at_every_evaluation_gives_the_time_to_the_first_student_that_meets_the_suite(tmp_path):
    """checkpoint_every_evaluation keeps each evaluated student (the default keeps only the final one), and
    bench/time_to_suite.py flies the robustness suite on each of them in order."""
    plain, every = tmp_path / "plain", tmp_path / "every"
    for out, extra in ((plain, ()), (every, ("checkpoint_every_evaluation=true", "checkpoint_keep=10"))):
        done = _distill("expert", out, "difficulty=0.2", MODERATE_STARTS.strip("'"), *extra)
        assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((plain / "checkpoints").glob("*.pt"))) == 1
    kept = sorted((every / "checkpoints").glob("*.pt"))
    assert [path.name for path in kept] == ["checkpoint_000000012800.pt", "checkpoint_000000025600.pt"]
    histories = [load_checkpoint(path)["history"] for path in kept]
    assert len(histories[0]) == 2 and histories[1] == json.loads((every / "summary.json").read_text())["history"]
    results = tmp_path / "time.json"
    timed = subprocess.run([PYTHON, "bench/time_to_suite.py", "--run", str(every), "--json", str(results)],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    assert timed.returncode == 0, timed.stderr[-3000:]
    students = json.loads(results.read_text())["students"]
    assert [s["checkpoint"] for s in students] == [path.name for path in kept]
    assert students[0]["env_steps"] < students[1]["env_steps"] and students[0]["seconds"] <= students[1]["seconds"]
    # 11 checks: moderate starts and specialist per vehicle, held-out; no specialists here, so 5 are n/a
    assert all(s["passed"] + s["failed"] + s["unsure"] == 6 and s["not_checked"] == 5 for s in students), students
    steady = json.loads(results.read_text())["meeting_suite_from_then_on"]
    unrefuted = json.loads(results.read_text())["first_not_refuted"]
    assert unrefuted == next((s for s in students if s["failed"] == 0), None)
    missed = [s["failed"] + s["unsure"] for s in students]
    if missed[-1]:
        assert steady is None
    else:
        since = [s["checkpoint"] for s in students].index(steady["checkpoint"])
        assert not any(missed[since:]) and (since == 0 or missed[since - 1])
    refused = subprocess.run([PYTHON, "bench/time_to_suite.py", "--run", str(plain), "--json", str(tmp_path / "x.json")],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and refused.stderr.strip().startswith("error: --run") and "1 checkpoint" in refused.stderr
    assert not (tmp_path / "x.json").exists()


def test_time_to_suite_names_the_student_from_which_every_later_one_meets_the_suite(monkeypatch):
    """On 100 starts per cell a student can meet the suite and the next ones fail it by a point: the first that meets
    it is not where training can stop."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    steady_from = importlib.import_module("time_to_suite").steady_from
    rows = [{"checkpoint": str(index), "failed": failed} for index, failed in enumerate([2, 0, 1, 0, 0])]
    assert steady_from(rows)["checkpoint"] == "3"
    rows[3]["unsure"] = 1  # a miss within the noise of the starts is no proof that the student meets the suite
    assert steady_from(rows)["checkpoint"] == "4"
    assert steady_from(rows[:3]) is None and steady_from(rows[1:2])["checkpoint"] == "1"


def _make_train_distill_options(tmp_path: Path, task: str = "hover") -> list[str]:
    """robo_rl.distill's options as `make train TASK=<task>` passes them (its PY replaced by a recorder of the
    commands), without its hydra.run.dir."""
    calls, recorder = tmp_path / "calls", tmp_path / "py"
    recorder.write_text(f"#!{PYTHON}\nimport json, os, sys\nif sys.argv[1] == '-c':\n"
                        f"    os.execv({PYTHON!r}, [{PYTHON!r}, *sys.argv[1:]])\n"
                        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    recorder.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    done = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "train", f"RUN={tmp_path / 'planned'}",
                           f"TASK={task}", f"PY={recorder}", "STAMP=", "CORE_STAMP="], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = [json.loads(line) for line in calls.read_text().splitlines()]
    options = next(args[2:] for args in recorded if args[:2] == ["-m", "robo_rl.distill"])
    return [option for option in options if not option.startswith("hydra.run.dir=")]


def _short_distill(options: list[str], out: Path) -> subprocess.CompletedProcess:
    """`options` distilled for one short iteration into `out`."""
    return subprocess.run([PYTHON, "-m", "robo_rl.distill", *options, f"hydra.run.dir={out}", "num_envs=16",
                           "rollout_steps=2", "iterations=1", "eval.episodes=2", "torch_threads=1",
                           "distillation.compile=false", "distillation.batch_size=16",
                           "distillation.updates_per_iteration=1",
                           "logging.progress_bar=false", "logging.tensorboard=false"],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("task", ["reach", "figure_eight"])
def test_make_trains_recipe_distills_every_quadrotor_task_it_offers(tmp_path, task):
    # TASK=figure_eight once stopped at its first line: 2.5 s rollout episodes end before its 6 s success window
    done = _short_distill(_make_train_distill_options(tmp_path, task), tmp_path / "student")
    assert done.returncode == 0, done.stderr[-3000:]
    assert OmegaConf.load(tmp_path / "student" / "config.yaml").distill.task == task


def test_make_trains_student_fits_the_stm32f405s_budget(tmp_path):
    """The network and observation of `make train`'s recipe (its distill options, one short iteration) export
    to at most 60k instructions per inference and 100 KB of policy flash on the emulated STM32F405 (issue 31):
    a wider actor or a longer history that breaks the budget fails here, not on the robot."""
    student = tmp_path / "student"
    done = _short_distill(_make_train_distill_options(tmp_path), student)
    assert done.returncode == 0, done.stderr[-3000:]
    exported = subprocess.run([PYTHON, "-m", "robo_rl.export", f"run={student}"], capture_output=True, text=True,
                              timeout=900)
    assert exported.returncode == 0, exported.stderr[-3000:]
    m4 = json.loads((student / "export" / "policy.json").read_text())["verification"]["cortex_m4"]
    assert m4["checked"], m4
    assert m4["instructions_per_inference"] <= 60_000 and m4["policy_flash_bytes"] <= 100 * 1024, m4
