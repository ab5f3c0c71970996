"""Demonstration datasets: scripted recording, the Minari round trip, and bad datasets."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from robo_rl.datasets import DatasetError, check_dataset_id, load_transitions, record_episodes, write_dataset
from robo_rl.envs import env_spec
from sim.arm.env import ArmVectorEnv


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


@pytest.fixture(scope="module")
def pick_env():
    return ArmVectorEnv("pick_cube", num_envs=4, nthread=1)


@pytest.fixture(scope="module")
def expert_episodes(pick_env):
    return record_episodes(pick_env, pick_env.expert_actions, episodes=3, seed=0)


def test_scripted_demos_round_trip_through_minari(minari_root, pick_env, expert_episodes):
    import minari

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Minari's "code_permalink is set to None" came with every recording
        path = write_dataset("pick_cube/test-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                             pick_env.single_observation_space, pick_env.single_action_space)
    assert path.is_relative_to(minari_root)
    dataset = minari.load_dataset("pick_cube/test-v0")  # what a user without robo-rl does
    assert dataset.storage.metadata["code_permalink"].startswith("robo-rl")
    assert dataset.total_episodes == 3
    episodes = list(dataset.iterate_episodes())
    for stored, recorded in zip(episodes, expert_episodes, strict=True):
        np.testing.assert_array_equal(stored.observations, recorded["observations"])
        np.testing.assert_array_equal(stored.actions, recorded["actions"])
        assert stored.infos["is_success"][-1]  # only successful episodes are accepted
    transitions = load_transitions("pick_cube/test-v0", env_spec(pick_env, "robo_rl/ArmPickCube-v0"))
    steps = sum(len(e["actions"]) for e in expert_episodes)
    assert transitions["obs"].shape == (steps, pick_env.layout.size) and transitions["action"].shape == (steps, 4)
    first = expert_episodes[0]
    torch.testing.assert_close(transitions["next_obs"][0], torch.as_tensor(first["observations"][1]))
    torch.testing.assert_close(transitions["reward"][: len(first["rewards"])],
                               torch.as_tensor(first["rewards"], dtype=torch.float32))
    with pytest.raises(DatasetError, match="exists"):  # never overwritten
        write_dataset("pick_cube/test-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                      pick_env.single_observation_space, pick_env.single_action_space)


@pytest.mark.parametrize("dataset_id", ["foo", "pick_cube/scripted", "foo-vx", "", "../escape-v0", "a b-v0", "t/a-v0"])
def test_a_dataset_id_without_its_version_is_refused_as_other_malformed_ids_are(dataset_id):
    """Minari's pattern takes an id without -v<version>, then failed on int(None): a TypeError traceback."""
    with pytest.raises(DatasetError) as error:
        check_dataset_id(dataset_id)
    assert str(error.value) == (f"dataset={dataset_id} must be a Minari id, (namespace/)name-v<version> such as "
                                "pick_cube/scripted-v0 (letters, digits, - and _; a namespace of at least two), "
                                "written under MINARI_DATASETS_PATH or ~/.minari/datasets")


