"""Training end to end: learning, checkpoints under SIGKILL, resume, evaluation, bad checkpoints."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_dir

from robo_rl.checkpoint import (CHECKPOINT_FORMAT, CheckpointError, CheckpointWriter, detached_copy, list_checkpoints,
                                load_checkpoint, seal)
from robo_rl.evaluate import evaluate_run
from robo_rl.evaluation import acting_threads
from robo_rl.train import Trainer
from sim.errors import ConfigError
from tests.robo_rl.quick import CONFIGS, QUICK, quick_config as _config

def _digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_short_run_learns_to_stay_airborne(tmp_path):
    # the online actor: a weight average with a time constant of 2,000 updates lags a 2,750-update run
    cfg = _config("total_env_steps=24000", "eval.interval_env_steps=24000", "checkpoint.interval_env_steps=24000",
                  "agent.actor_average_rate=0.0")
    summary = Trainer(cfg, tmp_path).run()
    before, after = summary["history"][0], summary["history"][-1]
    assert before["env_steps"] == 0 and after["env_steps"] >= 24000
    # untrained, the vehicle sinks out of the arena in ~0.5 s; trained, it stays up measurably longer
    assert after["mean_return"] > before["mean_return"] + 15.0, summary["history"]  # +57 and +90 on seeds 0-1
    assert after["mean_length"] > before["mean_length"], summary["history"]
    for name in ("learning_curve.png", "summary.json", "config.yaml"):
        assert (tmp_path / name).is_file()
    assert list((tmp_path / "tensorboard").iterdir())
    # the best evaluated policy is kept apart and evaluates the same through the evaluation command
    best = load_checkpoint(tmp_path / "best_policy.pt")
    assert best["evaluation"] == max(summary["history"], key=lambda e: (e["success_rate"], e["mean_return"]))
    row = evaluate_run(tmp_path, episodes=20, seed=int(cfg.eval.seed))
    assert row["checkpoint"].endswith("best_policy.pt")
    assert row["mean_return"] == pytest.approx(best["evaluation"]["mean_return"], rel=1e-4)


def test_the_same_seed_trains_the_same_policy_bit_for_bit_on_the_recipes_path(tmp_path):
    """Training on the CPU is a function of its seed and the code: two runs of the family recipe's path (torch
    backend, native step, drawn vehicles, latency, wind) end with equal weights and replay buffers, so that a
    change in results between two runs is the code's. (1458c10 moved one reward of the native step by an ulp:
    enough to part two seed-0 teachers by 25k env steps and 7 points of final success.)"""
    overrides = ("env.backend=torch", "env.compile=true", "total_env_steps=3000", "learning_starts=1000",
                 "eval.interval_env_steps=3000", "checkpoint.interval_env_steps=3000", "logging.tensorboard=false",
                 "+env.overrides.randomization={mass_scale: [0.85, 1.75], thrust_to_weight: [1.4, 3.0], latency_steps: [0, 3], "
                 "disturbance_force: 0.01}")
    states = []
    for name in ("first", "second"):
        Trainer(_config(*overrides), tmp_path / name).run()
        states.append(load_checkpoint(list_checkpoints(tmp_path / name)[-1]))
    first, second = states
    assert first["counters"]["updates"] > 0
    for name, weights in first["agent"]["model"].items():
        assert torch.equal(weights, second["agent"]["model"][name]), name
    replay = first["replay"]["online"]["storage"]
    assert all(torch.equal(rows, second["replay"]["online"]["storage"][key]) for key, rows in replay.items())


def test_sigkill_mid_run_leaves_loadable_checkpoints_and_resume_continues(tmp_path):
    run = tmp_path / "run"
    # with the asymmetric critic, so that its privileged observations go through the buffers and back, and
    # the compiled update (training's default), so that it is what resumes
    args = [*QUICK, "agent.compile=true", "privileged_critic=true", "total_env_steps=12000", "eval.interval_env_steps=100000",
            "checkpoint.interval_env_steps=1600",
            "checkpoint.keep=2", "logging.tensorboard=false", f"hydra.run.dir={run}"]
    process = subprocess.Popen([sys.executable, "-m", "robo_rl.train", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    while len(list_checkpoints(run)) < 2 and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stdout.read().decode()
    killed_at = load_checkpoint(run)
    for path in list_checkpoints(run):  # none torn, whatever the moment of the kill
        load_checkpoint(path)
    assert 0 < killed_at["counters"]["env_steps"] < 12000

    resumed = subprocess.run([sys.executable, "-m", "robo_rl.train", f"resume={run}"], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = load_checkpoint(run)
    assert final["counters"]["env_steps"] >= 12000
    assert final["counters"]["updates"] > killed_at["counters"]["updates"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["history"][0]["env_steps"] == 0  # the history from before the kill is kept
    assert len(list_checkpoints(run)) == 2  # keep=2
    assert final["critic_obs_dim"] > final["env_spec"]["observation_size"]
    assert evaluate_run(run, episodes=4)["episodes"] == 4


def test_background_checkpoints_hold_the_state_at_submit_and_report_a_failed_write(tmp_path):
    writer = CheckpointWriter(tmp_path, keep=2)
    # the fields every loader needs, and what this test watches: weights and history
    live = {"format": CHECKPOINT_FORMAT, "config": {}, "agent_config": {}, "agent": {"model": {}},
            "env_spec": {"id": "test", "observation_size": 1, "action_size": 1, "action_low": [0.0], "action_high": [1.0]},
            "counters": {"env_steps": 0, "updates": 0}, "weights": torch.zeros(100_000), "history": [{"step": 0}]}
    for step in (1, 2, 3):
        writer.submit(step, detached_copy(live))
        live["weights"] += 1.0  # training goes on while the snapshot is written
        live["history"].append({"step": step})
    assert writer.close().name == "checkpoint_000000000003.pt"
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint_000000000002.pt", "checkpoint_000000000003.pt"]
    newest = load_checkpoint(tmp_path)
    assert torch.equal(newest["weights"], torch.full((100_000,), 2.0))
    assert newest["history"] == [{"step": 0}, {"step": 1}, {"step": 2}]

    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "checkpoints").write_text("a file where the checkpoint directory goes")
    failing = CheckpointWriter(blocked)
    failing.submit(1, {"format": 1})  # returns at once; the failure surfaces at the next call
    with pytest.raises(CheckpointError, match="failed"):
        failing.close()


def test_bad_checkpoints_give_one_clear_error_and_overwrite_nothing(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "checkpoint_000000000001.pt")

    cfg = _config("total_env_steps=800", "learning_starts=400", "eval.interval_env_steps=800",
                  "checkpoint.interval_env_steps=800", "logging.tensorboard=false")
    run = tmp_path / "run"
    Trainer(cfg, run).run()
    newest = list_checkpoints(run)[-1]

    other_env = torch.load(newest, weights_only=False)
    other_env["env_spec"]["id"] = "robo_rl/CrazyflieReach-v0"
    torch.save(seal(other_env), newest)  # an intact checkpoint (checksum recomputed) of another env
    before = _digest(run)
    with pytest.raises(CheckpointError, match="different env"):
        Trainer(_config(f"resume={run}"), run)
    with pytest.raises(CheckpointError, match="different env"):
        evaluate_run(run, checkpoint="last", episodes=4)
    assert _digest(run) == before

    newest.write_bytes(newest.read_bytes()[:1000])  # torn file, and no older one to fall back to
    before = _digest(run)
    with pytest.raises(CheckpointError, match="no intact checkpoint.*unreadable"), pytest.warns(UserWarning, match="damaged"):
        Trainer(_config(f"resume={run}"), run)
    assert _digest(run) == before


def test_resume_on_another_kind_of_device_warns_and_uses_the_device_it_is_given(tmp_path):
    cfg = _config("total_env_steps=800", "learning_starts=400", "eval.interval_env_steps=800",
                  "checkpoint.interval_env_steps=800", "logging.tensorboard=false", "device=cpu")
    Trainer(cfg, tmp_path).run()
    newest = list_checkpoints(tmp_path)[-1]
    state = torch.load(newest, weights_only=False)
    assert state["device"] == "cpu"
    state["device"] = "cuda:0"  # as if trained on a GPU machine
    torch.save(seal(state), newest)
    with pytest.warns(UserWarning, match="trained on cuda:0 on cpu"):
        resumed = Trainer(_config(f"resume={tmp_path}", "device=cpu", "total_env_steps=1600"), tmp_path,
                          overrides=["total_env_steps=1600"])  # the run is complete: extended
    assert resumed.device == torch.device("cpu") and resumed.env_steps == state["counters"]["env_steps"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_run_on_cuda_trains_checkpoints_and_evaluates_on_the_cpu(tmp_path):
    cfg = _config("total_env_steps=3200", "learning_starts=1600", "eval.interval_env_steps=1600",
                  "checkpoint.interval_env_steps=1600", "logging.tensorboard=false", "device=cuda",
                  "env.backend=torch", "env.compile=true", "agent.compile=true", "privileged_critic=true")
    trainer = Trainer(cfg, tmp_path)
    assert trainer.device.type == "cuda"
    summary = trainer.run()
    assert summary["env_steps"] >= 3200 and summary["updates"] > 0
    assert load_checkpoint(tmp_path)["device"].startswith("cuda")
    assert evaluate_run(tmp_path, episodes=4, device="cpu")["episodes"] == 4


def test_the_trainer_composes_with_the_arm_env_without_a_privileged_critic(tmp_path):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "env=arm_reach", "num_envs=8", "torch_threads=1", "total_env_steps=800", "learning_starts=400",
            "eval.episodes=4", "eval.interval_env_steps=800", "checkpoint.interval_env_steps=800",
            "agent.actor_hidden=[32,32]", "agent.critic_hidden=[32,32]", "agent.compile=false",
            "logging.progress_bar=false", "logging.tensorboard=false", "logging.video=true"])
    summary = Trainer(cfg, tmp_path).run()
    assert summary["env_steps"] >= 800 and summary["updates"] > 0
    from PIL import Image

    video = Image.open(tmp_path / "rollout.gif")  # rendered offscreen (EGL) from the best policy
    assert video.n_frames == 75 and video.size == (480, 360)  # a 3 s episode at 50 Hz, every 2nd step
    assert len(set(video.convert("RGB").getdata())) > 100  # a scene, not a blank frame
    state = load_checkpoint(tmp_path)
    assert state["critic_obs_dim"] == state["env_spec"]["observation_size"]  # auto: the arm has no privileged state
    assert evaluate_run(tmp_path, episodes=4)["episodes"] == 4


def test_acting_beside_a_mujoco_batch_runs_on_one_thread_and_restores_the_count():
    mujoco_env, torch_env = SimpleNamespace(backend="mujoco_batch"), SimpleNamespace(backend="torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with acting_threads(mujoco_env):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with acting_threads(torch_env):  # it steps on torch's threads: they stay
            assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), acting_threads(mujoco_env):
            raise RuntimeError("a failing policy")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_curriculum_raises_the_difficulty_level_by_level_and_keeps_only_the_final_levels_best(tmp_path):
    """Evaluations at or above advance_at move training to the next level's envs; the run's best policy comes
    from the final level only; a resumed run continues at its level."""
    cfg = _config("total_env_steps=3200", "learning_starts=800", "eval.interval_env_steps=800",
                  "checkpoint.interval_env_steps=1600", "curriculum.levels=[0.0,0.5,1.0]", "curriculum.advance_at=0.0",
                  "+env.overrides.randomization.latency_steps=[0,2]")
    trainer = Trainer(cfg, tmp_path)
    assert trainer.env.batch.config.randomization.latency_steps == (0, 0)  # difficulty 0: no latency
    summary = trainer.run()
    difficulties = [entry["difficulty"] for entry in summary["history"]]
    assert difficulties == [0.0, 0.0, 0.5, 1.0, 1.0]  # each evaluation (success >= 0) advanced one level
    assert trainer.env.batch.config.randomization.latency_steps == (0, 2)
    best = torch.load(tmp_path / "best_policy.pt", weights_only=True)
    assert best["evaluation"]["difficulty"] == 1.0
    resumed = Trainer(_config("resume=" + str(tmp_path), "total_env_steps=4000"), tmp_path,
                      overrides=["resume=" + str(tmp_path), "total_env_steps=4000"])
    assert resumed.level == 2 and resumed.env.batch.config.randomization.latency_steps == (0, 2)
    with pytest.raises(ConfigError, match="curriculum.levels must rise"):
        Trainer(_config("curriculum.levels=[0.5,0.2]"), tmp_path / "bad")


def test_a_curriculum_moves_on_from_a_level_whose_success_stopped_rising(tmp_path):
    """With `patience`, a level whose evaluations brought no new best success rate for that many evaluations
    advances although advance_at (unreachable here) was never met; without it the run stays at level 0."""
    trainer = Trainer(_config("curriculum.levels=[0.0,0.5,1.0]", "curriculum.advance_at=1.0",
                              "curriculum.patience=2"), tmp_path)

    def evaluated(rate: float) -> bool:
        trainer.history.append({"difficulty": trainer.difficulty, "success_rate": rate})
        return trainer._advance_curriculum(trainer.history[-1])

    assert [evaluated(r) for r in (0.3, 0.5, 0.4, 0.5)] == [False, False, False, True]  # 0.5 twice: not a new best
    assert trainer.level == 1 and trainer.difficulty == 0.5
    assert [evaluated(r) for r in (0.2, 0.1)] == [False, False]  # counting starts afresh at the new level
    trainer.cfg.curriculum.patience = None
    assert not evaluated(0.0) and trainer.level == 1


def test_a_checkpoint_whose_critic_saw_another_privileged_observation_is_refused_with_one_clear_error(trained_run, tmp_path):
    """A run trained by a robo-rl whose privileged observation had another size cannot resume (the critic's
    weights do not fit), and says so instead of torch's state_dict error."""
    state = load_checkpoint(trained_run)
    state["critic_obs_dim"] = int(state["critic_obs_dim"]) - 10  # the privileged observation before it grew
    trainer = Trainer(_config(), tmp_path)
    with pytest.raises(CheckpointError, match="its critic sees .* inputs, this env's privileged observation has"):
        trainer._restore(state)


