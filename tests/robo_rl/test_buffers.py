"""Replay with sources: tagging, HIL-SERL pooling, sampling ratios, truncation semantics, round trip."""

import pytest
import torch

from robo_rl.buffers import MixedReplay, ReplayBuffer, Source


def _transitions(n: int, value: float) -> dict:
    return dict(obs=torch.full((n, 3), value), action=torch.full((n, 2), value), reward=torch.full((n,), value),
                next_obs=torch.full((n, 3), value), terminated=torch.zeros(n))


def _mixed(capacity: int = 1000, ratio: float = 0.5) -> MixedReplay:
    return MixedReplay(ReplayBuffer(capacity, 3, 2), ReplayBuffer(capacity, 3, 2), ratio)


def test_interventions_count_as_online_and_offline():
    replay = _mixed()
    replay.add(Source.ONLINE, **_transitions(10, 0.0))
    replay.add(Source.DEMO, **_transitions(5, 1.0))
    replay.add(Source.INTERVENTION, **_transitions(3, 2.0))
    assert len(replay.online) == 13 and len(replay.offline) == 8
    online_sources = replay.online.storage["source"][:13].tolist()
    assert online_sources.count(Source.INTERVENTION) == 3 and Source.DEMO not in online_sources
    assert replay.offline.storage["source"][:8].tolist().count(Source.DEMO) == 5


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75])
def test_sampler_holds_the_offline_ratio(ratio):
    torch.manual_seed(0)
    replay = _mixed(ratio=ratio)
    replay.add(Source.ONLINE, **_transitions(500, 0.0))
    replay.add(Source.DEMO, **_transitions(50, 1.0))
    batch = replay.sample(4000)
    assert (batch.source == Source.DEMO).float().mean().item() == pytest.approx(ratio, abs=1e-9)
    # shuffled: the first and last quarter of the batch (future minibatches) both mix the sources
    for part in (batch.source[:1000], batch.source[-1000:]):
        assert (part == Source.DEMO).float().mean().item() == pytest.approx(ratio, abs=0.06)


def test_without_offline_data_everything_is_online():
    replay = _mixed()
    replay.add(Source.ONLINE, **_transitions(20, 0.0))
    assert (replay.sample(256).source == Source.ONLINE).all()


def test_ring_buffer_overwrites_the_oldest_and_round_trips():
    buffer = ReplayBuffer(8, 3, 2)
    for value in range(5):
        buffer.add(Source.ONLINE, **_transitions(3, float(value)))
    assert len(buffer) == 8
    assert sorted(set(buffer.storage["reward"].tolist())) == [2.0, 3.0, 4.0]  # 15 written, last 8 kept
    copy = ReplayBuffer(8, 3, 2)
    copy.load_state_dict(buffer.state_dict())
    assert copy.position == buffer.position and torch.equal(copy.storage["obs"], buffer.storage["obs"])
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(16, 3, 2).load_state_dict(buffer.state_dict())


def test_bad_input_is_rejected():
    buffer = ReplayBuffer(8, 3, 2)
    with pytest.raises(ValueError, match="lack fields"):
        buffer.add(Source.ONLINE, obs=torch.zeros(1, 3))
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(4)
    with pytest.raises(ValueError, match="offline_ratio"):
        MixedReplay(buffer, buffer, 1.5)


@pytest.mark.parametrize("kwargs", [{}, {"critic_obs_dim": 5}, {"images": {"wrist": (4, 6, 3)}}])
def test_nbytes_is_what_the_storage_takes(kwargs):
    """The size robo_rl.train holds against the free memory before a run starts (buffer.capacity)."""
    buffer = ReplayBuffer(10, 3, 2, **kwargs)
    assert buffer.nbytes == sum(t.numel() * t.element_size() for t in buffer.storage.values())
