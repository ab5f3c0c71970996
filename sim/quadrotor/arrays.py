"""The arrays a quadrotor batch holds: numpy float64 on the MuJoCo paths, torch tensors on the torch path."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

RowsAllocator = Callable[..., torch.Tensor]  # shape -> an uninitialized float tensor, laid out for a kernel


class ArrayBackend:
    """Makes the batch's arrays for one backend: `xp` numpy, or torch on `device` in `dtype`.

    `allocate_rows` (torch only) lays out every float array the batch keeps across steps, e.g. in the rows
    the native step's kernel reads (`native_step.row_allocator`); None: plain contiguous tensors.
    """

    def __init__(self, xp: Any, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                 allocate_rows: RowsAllocator | None = None):
        self.xp, self.dtype = xp, dtype
        self.device = torch.device(device) if device is not None else None
        self.allocate_rows = allocate_rows

    def array(self, value: Any) -> Any:
        """`value` as a float array of the backend (feature-major rows (..., N) where it has several)."""
        if self.xp is not torch:
            return np.array(value, dtype=np.float64)
        tensor = torch.as_tensor(value, device=self.device, dtype=self.dtype)
        if self.allocate_rows is None or tensor.dim() == 0:
            return tensor
        return self.allocate_rows(*tensor.shape).copy_(tensor)

    def float64(self, value: Any) -> Any:
        """`value` as a float64 array of the backend (episode starts keep float64)."""
        if self.xp is torch:
            return torch.as_tensor(value, device=self.device, dtype=torch.float64)
        return np.array(value, dtype=np.float64)

    def index(self, value: Any) -> Any:
        """`value` as an int64 array of the backend."""
        if self.xp is torch:
            return torch.as_tensor(value, device=self.device, dtype=torch.long)
        return np.array(value, dtype=np.int64)

    def arange(self, n: int) -> Any:
        """0, 1, ..., n - 1 as an int64 array of the backend."""
        return torch.arange(n, device=self.device) if self.xp is torch else np.arange(n)