def test_bad_datasets_give_one_clear_error(minari_root, pick_env, expert_episodes):
    import gymnasium as gym

    spec = env_spec(pick_env, "robo_rl/ArmPickCube-v0")
    with pytest.raises(DatasetError, match="no Minari dataset"):
        load_transitions("pick_cube/missing-v0", spec)
    narrow = [dict(e, observations=e["observations"][:, :10]) for e in expert_episodes]
    write_dataset("pick_cube/narrow-v0", narrow, "robo_rl/ArmPickCube-v0",
                  gym.spaces.Box(-np.inf, np.inf, (10,), np.float32), pick_env.single_action_space)
    with pytest.raises(DatasetError, match=r"observations of shape \(\d+, 10\).*16 per step"):
        load_transitions("pick_cube/narrow-v0", spec)
    path = write_dataset("pick_cube/torn-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                         pick_env.single_observation_space, pick_env.single_action_space)
    data_file = next((path / "data").glob("main_data.*"))
    data_file.write_bytes(data_file.read_bytes()[:500])
    with pytest.raises(DatasetError, match="cannot read"):
        load_transitions(path, spec)


def test_demos_recorded_on_another_env_are_refused_although_their_shapes_fit(minari_root, pick_env, expert_episodes):
    import minari

    path = write_dataset("pick_cube/panda-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                         pick_env.single_observation_space, pick_env.single_action_space)
    # the SO-ARM100 pick-cube and the Panda reach have the Panda pick-cube's sizes and bounds (16 obs, 4 actions
    # in [-1, 1]): only the recorded env id tells them apart
    for other in ("robo_rl/SOArm100PickCube-v0", "robo_rl/ArmReach-v0"):
        spec = dict(env_spec(pick_env, "robo_rl/ArmPickCube-v0"), id=other)
        with pytest.raises(DatasetError, match=f"recorded on robo_rl/ArmPickCube-v0; the run trains {other}"):
            load_transitions(path, spec)
    # a Minari dataset that names no env (env_spec null) cannot be checked: refused, not guessed
    anonymous = minari_root / "anonymous" / "data"
    anonymous.mkdir(parents=True)
    for item in (path / "data").iterdir():
        (anonymous / item.name).write_bytes(item.read_bytes())
    metadata = json.loads((anonymous / "metadata.json").read_text())
    metadata["env_spec"] = None
    (anonymous / "metadata.json").write_text(json.dumps(metadata))
    assert minari.MinariDataset(anonymous).total_episodes == 3  # still a valid Minari dataset
    with pytest.raises(DatasetError, match="recorded on an env it does not name"):
        load_transitions(anonymous.parent, env_spec(pick_env, "robo_rl/ArmPickCube-v0"))


def _edit(array: np.ndarray, edit: str) -> np.ndarray:
    """One episode array as a damaged (or hand-edited) file might hold it."""
    if edit == "bytes":
        return array.astype("S8")
    if edit == "2-D":
        return array[:, None].repeat(2, axis=1)
    if edit == "short":
        return array[:-1]
    values = {"nan": np.nan, "beyond float32": 1e39, "not a flag": -5.0}  # 1e39: finite in float64, inf in float32
    edited = array.astype(np.float64)
    edited[1] = values[edit]  # the second step (a whole row of a 2-D array)
    return edited


@pytest.mark.parametrize("name, edit, message", [
    ("observations", "bytes", r"observations of dtype \|S8; allowed: numbers"),
    ("actions", "bytes", r"actions of dtype \|S8; allowed: numbers"),
    ("terminations", "bytes", r"terminations of dtype \|S8; allowed: numbers"),
    ("rewards", "2-D", r"rewards of shape \(\d+, 2\); expected \(\d+,\), one per action"),
    ("terminations", "2-D", r"terminations of shape \(\d+, 2\); expected"),
    ("rewards", "short", r"rewards of shape \(\d+,\); expected \(\d+,\), one per action"),
    ("terminations", "short", r"terminations of shape"),
    ("rewards", "nan", r"NaN or Inf rewards \(in float32\); allowed: finite numbers"),
    ("rewards", "beyond float32", r"NaN or Inf rewards \(in float32\)"),
    ("observations", "beyond float32", r"NaN or Inf observations \(in float32\)"),
    ("terminations", "not a flag", r"terminations other than true/false \(0/1\)"),
])
def test_episodes_edited_in_the_file_give_one_dataset_error(minari_root, pick_env, expert_episodes, name, edit,
                                                             message):
    """An episode array of the wrong type, shape or range in a readable HDF5 file is refused with one
    DatasetError naming the episode and the array (found by tests/fuzz: tracebacks and NaN rewards before)."""
    import h5py

    path = write_dataset("pick_cube/edited-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                         pick_env.single_observation_space, pick_env.single_action_space)
    with h5py.File(path / "data" / "main_data.hdf5", "r+") as file:
        where = f"episode_1/{name}"
        data = _edit(file[where][()], edit)
        del file[where]
        file.create_dataset(where, data=data)
    with pytest.raises(DatasetError, match=rf"episode 1 has {message}"):
        load_transitions(path, env_spec(pick_env, "robo_rl/ArmPickCube-v0"))


@pytest.mark.parametrize("total", [3_000_000_000, 5, 2, 3.0, "3"])
def test_a_total_episodes_the_data_does_not_hold_is_refused(minari_root, pick_env, expert_episodes, total):
    """metadata.json's total_episodes must be the number of episodes stored (found by tests/fuzz: Minari takes it
    as it is, and 3e9 became a 24 GB index array, a hang; 2 silently dropped an episode)."""
    path = write_dataset("pick_cube/count-v0", expert_episodes, "robo_rl/ArmPickCube-v0",
                         pick_env.single_observation_space, pick_env.single_action_space)
    metadata = json.loads((path / "data" / "metadata.json").read_text())
    assert metadata["total_episodes"] == 3
    metadata["total_episodes"] = total
    (path / "data" / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(DatasetError, match=rf"metadata.json gives total_episodes {total!r}, the data holds 3 episodes"):
        load_transitions(path, env_spec(pick_env, "robo_rl/ArmPickCube-v0"))


def test_demos_with_camera_images_round_trip_through_minari_compactly(minari_root):
    import minari

    env = ArmVectorEnv("pick_cube", num_envs=2, robot="so_arm100",
                       cameras={"enabled": True, "width": 64, "height": 64, "workers": 1})
    try:
        episodes = record_episodes(env, env.expert_actions, episodes=2, seed=0)
        spec = env_spec(env, "robo_rl/SOArm100PickCube-v0")
        path = write_dataset("so_arm100_pick_cube/pixels-v0", episodes, "robo_rl/SOArm100PickCube-v0",
                             env.single_observation_space, env.single_action_space)
    finally:
        env.close()
    stored = next(minari.load_dataset("so_arm100_pick_cube/pixels-v0").iterate_episodes())  # without robo-rl
    assert stored.observations["wrist"].dtype == np.uint8 and stored.observations["wrist"].shape == (151, 64, 64, 3)
    raw = sum(e["observations"][k].nbytes for e in episodes for k in ("wrist", "front"))
    on_disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert on_disk < raw / 4  # Minari keeps images JPEG-compressed
    transitions = load_transitions("so_arm100_pick_cube/pixels-v0", spec)
    recorded = {k: np.concatenate([e["observations"][k][:-1] for e in episodes]) for k in ("state", "wrist", "front")}
    np.testing.assert_array_equal(transitions["obs"]["state"].numpy(), recorded["state"])  # the state is exact
    for name in ("wrist", "front"):
        loaded = transitions["obs"][name]
        assert loaded.dtype == torch.uint8 and loaded.shape == recorded[name].shape
        assert np.abs(loaded.numpy().astype(int) - recorded[name]).mean() < 8  # JPEG: a few levels on average
    # a dataset without images does not feed a run on the cameras, and the reverse
    plain = ArmVectorEnv("pick_cube", num_envs=2, robot="so_arm100")
    write_dataset("so_arm100_pick_cube/state-v0", record_episodes(plain, plain.expert_actions, episodes=1, seed=0),
                  "robo_rl/SOArm100PickCube-v0", plain.single_observation_space, plain.single_action_space)
    with pytest.raises(DatasetError, match="has no camera images; the env robo_rl/SOArm100PickCube-v0 observes"):
        load_transitions("so_arm100_pick_cube/state-v0", spec)
    with pytest.raises(DatasetError, match="has observations"):
        load_transitions("so_arm100_pick_cube/pixels-v0", env_spec(plain, "robo_rl/SOArm100PickCube-v0"))


def test_recording_gives_up_on_an_expert_that_never_succeeds_and_keeps_what_was_accepted(pick_env):
    """expert_noise=10 (its allowed maximum) recorded forever without a word; a Ctrl-C lost every accepted episode
    of a scripted recording (the README says it keeps them, as for a person's)."""
    from robo_rl.datasets import NothingAccepted

    def still(obs):
        return np.zeros((pick_env.num_envs, pick_env.single_action_space.shape[0]), np.float32)

    with pytest.raises(NothingAccepted, match="8 episodes in a row were not accepted .*0 of 2 accepted before"):
        record_episodes(pick_env, still, episodes=2, seed=0, give_up_after=8)
    accepted, calls = [], [0]

    def interrupted_expert(obs):
        calls[0] += 1
        if accepted:  # the first episode is in: the operator presses Ctrl-C
            raise KeyboardInterrupt
        return pick_env.expert_actions(obs)

    with pytest.raises(KeyboardInterrupt):
        record_episodes(pick_env, interrupted_expert, episodes=50, seed=0, accepted=accepted)
    assert len(accepted) >= 1 and all(bool(e["is_success"][-1]) for e in accepted)


def _write(pick_env, episodes, dataset_id="pick_cube/test-v0"):
    return write_dataset(dataset_id, episodes, "robo_rl/ArmPickCube-v0", pick_env.single_observation_space,
                         pick_env.single_action_space)


def test_a_ctrl_c_while_the_dataset_is_written_does_not_stop_the_write(minari_root, pick_env, expert_episodes,
                                                                       monkeypatch, capsys):
    """A second Ctrl-C (the first kept the accepted episodes) during the write left a partial HDF5 file and a
    metadata.json of 0 episodes: every episode lost, and the id taken."""
    import os
    import signal

    import minari

    write = minari.create_dataset_from_buffers

    def interrupted_write(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C at the start of the write
        return write(*args, **kwargs)

    monkeypatch.setattr(minari, "create_dataset_from_buffers", interrupted_write)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a command: Ctrl-C raises
    try:
        try:
            path = _write(pick_env, expert_episodes)
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C stopped the write")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "they are kept (Ctrl-C waits)" in capsys.readouterr().out
    assert minari.load_dataset("pick_cube/test-v0").total_episodes == 3 and path.is_dir()


def test_a_write_that_fails_leaves_no_dataset_and_no_staging(minari_root, pick_env, expert_episodes, monkeypatch):
    """The dataset appears whole or not at all: a failure part-way left a dataset with metadata of 0 episodes, which
    blocked its id and read as empty."""
    import minari

    write = minari.create_dataset_from_buffers

    def failing_write(*args, **kwargs):
        write(*args, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(minari, "create_dataset_from_buffers", failing_write)
    with pytest.raises(OSError, match="disk full"):
        _write(pick_env, expert_episodes)
    assert not (minari_root / "pick_cube" / "test-v0").exists()
    assert [p.name for p in minari_root.iterdir() if p.name.startswith(".")] == []
    monkeypatch.setattr(minari, "create_dataset_from_buffers", write)
    _write(pick_env, expert_episodes)  # the id is still free
    assert minari.list_local_datasets().keys() == {"pick_cube/test-v0"}


@pytest.mark.parametrize("root, message", [
    ("a_file", r"is not a folder \(the root is MINARI_DATASETS_PATH="),
    ("", "MINARI_DATASETS_PATH is set but empty"),
])
def test_a_root_the_dataset_cannot_be_written_under_is_refused_before_recording(tmp_path, monkeypatch, root,
                                                                                  message):
    """These were found only after a recording (an hour of teleoperation), and its episodes were lost."""
    from robo_rl.datasets import check_new_dataset

    if root:
        (tmp_path / root).write_text("not a folder")
        root = str(tmp_path / root)
    monkeypatch.setenv("MINARI_DATASETS_PATH", root)
    with pytest.raises(DatasetError, match=message):
        check_new_dataset("pick_cube/test-v0")


def test_a_relative_root_writes_a_whole_dataset(tmp_path, monkeypatch, pick_env, expert_episodes):
    """Minari took a relative root relative to each file it wrote: the write failed half-way, leaving metadata of 0
    episodes beside the data."""
    import minari

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINARI_DATASETS_PATH", "relative_root")
    path = _write(pick_env, expert_episodes)
    assert path == tmp_path / "relative_root" / "pick_cube" / "test-v0"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "relative_root"))
    assert minari.load_dataset("pick_cube/test-v0").total_episodes == 3


def test_each_recorded_episode_names_the_seed_that_resets_to_its_start_or_none():
    """Every episode stored the recording's seed, though only a one-env batch's first episode starts there."""
    one = ArmVectorEnv("pick_cube", num_envs=1, nthread=1)
    episodes = record_episodes(one, one.expert_actions, episodes=2, seed=7)
    assert [e["seed"] for e in episodes] == [7, None]
    start, _ = one.reset(seed=7)
    np.testing.assert_array_equal(episodes[0]["observations"][0], np.asarray(start)[0])
    four = ArmVectorEnv("pick_cube", num_envs=4, nthread=1)
    assert {e["seed"] for e in record_episodes(four, four.expert_actions, episodes=3, seed=7)} == {None}


def test_demos_recorded_with_another_reward_or_control_are_refused(minari_root, pick_env, expert_episodes):
    """Dense demos fed a sparse run (449 reward values where the run has 0 and 1), and 50 Hz demos a 25 Hz run, without
    a word: the dataset recorded only the env's id."""
    import minari

    spec = env_spec(pick_env, "robo_rl/ArmPickCube-v0")
    write_dataset("pick_cube/test-v0", expert_episodes, "robo_rl/ArmPickCube-v0", pick_env.single_observation_space,
                  pick_env.single_action_space, env_config={})
    assert minari.load_dataset("pick_cube/test-v0").spec.env_spec.kwargs["config"] == {}  # recover_environment's
    for run, key in [({"dense": False}, "dense=True, the run has False"),
                     ({"control_hz": 25.0, "substeps": 20}, "control_hz=50.0, the run has 25.0"),
                     ({"action_scale": 0.005}, "action_scale=0.02, the run has 0.005")]:
        with pytest.raises(DatasetError, match=f"was recorded with env.overrides.{key}"):
            load_transitions("pick_cube/test-v0", spec, run)
    # what does not change a transition's meaning: domain randomization, where episodes start, when they are cut off
    load_transitions("pick_cube/test-v0", spec, {"randomization": {"enabled": True}, "episode_seconds": 5.0})
    write_dataset("pick_cube/old-v0", expert_episodes, "robo_rl/ArmPickCube-v0", pick_env.single_observation_space,
                  pick_env.single_action_space)  # as before env configs were recorded
    with pytest.warns(UserWarning, match="records no env config"):
        load_transitions("pick_cube/old-v0", spec, {"dense": False})
