"""Gaussian observation noise for a batch, as windows into a table drawn once per seed.

Drawing fresh normals every step costs a pass of a random generator per value (torch.randn on 2 CPU
cores makes about 15M normals/s, slower than the simulator step it would feed) and gives different
streams on numpy, CPU torch and CUDA. Instead, a table of i.i.d. normals (features, N + span) is drawn
from the seeded numpy generator, and each step uses the columns [offset, offset + N) at a fresh uniform
offset: a zero-copy view, identical on every backend. Env i sees column offset + i, so its noise over
time is i.i.d. draws from the table (one repeat per `span` steps on average); within a step, all
values are distinct.

The span shrinks from 65536 as N grows past 512, keeping a float32 table of 18 rows under ~1.3 MB from 2048
to 8192 envs: a random window of a larger table is read from memory on every step, and a table that stays
in cache made the native quadrotor step 11-20% faster at 4096-8192 envs (2-core Zen 4 VM, paired timings:
bench/noise_table.py).
The price is a higher chance of a repeat: 1/span for any two steps of an env (1/4096 from 8192 envs up).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch


def default_span(num_envs: int) -> int:
    """Offsets of a table for `num_envs` envs: 65536 up to 512 envs, then 2**25 / N, at least 4096."""
    return min(65536, max(4096, 2**25 // max(num_envs, 1)))


class NoiseTable:
    """Standard-normal noise (features, N) per step for N envs, from a seeded table.

    Args:
        features: rows of noise per env.
        num_envs: N.
        span: number of distinct offsets (table width is N + span); by default `default_span(N)`.
        device, dtype: torch placement; None for numpy float64 arrays.
        allocate_rows: lays out the torch table (shape -> an uninitialized tensor, e.g. in the native step's
            kernel layout); None: a contiguous tensor.
    """

    def __init__(self, features: int, num_envs: int, span: int | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                 allocate_rows: Callable[..., torch.Tensor] | None = None):
        self.features, self.num_envs = features, num_envs
        self.span = default_span(num_envs) if span is None else span
        if self.span < 2:
            raise ValueError(f"a noise table needs a span of at least 2 offsets, got {self.span}")
        self.device, self.dtype, self.allocate_rows = device, dtype, allocate_rows
        self.table: Any = None

    def seed(self, rng: np.random.Generator) -> None:
        """Redraw the table from `rng`."""
        table = rng.standard_normal((self.features, self.num_envs + self.span))
        if self.device is None:
            self.table = table
            return
        tensor = torch.as_tensor(table, device=self.device, dtype=self.dtype)
        self.table = tensor if self.allocate_rows is None else self.allocate_rows(*tensor.shape).copy_(tensor)

    def window_offset(self, rng: np.random.Generator) -> int:
        """The random offset of `window`."""
        return int(rng.integers(self.span))

    def window_at(self, offset: int) -> Any:
        """Noise for every env, (features, N): the view of the table's columns from `offset`."""
        return self.table[:, offset : offset + self.num_envs]

    def window(self, rng: np.random.Generator) -> Any:
        """Noise for every env, (features, N): a view of the table at a random offset."""
        return self.window_at(self.window_offset(rng))

    def step_offset(self, rng: np.random.Generator) -> int:
        """The random offset of `step_windows`' first window (the second is one column further)."""
        return int(rng.integers(self.span - 1))

    def step_windows(self, rng: np.random.Generator) -> tuple[Any, Any]:
        """The noise of one autoreset step, two (features, N) views: every env's observation, and the last
        observation of the episodes that end in it.

        The second window is the first shifted by one column, so it costs no memory traffic of its own (a
        second window at its own offset is a second table read per step, ~8% of the native step at 8192
        envs). An ending env's last observation then shares its noise with the next env's observation of
        that step, never with its own next observation.
        """
        offset = self.step_offset(rng)
        return self.window_at(offset), self.window_at(offset + 1)

    def rows(self, rng: np.random.Generator, ids: Any) -> Any:
        """Noise for envs `ids` only, (features, len(ids)), drawn like one env's column of `window`."""
        return self.table[:, int(rng.integers(self.span)) + ids]
