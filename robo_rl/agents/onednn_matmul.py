"""Large fp32 matrix products of the compiled SAC update, computed by oneDNN on non-Intel x86 CPUs.

PyTorch sends CPU fp32 matmuls to MKL, which runs its AVX2 kernels on AMD processors; oneDNN, shipped in the
same wheel, picks its kernels by instruction set and runs AVX-512 where the CPU has it. On a 2-core Zen 5 EPYC
a 256x256x256 product took 85 us in oneDNN against 166 us in MKL (same fp32 arithmetic). oneDNN costs about
10 us more per call, so only products of at least `MIN_MULTIPLY_ADDS` move; the hover recipe's (128 rows,
128 units) stay with MKL. On Intel CPUs MKL runs AVX-512 itself and is the faster of the two, and on CPUs
without AVX-512 oneDNN has nothing faster to run, so SAC uses the pass only where `faster_than_mkl` says so.

`OneDNNMatmulPass` rewrites the graph that torch.compile builds after autograd, so forward and backward
products alike move, and the eager update is unchanged.
"""

from __future__ import annotations

import hashlib
import math
import platform
from pathlib import Path

import torch
from torch import Tensor
from torch._inductor.custom_graph_pass import CustomGraphPass

# Smallest product (multiply-adds per matrix) worth oneDNN's extra ~10 us per call. Zen 5, 2 threads, us per
# forward / weight-gradient / input-gradient product, MKL against oneDNN: 128x128x128 25/26/24 against
# 23/32/22 (stays), 256x128x128 46/46/45 against 31/47/31 (moves), 256x256x256 167/170/164 against 85/111/82.
MIN_MULTIPLY_ADDS = 1 << 22

_aten = torch.ops.aten


@torch.library.custom_op("robo_rl::onednn_matmul", mutates_args=(), device_types="cpu")
def onednn_matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for a (M, K) and b (K, N), or a (E, M, K) and b (E, K, N), computed by oneDNN."""
    def product(a: Tensor, b: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(a, b.t(), None, "none", [], "")
    if a.dim() == 2:
        return product(a, b)
    return torch.stack([product(a[i], b[i]) for i in range(a.shape[0])])


@onednn_matmul.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    return a.new_empty(*a.shape[:-1], b.shape[-1])


def available(device: torch.device) -> bool:
    """Whether `OneDNNMatmulPass` applies to graphs on `device`: an x86 CPU with PyTorch's oneDNN."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and platform.machine().lower() in ("x86_64", "amd64"))


def _cpuinfo_field(name: str) -> str | None:
    """The first `name` field of /proc/cpuinfo (None where there is none, as off Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_vendor() -> str:
    return _cpuinfo_field("vendor_id") or platform.processor()


def _has_avx512() -> bool:
    return "avx512f" in (_cpuinfo_field("flags") or "").split()


def faster_than_mkl(device: torch.device) -> bool:
    """Whether oneDNN's products beat MKL's on `device`: x86 CPUs other than Intel's with AVX-512, which MKL
    leaves to its AVX2 code there. On Intel CPUs MKL runs AVX-512 itself (an Intel Xeon, 2 threads: 97 us per
    256x256x256 product against oneDNN's 109 us, and the compiled 256-unit update 1.7x faster without the pass);
    on AMD CPUs without AVX-512 both run AVX2 and MKL is the faster (a 2-core Zen 3 EPYC: 248 against 285 us per
    256x256x256 product, 662 against 817 us at 4096x146x88)."""
    return available(device) and _cpu_vendor() != "GenuineIntel" and _has_avx512()


class OneDNNMatmulPass(CustomGraphPass):
    """A torch.compile post-grad pass: mm, bmm, addmm and baddbmm of fp32 CPU operands with at least
    `min_multiply_adds` (default `MIN_MULTIPLY_ADDS`) per product become `onednn_matmul`, plus the bias as an
    add, which Inductor fuses into the next elementwise kernel.

    Use: torch.compile(fn, options={"post_grad_custom_post_pass": OneDNNMatmulPass()}).
    """

    def __init__(self, min_multiply_adds: int | None = None):
        self.min_multiply_adds = MIN_MULTIPLY_ADDS if min_multiply_adds is None else min_multiply_adds

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target not in _PRODUCTS or not self._worth_it(node):
                continue
            has_bias = node.target in (_aten.addmm.default, _aten.baddbmm.default)
            if has_bias and (node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1):
                continue
            bias, a, b = node.args if has_bias else (None, *node.args)
            with graph.inserting_before(node):
                if not a.meta["val"].is_contiguous():
                    # oneDNN wants the left operand row-major: have Inductor transpose it in a compiled kernel
                    # (ATen's copy took 25 us for 256x256, a third of the product)
                    a_val = a.meta["val"]
                    a = graph.call_function(_aten.clone.default, (a,), {"memory_format": torch.contiguous_format})
                    a.meta["val"] = a_val.contiguous()
                product = graph.call_function(torch.ops.robo_rl.onednn_matmul.default, (a, b))
                product.meta["val"] = node.meta["val"]  # same shape, dtype and (contiguous) layout
                if has_bias:
                    product = graph.call_function(_aten.add.Tensor, (product, bias))
                    product.meta["val"] = node.meta["val"]
            node.replace_all_uses_with(product)
            graph.erase_node(node)

    def _worth_it(self, node: torch.fx.Node) -> bool:
        a, b = (arg.meta.get("val") for arg in node.args[-2:])
        if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.dtype != b.dtype or a.dtype != torch.float32:
            return False
        if a.device.type != "cpu" or not all(isinstance(n, int) for n in (*a.shape, b.shape[-1])):
            return False  # a dynamic shape: leave it to the default kernel
        return math.prod(a.shape[-2:]) * b.shape[-1] >= self.min_multiply_adds

    def uuid(self) -> str:
        """Inductor's cache key for the pass: this file and the threshold."""
        return hashlib.sha256(Path(__file__).read_bytes() + str(self.min_multiply_adds).encode()).hexdigest()


_PRODUCTS = (_aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default)
