"""Compile generated policy C for this host and call it from Python (ctypes): the C in the loop.

`CompiledPolicy(c_dir)` builds `<prefix>.c` into a shared library with the system C compiler, runs its
self-test (the constants' checksum and the recorded pairs) and exposes `step(obs) -> (action, status)` and
`self_test()`, so the simulator can fly the exact C a microcontroller runs and tests can compare it with
PyTorch. A policy whose weights changed after export is refused at load (`PolicyCheckError`); the C
itself answers `POLICY_INVALID_WEIGHTS` to every step as well.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

import numpy as np

from robo_rl.export.errors import CompileError, PolicyCheckError

# ISO C99 without contraction: the generic kernel then sums exactly in source order
HOST_CFLAGS = ("-std=c99", "-pedantic", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC")


# policy_status_t of the generated C
STATUS_OK, STATUS_INVALID_INPUT, STATUS_INVALID_OUTPUT, STATUS_INVALID_WEIGHTS = 0, 1, 2, 3


def find_c_compiler() -> str:
    """The host C compiler (cc or gcc); CompileError if there is none."""
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise CompileError("no C compiler found (install gcc: apt-get install gcc)")


class CompiledPolicy:
    """The generated policy C of `c_dir`, compiled for the host and loaded.

    Args:
        c_dir: folder with `<prefix>.c` and `<prefix>.h`.
        prefix: the generator's prefix.
        fma_kernel: compile the fused multiply-add kernel (the Cortex-M4F one) instead of the generic one.
        build_dir: where the library goes (default: a temporary directory).
        defines: extra preprocessor definitions, e.g. ("POLICY_STATIC_SCRATCH",).
        verify: run the C self-test at load and raise PolicyCheckError if it fails (False: load anyway,
            e.g. to look at a broken policy; its steps then return POLICY_INVALID_WEIGHTS if the constants
            changed).
    """

    def __init__(self, c_dir: str | Path, prefix: str = "policy", fma_kernel: bool = False,
                 build_dir: str | Path | None = None, defines: tuple[str, ...] = (), verify: bool = True):
        c_dir = Path(c_dir)
        source = c_dir / f"{prefix}.c"
        if not source.is_file():
            raise FileNotFoundError(f"no generated C at {source}")
        if build_dir:
            build = Path(build_dir)
            build.mkdir(parents=True, exist_ok=True)
        else:  # a folder of our own, removed with this object (or at exit)
            build = Path(tempfile.mkdtemp(prefix="robo_rl_c_"))
            weakref.finalize(self, shutil.rmtree, build, ignore_errors=True)
        digest = hashlib.sha256(source.read_bytes() + repr((fma_kernel, defines)).encode()).hexdigest()[:12]
        library = build / f"lib{prefix}_{digest}.so"
        command = [find_c_compiler(), *HOST_CFLAGS, f"-D{prefix.upper()}_KERNEL_FMA={int(fma_kernel)}",
                   *(f"-D{d}" for d in defines),
                   f"-I{c_dir}", str(source), "-o", str(library), "-lm"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise CompileError(f"{' '.join(command)} failed:\n{result.stderr}")
        self.library_path = library
        self._lib = ctypes.CDLL(str(library))
        self._step = getattr(self._lib, f"{prefix}_step")
        self._step.restype = ctypes.c_int
        self._step.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)]
        self._self_test = getattr(self._lib, f"{prefix}_self_test")
        self._self_test.restype = ctypes.c_int
        self._self_test.argtypes = [ctypes.POINTER(ctypes.c_float)]
        header = c_dir / f"{prefix}.h"
        self.obs_size = _read_define(header, f"{prefix.upper()}_OBS_SIZE")
        self.action_size = _read_define(header, f"{prefix.upper()}_ACTION_SIZE")
        if verify:
            failures, worst = self.self_test()
            if failures:
                raise PolicyCheckError(
                    f"{source} fails its self-test ({failures} failures, largest error {worst:.3g}): its weights or "
                    "safe action changed after export, or it no longer reproduces the recorded pairs; export it again")

    def step(self, obs: np.ndarray) -> tuple[np.ndarray, int]:
        """The C policy's action (float32) and status for one observation."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        if obs.shape != (self.obs_size,):
            raise ValueError(f"observation must have shape ({self.obs_size},), got {obs.shape}")
        action = np.empty(self.action_size, dtype=np.float32)
        status = self._step(obs.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                            action.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return action, int(status)

    def batch(self, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions (B, act) and statuses (B,) for observations (B, obs), one C call each."""
        observations = np.asarray(observations, dtype=np.float32)
        if observations.ndim != 2 or observations.shape[1] != self.obs_size:
            raise ValueError(f"observations must have shape (batch, {self.obs_size}), got {observations.shape}")
        actions = np.empty((len(observations), self.action_size), dtype=np.float32)
        statuses = np.empty(len(observations), dtype=np.int64)
        for i, obs in enumerate(observations):
            actions[i], statuses[i] = self.step(obs)
        return actions, statuses

    def self_test(self) -> tuple[int, float]:
        """(failing pairs, largest absolute error) of the C self-test over the recorded pairs."""
        worst = ctypes.c_float(0.0)
        failures = self._self_test(ctypes.byref(worst))
        return int(failures), float(worst.value)


def _read_define(header: Path, name: str) -> int:
    for line in header.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1] == name:
            return int(parts[2])
    raise CompileError(f"{header} does not define {name}")
