"""Replay with sources: every transition is tagged online, demo or intervention, and a sampler mixes them.

HIL-SERL semantics: an intervention transition counts as online AND offline data, so it is stored in
both pools. `MixedReplay.sample` draws `offline_ratio` of each batch from the offline pool (demos and
interventions) and the rest from the online pool (policy and intervention steps), RLPD-style 50/50 by
default; while the offline pool is empty every sample comes from the online pool.

Termination is stored; time-limit truncation is not (its `next_obs` is the last observation of the
episode and its target bootstraps).
"""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import torch

from robo_rl import observations
from robo_rl.observations import Observation


class Source(enum.IntEnum):
    """Where a transition came from."""

    ONLINE = 0
    DEMO = 1
    INTERVENTION = 2


class Batch(NamedTuple):
    """Transitions as the SAC update reads them: tensors with one row per transition."""

    obs: Observation  # (B, obs_dim), or with cameras a dict of "state" (B, obs_dim) and images (B, H, W, 3) uint8
    action: torch.Tensor  # (B, action_dim)
    reward: torch.Tensor  # (B,)
    next_obs: Observation  # as obs
    terminated: torch.Tensor  # (B,) 1.0 where the episode terminated (no bootstrap), else 0.0
    source: torch.Tensor | None = None  # (B,) int8 `Source` of each row; None: all online
    critic_obs: torch.Tensor | None = None  # (B, critic_obs_dim) privileged state for an asymmetric critic
    next_critic_obs: torch.Tensor | None = None

    @property
    def rows(self) -> int:
        """How many transitions."""
        return int(self.reward.shape[0])

    @property
    def critic_input(self) -> Observation:
        """What the critics see of the state: the privileged state where the batch has it, else obs."""
        return self.obs if self.critic_obs is None else self.critic_obs

    @property
    def next_critic_input(self) -> Observation:
        """`critic_input` of the next state."""
        return self.next_obs if self.next_critic_obs is None else self.next_critic_obs

    def map(self, function: Any) -> "Batch":
        """This batch with `function` applied to every tensor (absent fields stay absent)."""
        return Batch(*(None if value is None else observations.apply(function, value) for value in self))

    def chunk(self, parts: int) -> list["Batch"]:
        """`parts` consecutive minibatches of equal size (the last smaller if the rows do not divide)."""
        pieces = [None if value is None else _chunk(value, parts) for value in self]
        return [Batch(*(None if p is None else p[i] for p in pieces)) for i in range(parts)]

    @staticmethod
    def cat(batches: Sequence["Batch"]) -> "Batch":
        """The rows of `batches` (with the same fields present) one after another."""
        fields = zip(*batches)
        return Batch(*(None if values[0] is None else observations.cat(values) for values in fields))


def _chunk(value: Observation, parts: int) -> Sequence[Observation]:
    if isinstance(value, dict):
        pieces = {k: v.chunk(parts) for k, v in value.items()}
        return [{k: p[i] for k, p in pieces.items()} for i in range(len(next(iter(pieces.values()))))]
    return value.chunk(parts)


FIELDS = Batch._fields


