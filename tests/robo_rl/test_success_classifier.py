"""The learned reward: a success classifier trained from labelled camera frames, scored on held-out episodes'
frames, written and read back; a training run whose rewards are its verdicts; bad input in one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from robo_rl.datasets import DatasetError, load_labelled_frames, record_episodes, write_dataset
from robo_rl.success_classifier import load_classifier, save_classifier, train_classifier
from sim.arm.env import ArmVectorEnv
from sim.errors import ConfigError
from tests.fuzz.harness import ROOT
from tests.robo_rl.quick import CONFIGS


def bright_square_frames(episodes: int, steps: int, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    """Frames where a success shows as a bright square high in the image, a failure as one low in it."""
    rng = np.random.default_rng(seed)
    n = episodes * steps
    labels = rng.random(n) < 0.3
    images = rng.integers(0, 60, (n, 32, 32, 3), dtype=np.uint8)
    for i, success in enumerate(labels):
        row = rng.integers(2, 8) if success else rng.integers(20, 26)
        column = rng.integers(2, 26)
        images[i, row:row + 5, column:column + 5] = 255
    return {"front": images}, labels, np.repeat(np.arange(episodes), steps)


def test_a_classifier_learns_success_from_frames_and_is_scored_on_held_out_episodes(tmp_path):
    frames, labels, episode = bright_square_frames(10, 60)
    model, scores = train_classifier(frames, labels, episode, epochs=8, seed=0)
    assert scores["frames"] == 120 and len(scores["held_out_episodes"]) == 2  # 20% of the episodes, unseen
    assert scores["precision"] > 0.9 and scores["recall"] > 0.9, scores
    save_classifier(model, scores, tmp_path / "c.pt", "synthetic")
    loaded = load_classifier(tmp_path / "c.pt", {"front": (32, 32, 3), "wrist": (32, 32, 3)})
    obs = {"front": torch.as_tensor(frames["front"][:50])}
    torch.testing.assert_close(loaded(obs), model(obs))
    with pytest.raises(ConfigError, match=r"reads camera 'front' at \[32, 32, 3\]; the env has"):
        load_classifier(tmp_path / "c.pt", {"front": (64, 64, 3)})
    (tmp_path / "junk.pt").write_bytes(b"not a classifier")
    with pytest.raises(ConfigError, match="is not a success classifier"):
        load_classifier(tmp_path / "junk.pt")


def test_labelled_frames_come_from_a_dataset_recorded_with_cameras_and_only_from_such_a_one(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = ArmVectorEnv("pick_cube", 2, robot="so_arm100",
                       cameras={"enabled": True, "width": 32, "height": 32, "workers": 1, "names": ["front"]})
    try:
        episodes = record_episodes(env, env.expert_actions, episodes=2, seed=0)
        write_dataset("cls/pixels-v0", episodes, "robo_rl/SOArm100PickCube-v0", env.single_observation_space,
                      env.single_action_space)
    finally:
        env.close()
    frames, labels, episode = load_labelled_frames("cls/pixels-v0")
    assert frames["front"].shape == (300, 32, 32, 3) and episode.tolist() == [0] * 150 + [1] * 150
    np.testing.assert_array_equal(labels, np.concatenate([e["is_success"] for e in episodes]))
    recorded = episodes[0]["observations"]["front"][1:].astype(int)
    assert np.abs(frames["front"][:150] - recorded).mean() < 10  # the frame after each step, through JPEG
    plain = ArmVectorEnv("pick_cube", 2, robot="so_arm100")
    write_dataset("cls/state-v0", record_episodes(plain, plain.expert_actions, episodes=2, seed=0),
                  "robo_rl/SOArm100PickCube-v0", plain.single_observation_space, plain.single_action_space)
    with pytest.raises(DatasetError, match="has no camera images; record the dataset with the env's cameras on"):
        load_labelled_frames("cls/state-v0")
    result = subprocess.run([sys.executable, "-m", "robo_rl.success_classifier", "dataset=cls/state-v0",
                             f"out={tmp_path / 'out' / 'c.pt'}"], capture_output=True, text=True, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                                 "MINARI_DATASETS_PATH": str(tmp_path / "minari"), "HOME": str(tmp_path)})
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert "has no camera images" in result.stderr and not (tmp_path / "out").exists()
    precious = tmp_path / "notes.pt"
    precious.write_text("not a classifier")
    result = subprocess.run([sys.executable, "-m", "robo_rl.success_classifier", "dataset=cls/pixels-v0",
                             f"out={precious}"], capture_output=True, text=True, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                                 "MINARI_DATASETS_PATH": str(tmp_path / "minari"), "HOME": str(tmp_path)})
    assert result.returncode == 2 and "exists and is not this command's earlier output" in result.stderr, result.stderr
    assert precious.read_text() == "not a classifier"  # never overwritten


def test_a_run_with_a_reward_classifier_stores_its_verdicts_as_rewards(tmp_path):
    from hydra import compose, initialize_config_dir

    from robo_rl.train import Trainer

    frames, labels, episode = bright_square_frames(4, 20)
    model, scores = train_classifier({"front": frames["front"], "wrist": frames["front"]}, labels, episode, epochs=1)
    save_classifier(model, scores, tmp_path / "c.pt", "synthetic")
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "+experiment=pick_cube_pixels", "demos=null", "env.overrides.cameras.width=32",
            "env.overrides.cameras.height=32", f"reward_classifier={tmp_path / 'c.pt'}", "num_envs=4",
            "torch_threads=1", "total_env_steps=200", "learning_starts=200", "eval.episodes=2",
            "eval.interval_env_steps=200", "checkpoint.interval_env_steps=200", "buffer.capacity=400",
            "agent.actor_hidden=[16,16]", "agent.critic_hidden=[16,16]", "agent.batch_size=16",
            "agent.encoder.channels=[4]", "agent.encoder.strides=[2]", "logging.progress_bar=false",
            "logging.tensorboard=false", "intervention=none"])
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.run()
    storage = trainer.replay.online.storage
    rows = slice(0, len(trainer.replay.online))
    next_obs = {name: storage[f"next_obs.{name}"][rows] for name in ("front", "wrist")}
    np.testing.assert_array_equal(storage["reward"][rows].numpy(), trainer.classifier.success(next_obs).float().numpy())


def test_a_classifier_of_other_cameras_or_an_env_without_cameras_is_refused_before_any_run_folder(tmp_path):
    frames, labels, episode = bright_square_frames(4, 20)
    model, scores = train_classifier({"front": frames["front"]}, labels, episode, epochs=1)
    save_classifier(model, scores, tmp_path / "c.pt", "synthetic")  # reads 32x32 front images
    for args, message in (
            (["+experiment=pick_cube_pixels"], r"reads camera 'front' at \[32, 32, 3\]; the env has"),
            (["env=so_arm100_pick_cube"], "reward_classifier reads camera images; robo_rl/SOArm100PickCube-v0 has none")):
        result = subprocess.run([sys.executable, "-m", "robo_rl.train", *args, f"reward_classifier={tmp_path / 'c.pt'}",
                                 f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, cwd=tmp_path,
                                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                                     "HOME": str(tmp_path)})
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        import re

        assert re.search(message, result.stderr), result.stderr
        assert not (tmp_path / "run").exists()


def test_the_classifier_is_written_only_to_a_new_pt_file_or_over_an_earlier_classifier(tmp_path):
    """out=<run>/summary replaced the run's summary.json with the classifier's scores (<out>.json)."""
    from robo_rl.success_classifier import check_output

    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "old.pt.json").write_text("{}")
    for given, message in ((str(tmp_path / "summary"), "give a file ending .pt"),
                           (f"{tmp_path}/new/", "ending .pt"), ("", "ending .pt"),
                           (str(tmp_path / "afile" / "c.pt"), "lies under .*afile, a file"),
                           (str(tmp_path / "old.pt"), "old.pt.json, where its scores go, exists already")):
        with pytest.raises(ConfigError, match=message):
            check_output(given)
    assert check_output(str(tmp_path / "sub" / "c.pt")) == tmp_path / "sub" / "c.pt"
    frames, labels, episode = bright_square_frames(5, 10)
    model, scores = train_classifier(frames, labels, episode, epochs=1, seed=0)
    save_classifier(model, scores, tmp_path / "old.pt", "synthetic")  # an earlier classifier and its scores
    assert check_output(str(tmp_path / "old.pt")) == tmp_path / "old.pt"
    assert (tmp_path / "summary.json").read_text() == "{}"
