"""Scripted interventions: the trigger rule, the budget, and tagging in a training run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from robo_rl.buffers import Source
from robo_rl.interventions import ScriptedIntervener
from robo_rl.train import Trainer
from tests.robo_rl.quick import CONFIGS


def _expert(obs: np.ndarray) -> np.ndarray:
    return np.ones((len(obs), 2))


def test_takes_over_stalled_episodes_for_its_duration_within_budget():
    intervener = ScriptedIntervener(_expert, num_envs=3, patience=5, duration=4, budget=1.0)
    obs, policy = np.zeros((3, 1)), np.zeros((3, 2))
    masks = []
    for t in range(20):
        action, mask = intervener(obs, policy, env_steps=1000 + t)
        np.testing.assert_array_equal(action[mask], 1.0)  # the expert's action where it took over
        np.testing.assert_array_equal(action[~mask], 0.0)
        masks.append(mask)
        # env 0 improves every step, envs 1 and 2 stall; env 2's episode ends at t = 12
        intervener.observe(np.array([t, 0.0, 0.0]), done=np.array([False, False, t == 12]))
    masks = np.array(masks)
    assert not masks[:, 0].any()
    # best set at t = 0, no progress on t = 1..5: takeover for t = 6..9; the policy gets 5 steps again
    # (t = 9..13, counted from the takeover's last step) before the next takeover at t = 14..17
    np.testing.assert_array_equal(np.flatnonzero(masks[:, 1]), [6, 7, 8, 9, 14, 15, 16, 17])
    # env 2's episode restarts at t = 13: a fresh episode sets its best at t = 13 and stalls by t = 18
    np.testing.assert_array_equal(np.flatnonzero(masks[:, 2]), [6, 7, 8, 9, 19])
    assert intervener.total_steps == masks.sum()


def test_budget_and_deadline_limit_takeovers():
    stalled = dict(obs=np.zeros((4, 1)), policy_action=np.zeros((4, 2)))
    tight = ScriptedIntervener(_expert, num_envs=4, patience=1, duration=10, budget=0.1)
    for _ in range(2):  # a best reward, then no progress: every env stalled
        tight.observe(np.zeros(4), np.zeros(4, bool))
    _, mask = tight(**stalled, env_steps=200)  # budget 0.1 * 200 = 20 steps: two takeovers of 10
    assert mask.sum() == 2
    late = ScriptedIntervener(_expert, num_envs=4, patience=1, duration=10, budget=1.0, until_env_steps=100)
    for _ in range(2):
        late.observe(np.zeros(4), np.zeros(4, bool))
    assert not late(**stalled, env_steps=100)[1].any()


def test_training_with_scripted_interventions_tags_them_online_and_offline(tmp_path):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="train", overrides=[
            "env=pick_cube", "intervention=scripted", "intervention.patience=5", "intervention.budget=0.5",
            "num_envs=8", "torch_threads=1", "total_env_steps=1600", "learning_starts=800", "eval.episodes=4",
            "eval.interval_env_steps=1600", "checkpoint.interval_env_steps=1600", "agent.actor_hidden=[32,32]",
            "agent.critic_hidden=[32,32]", "agent.compile=false", "logging.progress_bar=false"])
    trainer = Trainer(cfg, tmp_path)
    summary = trainer.run()
    online, offline = trainer.replay.online, trainer.replay.offline
    tagged = int((online.storage["source"][: len(online)] == Source.INTERVENTION).sum())
    assert tagged == trainer.intervention_steps == summary["history"][-1]["intervention_steps"] > 0
    assert len(offline) == tagged and bool((offline.storage["source"][: len(offline)] == Source.INTERVENTION).all())
    assert len(online) == summary["env_steps"]
    assert tagged <= 0.5 * summary["env_steps"] + cfg.intervention.duration * cfg.num_envs
    # intervention transitions hold the expert's actions: the gripper command is exactly +-1
    gripper = offline.storage["action"][: len(offline), 3]
    assert bool(torch.isin(gripper, torch.tensor([-1.0, 1.0])).all())


@pytest.mark.parametrize("setting, message", [
    ({"patience": -5}, "intervention.patience must be a whole number of steps >= 1, got -5"),
    ({"duration": 0}, "intervention.duration must be a whole number of steps >= 1, got 0"),
    ({"budget": float("nan")}, r"intervention.budget must be a fraction in \[0, 1\], got nan"),
])
def test_each_bad_intervention_setting_is_named_with_its_value(setting, message):
    """One message named all three settings and no value, whichever was wrong."""
    with pytest.raises(ValueError, match=message):
        ScriptedIntervener(lambda obs: obs, 2, **setting)