def test_init_from_starts_a_new_run_from_another_runs_best_policy_which_acts_from_the_first_step(trained_run, tmp_path):
    """`init_from` loads a run's best policy (networks, target critics, temperature, optimizer states) into a new
    run, which collects with that policy from its first step instead of uniform random actions; a run whose
    observation does not fit, or a folder that is no run, is refused with one error, the latter before Hydra makes
    the run folder."""
    from robo_rl.options import check_options

    short = ("total_env_steps=48", "eval.interval_env_steps=48", "checkpoint.interval_env_steps=48",
             "logging.tensorboard=false")  # three batched steps, all before learning_starts (2,000)
    collected: dict[str, list[bool]] = {}
    for name, extra in (("warm", (f"init_from={trained_run}",)), ("cold", ())):
        trainer = Trainer(_config(*short, *extra), tmp_path / name)
        if name == "warm":
            source = load_checkpoint(trained_run / "best_policy.pt")["agent"]["model"]
            loaded = trainer.agent.state_dict()
            assert set(loaded) == set(source)
            assert all(torch.equal(loaded[key].cpu(), tensor.cpu()) for key, tensor in source.items())
            assert trainer.started_from.endswith("best_policy.pt")
        act, calls = trainer.agent.act, collected.setdefault(name, [])
        trainer.agent.act = lambda obs, deterministic=False, act=act, calls=calls: (calls.append(deterministic),
                                                                                   act(obs, deterministic))[1]
        trainer.run()
    # each collection step asked the policy for a sample in the warm run; only evaluations did in the cold one
    assert collected["warm"].count(False) == 3 and collected["cold"].count(False) == 0, collected

    with pytest.raises(CheckpointError, match="init_from=.*was trained on a different env: observation_size"):
        Trainer(_config(f"init_from={trained_run}", "++env.overrides.state_history=2"), tmp_path / "other")
    with pytest.raises(CheckpointError, match=r"init_from=.*its networks do not fit .*size mismatch for actor"):
        Trainer(_config(f"init_from={trained_run}", "agent.actor_hidden=[16,16]"), tmp_path / "narrower")
    with pytest.raises(CheckpointError, match=r"init_from=.*not a training run directory"):
        check_options(_config(f"init_from={tmp_path / 'nothing'}"), "train")
    with pytest.raises(CheckpointError, match=r"init_from=.*it is a file, not a directory"):
        check_options(_config(f"init_from={trained_run / 'best_policy.pt'}"), "train")
    assert not (tmp_path / "nothing").exists()
    # a run of another env: refused only once the run had started (and in every teacher_pool member)
    import shutil

    from omegaconf import OmegaConf

    other = shutil.copytree(trained_run, tmp_path / "arm", ignore=shutil.ignore_patterns("tensorboard", "checkpoints"))
    recorded = OmegaConf.load(other / "config.yaml")
    recorded.env.id = "robo_rl/ArmReach-v0"
    OmegaConf.save(recorded, other / "config.yaml")
    with pytest.raises(ConfigError, match=r"init_from=.*arm trained robo_rl/ArmReach-v0; this run trains robo_rl/Crazy"):
        check_options(_config(f"init_from={other}"), "train")


def test_stop_at_success_ends_the_run_at_the_first_evaluation_that_reaches_it(tmp_path):
    """With stop_at_success the run ends at the first evaluation whose success rate reaches it: that evaluation's
    policy is the best kept, a checkpoint is written at its step and the summary closes the run there. Ray's
    asynchronous evaluations are refused in one line."""
    from robo_rl.options import check_options

    cfg = _config("total_env_steps=8000", "eval.interval_env_steps=2000", "checkpoint.interval_env_steps=8000",
                  "learning_starts=1000", "logging.tensorboard=false", "stop_at_success=0.5")
    trainer = Trainer(cfg, tmp_path)
    scripted, evaluate = iter([0.0, 0.2, 0.6, 0.9, 0.9]), trainer.evaluate

    def scripted_evaluate() -> dict:  # the run's own evaluation, its success rate replaced by the script's
        entry = evaluate()
        entry["success_rate"] = next(scripted)
        return entry

    trainer.evaluate = scripted_evaluate
    summary = trainer.run()
    assert [e["env_steps"] for e in summary["history"]] == [0, 2000, 4000]
    assert summary["env_steps"] == 4000 and summary["final"]["success_rate"] == 0.6
    assert load_checkpoint(tmp_path / "best_policy.pt")["evaluation"]["success_rate"] == 0.6
    assert load_checkpoint(list_checkpoints(tmp_path)[-1])["counters"]["env_steps"] == 4000
    with pytest.raises(ConfigError, match="stop_at_success ends a run with runner=local only"):
        check_options(_config("stop_at_success=0.9", "runner=ray"), "train")


def test_a_diverging_training_stops_naming_the_loss_and_saves_nothing_diverged(tmp_path):
    """With learning rates of 1 (inside the allowed (0, 1]) the critic loss reached inf, Adam's state froze the
    updates, the diverged agent was checkpointed and kept as the best policy, and the run ended with status 0."""
    from robo_rl.train import TrainingDiverged

    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):  # the default recipe, as a user ran it
        cfg = compose(config_name="train", overrides=[
            "total_env_steps=3000", "num_envs=8", "learning_starts=500", "agent.actor_lr=1", "agent.critic_lr=1",
            "agent.temperature_lr=1", "eval.interval_env_steps=1000", "checkpoint.interval_env_steps=1000",
            "eval.episodes=4", "torch_threads=1", "agent.compile=false", "logging.progress_bar=false",
            "logging.tensorboard=false"])
    with pytest.raises(TrainingDiverged, match=r"^training diverged by env step [\d,]+: (train/\w+ is (inf|nan|-inf)|"
                                               r".* is not finite) \(agent.actor_lr=1, agent.critic_lr=1, "
                                               r"agent.temperature_lr=1\); lower the learning rates"):
        Trainer(cfg, tmp_path).run()
    for saved in [tmp_path / "best_policy.pt", *sorted((tmp_path / "checkpoints").glob("*.pt"))]:
        state = load_checkpoint(saved)
        assert all(torch.isfinite(value).all() for value in state["agent"]["model"].values() if value.is_floating_point())
