"""The SAC update: shapes, ensemble targets, truncation bootstrapping, temperature, activations, and the
functional update against plain autograd, compiled against eager."""

import copy
import subprocess
import sys

import pytest
import torch

from robo_rl.agents import onednn_matmul
from robo_rl.agents.networks import ACTIVATIONS, CriticEnsemble, TanhGaussianActor
from robo_rl.agents.sac import SAC, SACConfig
from robo_rl.buffers import Batch, Source


def _batch(n: int, obs_dim: int = 6) -> Batch:
    return Batch(obs=torch.randn(n, obs_dim), action=torch.rand(n, 2), reward=torch.randn(n),
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
    batch = _batch(64)._replace(reward=torch.ones(64), terminated=torch.ones(64))
    for _ in range(400):
        agent.update(batch)
    q = agent.critic(batch.obs, batch.action)
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
    with pytest.raises(RuntimeError, match="only acts"):  # no optimizers: it acts, resuming builds a trainable one
        restored.update(_batch(32))
    with pytest.raises(ValueError, match="actor_average_rate"):
        SAC(6, [0], [1], SACConfig(actor_average_rate=1.5))
    with pytest.raises(ValueError, match="actor_average_span"):
        SAC(6, [0], [1], SACConfig(actor_average_rate=0.1, actor_average_span=-1.0))
    plain = SAC(6, [0], [1], SACConfig())
    assert plain.actor_average is None and plain.policy_actor is plain.actor  # rate 0: the online actor


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_update_on_cuda():
    agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(16,), critic_hidden=(16,), batch_size=8), device="cuda")
    metrics = agent.update(_batch(64).map(lambda value: value.cuda()))
    assert metrics["critic_loss"].device.type == "cuda"


