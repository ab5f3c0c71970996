"""The SAC update: shapes, ensemble targets, truncation bootstrapping, temperature, activations."""

import pytest
import torch

from robo_rl.agents.networks import ACTIVATIONS, CriticEnsemble, TanhGaussianActor
from robo_rl.agents.sac import SAC, SACConfig


def _batch(n: int, obs_dim: int = 6) -> dict:
    return dict(obs=torch.randn(n, obs_dim), action=torch.rand(n, 2), reward=torch.randn(n),
                next_obs=torch.randn(n, obs_dim), terminated=torch.zeros(n))


def test_actor_samples_inside_the_action_box_with_finite_log_probs():
    actor = TanhGaussianActor(6, 2, (32, 32), "relu", torch.tensor([0.0, -2.0]), torch.tensor([1.0, 2.0]))
    action, log_prob = actor.sample(torch.randn(1000, 6) * 10)
    assert action.shape == (1000, 2) and log_prob.shape == (1000,) and torch.isfinite(log_prob).all()
    assert (action[:, 0] >= 0).all() and (action[:, 0] <= 1).all() and (action[:, 1].abs() <= 2).all()


def test_critic_ensemble_members_are_independent():
    critic = CriticEnsemble(6, 2, (16, 16), "tanh", ensemble=5, layer_norm=True)
    q = critic(torch.randn(7, 6), torch.randn(7, 2))
    assert q.shape == (5, 7)
    assert not torch.allclose(q[0], q[1])  # separately initialized members


def test_terminal_transitions_do_not_bootstrap():
    torch.manual_seed(0)
    agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(16,), critic_hidden=(16,), num_critics=2,
                                             critic_updates_per_actor_update=1, batch_size=64, critic_lr=3e-3,
                                             discount=0.9))
    batch = _batch(64)
    batch["reward"] = torch.ones(64)
    batch["terminated"] = torch.ones(64)
    for _ in range(400):
        agent.update(batch)
    q = agent.critic(batch["obs"], batch["action"])
    assert q.mean().item() == pytest.approx(1.0, abs=0.15)  # Q = r, no discounted tail


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_update_runs_with_every_activation_and_the_ensemble_defaults(activation):
    config = SACConfig(actor_hidden=(16, 16), critic_hidden=(16, 16), activation=activation, batch_size=8)
    agent = SAC(6, [0, 0], [1, 1], config)
    metrics = agent.update(_batch(8 * config.critic_updates_per_actor_update))
    assert all(torch.isfinite(v) for v in metrics.values())
    assert agent.target_entropy == -1.0  # -dim(A)/2
    assert metrics["temperature"].item() == pytest.approx(0.01)  # SERL's initial temperature


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="critic_subsample"):
        SAC(6, [0], [1], SACConfig(num_critics=2, critic_subsample=3))
    with pytest.raises(ValueError, match="unknown activation"):
        SAC(6, [0], [1], SACConfig(activation="swishy"))


def test_actor_average_follows_the_actor_at_its_rate_and_is_the_policy():
    torch.manual_seed(0)
    rate = 0.25
    config = SACConfig(actor_hidden=(16,), critic_hidden=(16,), num_critics=2, critic_updates_per_actor_update=1,
                       batch_size=32, actor_lr=1e-2, actor_average_rate=rate)
    agent = SAC(6, [0, 0], [1, 1], config)
    agent.center_actor_on(torch.tensor([0.8, 0.2]))
    obs = torch.randn(5, 6)
    assert torch.equal(agent.policy_actor.deterministic(obs), agent.actor.deterministic(obs))  # same start
    before = [p.clone() for p in agent.actor_average.parameters()]
    agent.update(_batch(32))
    for old, average, online in zip(before, agent.actor_average.parameters(), agent.actor.parameters()):
        torch.testing.assert_close(average, old + rate * (online - old))
    assert not torch.allclose(agent.act(obs, deterministic=True), agent.actor.deterministic(obs))
    assert torch.equal(agent.act(obs, deterministic=True), agent.actor_average.deterministic(obs))
    # a checkpoint restores it
    state = {"env_spec": {"observation_size": 6, "action_low": [0, 0], "action_high": [1, 1]},
             "agent_config": vars(config), "agent": agent.training_state()}
    restored = SAC.from_checkpoint(state)
    assert torch.equal(restored.act(obs, deterministic=True), agent.act(obs, deterministic=True))
    with pytest.raises(ValueError, match="actor_average_rate"):
        SAC(6, [0], [1], SACConfig(actor_average_rate=1.5))
    plain = SAC(6, [0], [1], SACConfig())
    assert plain.actor_average is None and plain.policy_actor is plain.actor  # rate 0: the online actor


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_update_on_cuda():
    agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(16,), critic_hidden=(16,), batch_size=8), device="cuda")
    metrics = agent.update({k: v.cuda() for k, v in _batch(64).items()})
    assert metrics["critic_loss"].device.type == "cuda"


def test_filtered_behaviour_cloning_pulls_towards_demonstrated_actions_on_offline_rows_only():
    """A one-step task whose best action is the demonstrated one: the cloning term moves the policy's mean
    action towards it faster than the critic alone; rows from online collection never carry the term."""
    from robo_rl.buffers import Source

    best = torch.tensor([0.8, 0.2])

    def batch(n: int = 128) -> dict:
        b = _batch(n)
        b["action"][n // 2:] = best  # the demonstrated half
        b["reward"] = -((b["action"] - best) ** 2).sum(1)
        b["terminated"] = torch.ones(n)
        b["source"] = torch.full((n,), int(Source.ONLINE), dtype=torch.int8)
        b["source"][n // 2:] = int(Source.DEMO)
        return b

    def after(bc_weight: float, updates: int = 20) -> tuple[float, dict]:
        torch.manual_seed(0)
        agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(32,), critic_hidden=(32,), num_critics=2,
                                                 critic_updates_per_actor_update=1, batch_size=128,
                                                 bc_weight=bc_weight))
        probe = torch.randn(256, 6)
        start = (agent.actor.deterministic(probe) - best).norm(dim=1).mean().item()
        for _ in range(updates):
            metrics = agent.update(batch())
        return start - (agent.actor.deterministic(probe) - best).norm(dim=1).mean().item(), metrics

    plain, plain_metrics = after(0.0)
    cloned, cloned_metrics = after(10.0)
    assert plain_metrics["bc_loss"].item() == 0.0 and cloned_metrics["bc_loss"].item() > 0.0
    assert cloned > 2 * max(plain, 0.0) and cloned > 0.02, (cloned, plain)
    online_only = batch()
    online_only["source"][:] = int(Source.ONLINE)
    agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(32,), critic_hidden=(32,), num_critics=2,
                                             critic_updates_per_actor_update=1, batch_size=128, bc_weight=1.0))
    assert agent.update(online_only)["bc_loss"].item() == 0.0