class ReplayBuffer:
    """A ring buffer of transitions as tensors on `device`.

    Args:
        capacity: transitions kept; the oldest are overwritten.
        obs_dim, action_dim: sizes of obs (its "state" vector where there are images) and action.
        critic_obs_dim: if set, also stores critic_obs/next_critic_obs (privileged state) of that size.
        images: camera images of a dict observation by name, (height, width, 3) each, stored as uint8.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, critic_obs_dim: int | None = None,
                 device: str | torch.device = "cpu", images: Mapping[str, Sequence[int]] | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.device = capacity, torch.device(device)
        self.images = {name: tuple(shape) for name, shape in (images or {}).items()}
        self.shapes: dict[str, tuple[int, ...]] = {"action": (action_dim,), "reward": (), "terminated": ()}
        for prefix in ("obs", "next_obs"):
            if self.images:
                self.shapes[f"{prefix}.{observations.STATE}"] = (obs_dim,)
                self.shapes.update({f"{prefix}.{name}": shape for name, shape in self.images.items()})
            else:
                self.shapes[prefix] = (obs_dim,)
        if critic_obs_dim:
            self.shapes.update(critic_obs=(critic_obs_dim,), next_critic_obs=(critic_obs_dim,))
        self._storage: dict[str, torch.Tensor] | None = None  # allocated on first use
        self.position = 0  # next slot to write
        self.size = 0

    @property
    def nbytes(self) -> int:
        """The bytes `storage` takes on `device` once allocated (every field of `capacity` rows, and the source tags)."""
        row = sum(math.prod(shape) * self._dtype(key).itemsize for key, shape in self.shapes.items())
        return self.capacity * (row + torch.int8.itemsize)

    def _dtype(self, key: str) -> torch.dtype:
        return torch.uint8 if key.split(".")[-1] in self.images else torch.float32

    @property
    def storage(self) -> dict[str, torch.Tensor]:
        """Field name -> tensor (capacity, ...); the memory is taken when first needed."""
        if self._storage is None:
            self._storage = {k: torch.zeros((self.capacity, *s), device=self.device, dtype=self._dtype(k))
                             for k, s in self.shapes.items()}
            self._storage["source"] = torch.zeros(self.capacity, dtype=torch.int8, device=self.device)
        return self._storage

    def __len__(self) -> int:
        return self.size

    def add(self, source: Source | int, **transitions: Any) -> None:
        """Append n transitions given as arrays (n, ...) per field, all tagged `source` (obs and next_obs as
        the env gives them: vectors, or dicts of the state and the images)."""
        transitions = {name: value for key, field in transitions.items()
                       for name, value in (observations.flat(key, field).items() if key in ("obs", "next_obs")
                                           and isinstance(field, Mapping) else ((key, field),))}
        missing = set(self.shapes) - set(transitions)
        if missing:
            raise ValueError(f"transitions lack fields {sorted(missing)}")
        n = int(torch.as_tensor(transitions["reward"]).shape[0])
        if n > self.capacity:
            transitions = {k: v[-self.capacity:] for k, v in transitions.items()}
            n = self.capacity
        # the ring's next n slots: a slice unless they wrap around
        end = self.position + n
        index: slice | torch.Tensor = (slice(self.position, end) if end <= self.capacity
                                       else torch.arange(self.position, end, device=self.device) % self.capacity)
        for key, value in transitions.items():
            if key not in self.storage:
                raise ValueError(f"unknown field {key!r}; fields: {', '.join(self.storage)}")
            target = self.storage[key]
            target[index] = torch.as_tensor(value, device=self.device, dtype=target.dtype).reshape(n, *target.shape[1:])
        self.storage["source"][index] = int(source)
        self.position = (self.position + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Batch:
        """n transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty buffer")
        index = torch.randint(self.size, (n,), device=self.device, generator=generator)
        fields = {k: v.index_select(0, index) for k, v in self.storage.items()}  # 3x faster than v[index] on a CPU
        return self._batch(fields)

    def _batch(self, fields: Mapping[str, torch.Tensor]) -> Batch:
        """A Batch of flat stored fields (obs and next_obs reassembled)."""
        obs, next_obs = observations.unflat("obs", fields), observations.unflat("next_obs", fields)
        rest = {k: v for k, v in fields.items() if not (k.startswith("obs") or k.startswith("next_obs"))}
        return Batch(obs=obs, next_obs=next_obs, **rest)

    def state_dict(self) -> dict[str, Any]:
        """The filled part of the storage and the write position, for checkpoints."""
        storage = {k: v[: self.size].clone() for k, v in self.storage.items()} if self.size else {}
        return {"storage": storage, "position": self.position, "size": self.size, "capacity": self.capacity}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what `state_dict` returned (same capacity and field sizes)."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity {state['capacity']} in the checkpoint, {self.capacity} configured")
        for key, value in state["storage"].items():
            if key not in self.storage or tuple(value.shape[1:]) != tuple(self.storage[key].shape[1:]):
                raise ValueError(f"buffer field {key!r} does not match this configuration")
            self.storage[key][: len(value)] = value.to(self.device)
        self.position, self.size = int(state["position"]), int(state["size"])


def free_memory(device: torch.device) -> int | None:
    """The bytes a new allocation can take on `device`: what the CUDA driver reports free on that GPU, else the
    machine's available RAM (Linux's MemAvailable, within the process's cgroup limit); None where unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    free: list[int] = []
    try:
        with open("/proc/meminfo") as meminfo:
            free += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    except OSError:  # not Linux
        pass
    try:  # a container's limit (cgroup v2), which MemAvailable does not show
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            free.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(free) if free else None


class MixedReplay:
    """Online and offline pools sampled in a fixed ratio (HIL-SERL: interventions go to both)."""

    def __init__(self, online: ReplayBuffer, offline: ReplayBuffer, offline_ratio: float = 0.5):
        if not 0.0 <= offline_ratio <= 1.0:
            raise ValueError(f"offline_ratio must be in [0, 1], got {offline_ratio}")
        self.online, self.offline, self.offline_ratio = online, offline, offline_ratio

    def add(self, source: Source | int, **transitions: Any) -> None:
        """Store transitions by source: online -> online pool, demo -> offline, intervention -> both."""
        if source in (Source.ONLINE, Source.INTERVENTION):
            self.online.add(source, **transitions)
        if source in (Source.DEMO, Source.INTERVENTION):
            self.offline.add(source, **transitions)

    def __len__(self) -> int:
        return len(self.online) + len(self.offline)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Batch:
        """n transitions: round(n * offline_ratio) from the offline pool (if it has data), the rest online."""
        n_offline = round(n * self.offline_ratio) if len(self.offline) else 0
        if len(self.online) == 0:
            n_offline = n
        if n_offline == 0:
            return self.online.sample(n, generator)
        if n_offline == n:
            return self.offline.sample(n, generator)
        online, offline = self.online.sample(n - n_offline, generator), self.offline.sample(n_offline, generator)
        # shuffled, so that every minibatch cut from the batch keeps the ratio in expectation
        order = torch.randperm(n, device=self.online.device, generator=generator)
        return Batch.cat([online, offline]).map(lambda value: value.index_select(0, order))

    def state_dict(self) -> dict[str, Any]:
        """Both pools, for checkpoints."""
        return {"online": self.online.state_dict(), "offline": self.offline.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore both pools."""
        self.online.load_state_dict(state["online"])
        self.offline.load_state_dict(state["offline"])
