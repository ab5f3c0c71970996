"""SAC on camera observations (DrQ, SERL's image setup): the random shift, replay of uint8 images, an encoder
trained by the critics and not by the actor, learning from pixels alone, checkpoints whose probe covers the
encoder, and a training run on the arm's cameras."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robo_rl.agents.encoders import random_shift
from robo_rl.agents.sac import SAC, SACConfig
from robo_rl.buffers import MixedReplay, ReplayBuffer, Source
from robo_rl.checkpoint import CheckpointError, agent_from_checkpoint, check_policy_probe, policy_probe
from sim.errors import ConfigError
from tests.robo_rl.quick import CONFIGS

IMAGES = {"front": (16, 16, 3)}


def small_agent(**changes) -> SAC:
    settings = dict(actor_hidden=(64, 64), critic_hidden=(64, 64), num_critics=2, critic_subsample=2,
                    critic_updates_per_actor_update=1, batch_size=64, actor_lr=1e-3, critic_lr=1e-3,
                    init_temperature=0.01, compile=False,
                    encoder={"channels": [8, 8], "strides": [2, 1], "features": 16, "shift": 1})
    return SAC(2, -np.ones(1), np.ones(1), SACConfig(**{**settings, **changes}), images=IMAGES)


def test_random_shift_moves_each_image_by_whole_pixels_and_repeats_the_border():
    images = torch.arange(2 * 5 * 6 * 1, dtype=torch.uint8).reshape(2, 5, 6, 1)
    pad = 2
    shifts = torch.tensor([[pad, pad], [pad + 1, pad - 2]])  # the first stays, the second moves
    shifted = random_shift(images, shifts, pad)
    np.testing.assert_array_equal(shifted[0], images[0])
    padded = np.pad(images[1].numpy(), ((pad, pad), (pad, pad), (0, 0)), mode="edge")
    np.testing.assert_array_equal(shifted[1].numpy(), padded[pad + 1:pad + 1 + 5, pad - 2:pad - 2 + 6])
    assert shifted.dtype == torch.uint8


def test_images_are_replayed_as_uint8_with_their_state_and_survive_a_checkpoint():
    buffer = ReplayBuffer(10, 2, 1, images=IMAGES)
    obs = {"state": torch.randn(4, 2), "front": torch.randint(0, 256, (4, 16, 16, 3), dtype=torch.uint8)}
    next_obs = {"state": torch.randn(4, 2), "front": torch.randint(0, 256, (4, 16, 16, 3), dtype=torch.uint8)}
    buffer.add(Source.ONLINE, obs=obs, action=torch.zeros(4, 1), reward=torch.arange(4.0), next_obs=next_obs,
               terminated=torch.zeros(4))
    assert buffer.storage["obs.front"].dtype == torch.uint8
    batch = buffer.sample(32, torch.Generator().manual_seed(0))
    rows = batch.reward.long()  # reward i marks row i
    np.testing.assert_array_equal(batch.obs["front"], obs["front"][rows])
    np.testing.assert_array_equal(batch.next_obs["front"], next_obs["front"][rows])
    np.testing.assert_allclose(batch.obs["state"], obs["state"][rows])
    restored = ReplayBuffer(10, 2, 1, images=IMAGES)
    restored.load_state_dict(buffer.state_dict())
    np.testing.assert_array_equal(restored.storage["next_obs.front"], buffer.storage["next_obs.front"])
    mixed = MixedReplay(buffer, restored, 0.5)
    both = mixed.sample(8, torch.Generator().manual_seed(1))
    assert both.obs["front"].shape == (8, 16, 16, 3) and both.obs["front"].dtype == torch.uint8


def test_the_critic_trains_the_encoder_and_the_actor_does_not():
    torch.manual_seed(0)
    agent = small_agent()
    buffer = ReplayBuffer(256, 2, 1, images=IMAGES)
    n = 256
    obs = {"state": torch.randn(n, 2), "front": torch.randint(0, 256, (n, 16, 16, 3), dtype=torch.uint8)}
    buffer.add(Source.ONLINE, obs=obs, action=torch.rand(n, 1) * 2 - 1, reward=torch.randn(n), next_obs=obs,
               terminated=torch.zeros(n))
    before = {k: v.clone() for k, v in agent.encoder.state_dict().items()}
    batch = buffer.sample(64)
    features = agent.features(batch.obs)
    agent._actor_step(batch, torch.randn(64, 1), features)
    for key, value in agent.encoder.state_dict().items():
        torch.testing.assert_close(value, before[key])  # the actor's step leaves the encoder alone
    metrics = agent.update(batch)
    assert torch.isfinite(metrics["critic_loss"])
    changed = [k for k, v in agent.encoder.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("convs.") for k in changed) and any(k.startswith("projections.") for k in changed)


def test_an_agent_learns_where_to_point_from_pixels_alone():
    """A one-step task: a bright square lies somewhere on a row of the image; the reward is the negative distance
    of the action to its position. The state vector says nothing (zeros): only the image tells."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    agent = small_agent(critic_updates_per_actor_update=2)
    buffer = ReplayBuffer(4000, 2, 1, images=IMAGES)

    def scenes(n: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        column = rng.integers(1, 14, n)
        images = np.zeros((n, 16, 16, 3), np.uint8)
        for i, c in enumerate(column):
            images[i, 6:10, c - 1:c + 2] = 255
        target = torch.as_tensor((column - 7) / 6.0, dtype=torch.float32)[:, None]
        return {"state": torch.zeros(n, 2), "front": torch.as_tensor(images)}, target

    def error(n: int = 256) -> float:
        obs, target = scenes(n)
        return float((agent.act(obs, deterministic=True) - target).abs().mean())

    before = error()
    for _ in range(150):
        obs, target = scenes(32)
        action = agent.act(obs)
        reward = -(action - target).abs().squeeze(1)
        buffer.add(Source.ONLINE, obs=obs, action=action, reward=reward, next_obs=obs, terminated=torch.ones(32))
        for _ in range(2):
            agent.update(buffer.sample(128))
    after = error()
    print(f"mean |action - target|: {before:.3f} -> {after:.3f}")
    assert after < 0.5 * before and after < 0.25, (before, after)


def test_a_checkpoint_of_an_image_agent_reproduces_its_probe_and_refuses_changed_weights():
    agent = small_agent()
    spec = {"id": "test", "observation_size": 2, "action_size": 1, "action_low": [-1.0], "action_high": [1.0],
            "observation_images": {name: list(shape) for name, shape in IMAGES.items()}}
    state = {"env_spec": spec, "agent_config": {**vars(agent.config), "encoder": vars(agent.config.encoder)},
             "agent": agent.training_state(), "policy_probe": policy_probe(agent, 2), "critic_obs_dim": agent.critic_obs_dim,
             "path": "memory"}
    rebuilt = agent_from_checkpoint(state)
    obs = {"state": torch.randn(3, 2), "front": torch.randint(0, 256, (3, 16, 16, 3), dtype=torch.uint8)}
    torch.testing.assert_close(rebuilt.act(obs, deterministic=True), agent.act(obs, deterministic=True))
    rebuilt.encoder.projections["front"][0].weight.data.mul_(-3.0)  # the encoder counts in the probe
    with pytest.raises(CheckpointError, match="does not reproduce the actions recorded"):
        check_policy_probe(state, rebuilt)


def test_a_compiled_image_agent_is_refused_with_one_line():
    with pytest.raises(ValueError, match=r"agent.compile=true is for state observations.*agent.compile=false"):
        small_agent(compile=True)


def test_training_on_the_arms_cameras_checkpoints_resumes_and_evaluates(pixel_run, tmp_path):
    import shutil

    from hydra import compose, initialize_config_dir

    from robo_rl.checkpoint import load_checkpoint
    from robo_rl.evaluate import evaluate_run
    from robo_rl.train import Trainer
    from tests.conftest import PIXEL_RUN_OVERRIDES

    assert (pixel_run / "rollout.gif").stat().st_size > 0  # the policy acted on its own camera images
    state = load_checkpoint(pixel_run)
    assert state["counters"]["env_steps"] >= 480 and state["counters"]["updates"] > 0
    assert state["env_spec"]["observation_images"] == {"front": [24, 24, 3], "wrist": [24, 24, 3]}
    assert state["env_spec"]["observation_size"] == 7  # tool position and velocity, gripper opening
    agent_from_checkpoint(state)  # its probe, images included, reproduces
    run = shutil.copytree(pixel_run, tmp_path / "run")  # the session's run stays as it was for other tests
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        more = compose(config_name="train", overrides=[*PIXEL_RUN_OVERRIDES, "total_env_steps=720", f"resume={run}"])
    assert Trainer(more, run, overrides=["total_env_steps=720", f"resume={run}"]).run()["env_steps"] >= 720
    assert evaluate_run(run, episodes=2)["episodes"] == 2
    # the env config's "unknown option config.vehicle; valid options: task, control_hz, ..."
    with pytest.raises(ConfigError, match=r"vehicle=crazyflie_rltools: a vehicle flies quadrotors \(.*\); this run's "
                                          r"env is robo_rl/\S+"):
        evaluate_run(run, episodes=2, changes={"vehicle": "crazyflie_rltools"})


def test_a_pretrained_encoder_loads_from_a_local_file_and_stays_frozen(tmp_path):
    torch.manual_seed(1)
    donor = small_agent()
    weights = tmp_path / "encoder.pt"
    torch.save(donor.encoder.convs.state_dict(), weights)
    agent = small_agent(encoder={"channels": [8, 8], "strides": [2, 1], "features": 16, "shift": 1,
                                 "pretrained": str(weights)})
    for key, value in donor.encoder.convs.state_dict().items():
        torch.testing.assert_close(agent.encoder.convs.state_dict()[key], value)
    buffer = ReplayBuffer(64, 2, 1, images=IMAGES)
    obs = {"state": torch.randn(64, 2), "front": torch.randint(0, 256, (64, 16, 16, 3), dtype=torch.uint8)}
    buffer.add(Source.ONLINE, obs=obs, action=torch.rand(64, 1), reward=torch.randn(64), next_obs=obs,
               terminated=torch.zeros(64))
    projection = agent.encoder.projections["front"][0].weight.clone()
    for _ in range(3):
        agent.update(buffer.sample(64))
    for key, value in donor.encoder.convs.state_dict().items():
        torch.testing.assert_close(agent.encoder.convs.state_dict()[key], value)  # frozen
    assert not torch.equal(agent.encoder.projections["front"][0].weight, projection)  # the projection learns
    with pytest.raises(ValueError, match="agent.encoder.pretrained=.*is not a file"):
        small_agent(encoder={"channels": [8, 8], "strides": [2, 1], "pretrained": str(tmp_path / "missing.pt")})
    torch.save({"something": torch.zeros(3)}, tmp_path / "other.pt")  # e.g. another network's weights
    with pytest.raises(ValueError, match=r"agent.encoder.pretrained=.*other.pt is not a state dict of the encoder's"):
        small_agent(encoder={"channels": [8, 8], "strides": [2, 1], "pretrained": str(tmp_path / "other.pt")})


def test_images_too_small_for_the_encoder_are_one_error_naming_the_camera():
    with pytest.raises(ValueError, match=r"camera 'front': 12x12 images are too small for the encoder's convolutions"):
        SAC(2, -np.ones(1), np.ones(1), SACConfig(compile=False), images={"front": (12, 12, 3)})