def test_filtered_behaviour_cloning_pulls_towards_demonstrated_actions_on_offline_rows_only():
    """A one-step task whose best action is the demonstrated one: the cloning term moves the policy's mean
    action towards it faster than the critic alone; rows from online collection never carry the term."""
    best = torch.tensor([0.8, 0.2])

    def batch(n: int = 128) -> Batch:
        b = _batch(n)
        b.action[n // 2:] = best  # the demonstrated half
        source = torch.full((n,), int(Source.ONLINE), dtype=torch.int8)
        source[n // 2:] = int(Source.DEMO)
        return b._replace(reward=-((b.action - best) ** 2).sum(1), terminated=torch.ones(n), source=source)

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
    online_only.source[:] = int(Source.ONLINE)
    agent = SAC(6, [0, 0], [1, 1], SACConfig(actor_hidden=(32,), critic_hidden=(32,), num_critics=2,
                                             critic_updates_per_actor_update=1, batch_size=128, bc_weight=1.0))
    assert agent.update(online_only)["bc_loss"].item() == 0.0


def _asymmetric_agent(**overrides) -> SAC:
    """A small agent that uses every option of the update: an ensemble of 3 with a subset target, LayerNorm,
    two critic steps per actor step, an asymmetric critic, filtered cloning and an actor average (whose rate
    1 / (1 + 3 n) at actor step n meets its floor 0.1 at the third step)."""
    config = dict(actor_hidden=(16, 16), critic_hidden=(16, 16), num_critics=3, critic_subsample=2,
                  critic_updates_per_actor_update=2, batch_size=32, bc_weight=1.0, actor_average_rate=0.1,
                  actor_average_span=3.0, actor_lr=1e-2, critic_lr=1e-2, temperature_lr=1e-2)
    config = SACConfig(**(config | overrides))
    return SAC(6, [0, 0], [1, 1], config, critic_obs_dim=8)


def _asymmetric_batch(n: int = 64) -> Batch:
    return _batch(n)._replace(
        critic_obs=torch.randn(n, 8), next_critic_obs=torch.randn(n, 8), terminated=(torch.rand(n) < 0.2).float(),
        source=torch.where(torch.rand(n) < 0.5, int(Source.DEMO), int(Source.ONLINE)).to(torch.int8))


def _reference_update(agent: SAC, batch: Batch, noise: dict) -> None:
    """The same update written the usual way, with autograd and each optimizer's own `step()`."""
    config = agent.config
    minibatches = [Batch(*(v.chunk(2)[i] for v in batch)) for i in range(2)]
    alpha = agent.log_temperature.exp().detach()
    for mb, next_noise, order in zip(minibatches, noise["next_action"], noise["critic_order"]):
        with torch.no_grad():
            next_action, next_log_prob = agent.actor.sample(mb.next_obs, next_noise)
            next_q = agent.target_critic(mb.next_critic_obs, next_action)[order.argsort()[:2]].min(0).values
            target = mb.reward + config.discount * (1 - mb.terminated) * (next_q - alpha * next_log_prob)
        loss = ((agent.critic(mb.critic_obs, mb.action) - target) ** 2).mean(1).sum()
        agent.critic_optimizer.zero_grad()
        loss.backward()
        agent.critic_optimizer.step()
        with torch.no_grad():
            for target_p, p in zip(agent.target_critic.parameters(), agent.critic.parameters()):
                target_p.lerp_(p, config.tau)
    agent.critic.requires_grad_(False)
    action, log_prob = agent.actor.sample(mb.obs, noise["action"])
    actor_q = agent.critic(mb.critic_obs, action).mean(0)
    with torch.no_grad():
        keep = ((mb.source != 0) & (agent.critic(mb.critic_obs, mb.action).mean(0) > actor_q)).float()
    bc = (keep * ((agent.actor.deterministic(mb.obs) - mb.action) ** 2).sum(-1)).sum() / keep.sum().clamp(min=1)
    actor_loss = (alpha * log_prob - actor_q).mean() + config.bc_weight * actor_q.detach().abs().mean() * bc
    agent.actor_optimizer.zero_grad()
    actor_loss.backward()
    agent.actor_optimizer.step()
    agent.critic.requires_grad_(True)
    steps = agent.actor_optimizer.state[agent.actor.mean.weight]["step"].item()
    rate = max(config.actor_average_rate, 1.0 / (1.0 + config.actor_average_span * steps))
    with torch.no_grad():
        for average, p in zip(agent.actor_average.parameters(), agent.actor.parameters()):
            average.lerp_(p, rate)
    temperature_loss = agent.log_temperature.exp() * (-log_prob.detach().mean() - agent.target_entropy)
    agent.temperature_optimizer.zero_grad()
    temperature_loss.backward()
    agent.temperature_optimizer.step()


def _assert_same_training_state(a: SAC, b: SAC, atol: float) -> None:
    for key, value in a.state_dict().items():
        torch.testing.assert_close(value, b.state_dict()[key], atol=atol, rtol=0, msg=key)
    for name in ("actor_optimizer", "critic_optimizer", "temperature_optimizer"):
        for p_a, p_b in zip(getattr(a, name).param_groups[0]["params"], getattr(b, name).param_groups[0]["params"]):
            for key in ("step", "exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(getattr(a, name).state[p_a][key], getattr(b, name).state[p_b][key],
                                           atol=atol, rtol=0, msg=f"{name} {key}")


def test_update_equals_the_autograd_and_torch_optim_update():
    """The functional update (torch.func.grad, Adam applied to the optimizers' state) is plain SAC: three
    updates change networks, target, average, temperature and optimizer states as autograd + Adam.step do."""
    torch.manual_seed(0)
    agent = _asymmetric_agent()
    reference = _asymmetric_agent()
    reference.load_training_state(copy.deepcopy(agent.training_state()))  # optimizers share loaded tensors
    for _ in range(3):
        batch = _asymmetric_batch()
        noise = {"next_action": torch.randn(2, 32, 2), "action": torch.randn(32, 2), "critic_order": torch.rand(2, 3)}
        agent._update_with(batch, noise)
        _reference_update(reference, batch, noise)
    _assert_same_training_state(agent, reference, atol=1e-6)
    assert not torch.equal(agent.critic.net[0].weight, _asymmetric_agent().critic.net[0].weight)  # it did move


@pytest.mark.parametrize("critic_steps, graphs, all_products_in_onednn", [
    (2, {"_update_with"}, False), (3, {"_critic_step", "_last_step"}, False), (2, {"_update_with"}, True)],
    ids=["one graph per update", "one graph per step", "every product in oneDNN"])
def test_compiled_update_matches_the_eager_update_and_continues_after_a_restore(critic_steps, graphs,
                                                                               all_products_in_onednn, monkeypatch):
    """Two compiled agents in one process (the second reuses the first one's graphs on its own tensors), each
    against an eager twin, with a restored state (new optimizer-state tensors) in the middle. The last variant
    sends every matrix product of the compiled update to oneDNN (by default only large ones go)."""
    if all_products_in_onednn:
        if not onednn_matmul.available(torch.device("cpu")):
            pytest.skip("oneDNN products apply to x86 CPUs only")
        monkeypatch.setattr(onednn_matmul, "MIN_MULTIPLY_ADDS", 1)
        monkeypatch.setattr(onednn_matmul, "faster_than_mkl", onednn_matmul.available)  # Intel CPUs too
    torch.manual_seed(0)
    pairs = []
    for _ in range(2):
        compiled = _asymmetric_agent(compile=True, critic_updates_per_actor_update=critic_steps)
        eager = _asymmetric_agent(critic_updates_per_actor_update=critic_steps)
        eager.load_training_state(copy.deepcopy(compiled.training_state()))
        pairs.append((compiled, eager))
    assert set(pairs[0][0]._compiled_steps) == graphs
    batches = [_asymmetric_batch(32 * critic_steps) for _ in range(4)]
    for i, batch in enumerate(batches):
        for compiled, eager in pairs:
            torch.manual_seed(100 + i)  # the same random draws for both
            with torch.profiler.profile() as profile:
                compiled_metrics = compiled.update(batch)
            moved = any(event.name == "robo_rl::onednn_matmul" for event in profile.events())
            assert moved == all_products_in_onednn  # these networks are below the default threshold
            torch.manual_seed(100 + i)
            eager_metrics = eager.update(batch)
            for key, value in compiled_metrics.items():
                torch.testing.assert_close(value, eager_metrics[key], atol=1e-5, rtol=1e-5, msg=key)
            if i == 1:
                compiled.load_training_state(copy.deepcopy(eager.training_state()))
    for compiled, eager in pairs:
        assert compiled._compiled_steps is not None  # it ran compiled, not the eager fallback
        _assert_same_training_state(compiled, eager, atol=1e-5)
    assert not torch.allclose(pairs[0][0].critic.net[0].weight, pairs[1][0].critic.net[0].weight)


def test_update_runs_eagerly_with_a_warning_when_compilation_fails():
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    torch.manual_seed(0)
    agent = _asymmetric_agent(compile=True)
    # (config.patch, not monkeypatch: monkeypatch's undo deletes the entry, which hides it from every later
    # compilation in the process)
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/c++",)}):
        with pytest.warns(UserWarning, match="running it eagerly"):
            metrics = agent.update(_asymmetric_batch())
    assert all(torch.isfinite(v) for v in metrics.values()) and agent._compiled_steps is None
    torch._dynamo.reset()


@pytest.mark.parametrize("vendor, avx512, expected", [("GenuineIntel", True, False), ("AuthenticAMD", True, True),
                                                       ("AuthenticAMD", False, False)])
def test_onednn_products_are_used_only_where_mkl_lacks_avx512(vendor, avx512, expected, monkeypatch):
    """MKL runs AVX-512 on Intel CPUs (faster than oneDNN there) and AVX2 on others (slower where the CPU has
    AVX-512; on a Zen 3 without it the pass made the products 10-20% slower and the distillation's step 2x)."""
    monkeypatch.setattr(onednn_matmul, "_cpu_vendor", lambda: vendor)
    monkeypatch.setattr(onednn_matmul, "_has_avx512", lambda: avx512)
    cpu = torch.device("cpu")
    assert onednn_matmul.faster_than_mkl(cpu) == (expected and onednn_matmul.available(cpu))


def test_an_agent_loaded_to_act_does_not_load_torchs_compiler(tmp_path):
    # the optimizers' first construction imports torch._dynamo: about 1 s of every evaluation, export and suite
    config = SACConfig(actor_hidden=(16,), critic_hidden=(16,), compile=True)
    state = {"env_spec": {"observation_size": 6, "action_low": [0, 0], "action_high": [1, 1]},
             "agent_config": vars(config),
             "agent": {"model": SAC(6, [0, 0], [1, 1], config, trainable=False).state_dict()}}
    torch.save(state, tmp_path / "state.pt")
    code = ("import sys, torch; from robo_rl.agents.sac import SAC; "
            f"agent = SAC.from_checkpoint(torch.load({str(tmp_path / 'state.pt')!r}, weights_only=False)); "
            "agent.act(torch.zeros(1, 6), deterministic=True); print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr
