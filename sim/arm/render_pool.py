"""Camera images of many simulations from worker processes, so that rendering keeps every core busy while the
simulator's process stays free of OpenGL.

Each worker is `python -m sim.arm.render_pool` with its own offscreen OpenGL context (EGL; OSMesa if EGL
cannot start) and a `sim.arm.cameras.CameraRenderer`. It owns a contiguous slice of the simulations. The
states, appearance rows and images travel through one shared memory file, mapped by every process; the
pipes carry only one byte per request and reply. The file is unlinked as soon as every worker has mapped it,
so nothing is left behind however the processes end.

A worker that dies or stops answering raises `RenderError` in the caller, with the worker's last words; no
call waits forever.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sim.arm.cameras import GL_BACKENDS, AppearanceLayout, CameraConfig
from sim.errors import ConfigError

FILE_PREFIX = "robo_rl_render_"
START_TIMEOUT_S = 60.0
RENDER_TIMEOUT_S = 60.0


class RenderError(RuntimeError):
    """A render worker failed: no OpenGL, a crash, or no answer in time."""


class SharedArrays:
    """Named arrays laid out in one file that several processes map."""

    def __init__(self, path: str | Path, shapes: dict[str, tuple[tuple[int, ...], str]], create: bool):
        self.offsets: dict[str, int] = {}
        size = 0
        for name, (shape, dtype) in shapes.items():
            size = -(-size // 64) * 64  # 64-byte alignment
            self.offsets[name] = size
            size += int(np.prod(shape)) * np.dtype(dtype).itemsize
        if create:
            with open(path, "wb") as file:
                file.truncate(max(size, 1))
        self.memory = np.memmap(path, dtype=np.uint8, mode="r+", shape=(max(size, 1),))
        self.arrays = {name: np.ndarray(shape, dtype, buffer=self.memory, offset=self.offsets[name])
                       for name, (shape, dtype) in shapes.items()}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]


def shared_shapes(num_envs: int, nq: int, ngeom: int, config: CameraConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """The shared arrays of a pool: states, appearance rows, cube sizes, which simulations to render, images."""
    layout = AppearanceLayout(len(config.names), ngeom)
    return {"qpos": ((num_envs, nq), "float64"), "appearance": ((num_envs, layout.size), "float64"),
            "geom_size": ((num_envs, ngeom, 3), "float64"), "wanted": ((num_envs,), "uint8"),
            "images": ((num_envs, len(config.names), config.height, config.width, 3), "uint8")}


def shared_folder() -> str:
    """Where the shared memory file is made: /dev/shm (memory) where it exists and is writable, else the
    temporary folder."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def default_workers(num_envs: int) -> int:
    """One worker per core this process may use, at most one per simulation."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, num_envs))


class RenderPool:
    """Worker processes rendering `num_envs` simulations of `model` through the cameras of `config`.

    Write states into `qpos`, appearance rows into `appearance` and sizes into `geom_size`, then
    `render(ids)`; the images are in `images` (num_envs, cameras, height, width, 3) uint8.
    """

    def __init__(self, model: Any, num_envs: int, config: CameraConfig, workers: int = 0):
        self.num_envs, self.config = num_envs, config
        if workers < 0:
            raise ConfigError(f"cameras.workers must be >= 0 (0: one per core), got {workers}")
        workers = min(workers or default_workers(num_envs), num_envs)  # a worker without simulations would idle
        self.shapes = shared_shapes(num_envs, model.nq, model.ngeom, config)
        handle, self.path = tempfile.mkstemp(prefix=FILE_PREFIX, dir=shared_folder())
        os.close(handle)
        self.workers: list[subprocess.Popen] = []
        try:
            self.shared = SharedArrays(self.path, self.shapes, create=True)
            self.shared["geom_size"][:] = model.geom_size
            bounds = np.linspace(0, num_envs, workers + 1).round().astype(int)
            self.slices = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
            payload = pickle.dumps({"model": model, "config": config, "shapes": self.shapes})
            self.backend = self._start(payload)
        except BaseException:
            self.close()
            raise
        finally:
            if os.path.exists(self.path):
                os.unlink(self.path)  # every worker has it mapped (or none will): nothing to leave behind

    def __getitem__(self, name: str) -> np.ndarray:
        return self.shared[name]

    @property
    def images(self) -> np.ndarray:
        """(num_envs, cameras, height, width, 3) uint8, as of the last `render`."""
        return self.shared["images"]

    def _start(self, payload: bytes) -> str:
        """Start the workers on the first backend that works; that backend's name."""
        failures = []
        for backend in GL_BACKENDS if self.config.backend == "auto" else (self.config.backend,):
            try:
                for lo, hi in self.slices:
                    self.workers.append(self._spawn(backend, lo, hi, payload))
                for worker in self.workers:
                    self._expect(worker, START_TIMEOUT_S, "start")
                return backend
            except RenderError as error:
                failures.append(f"{backend}: {error}")
                self._stop_workers()
        raise RenderError("cameras need an offscreen OpenGL and none started (" + "; ".join(failures)
                          + "); on Debian: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6 "
                          "(make system-deps)")

    def _spawn(self, backend: str, lo: int, hi: int, payload: bytes) -> subprocess.Popen:
        env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend,
               "LP_NUM_THREADS": "1",  # llvmpipe's own threads would compete with the other workers
               "OMP_NUM_THREADS": "1"}
        worker = subprocess.Popen([sys.executable, "-m", "sim.arm.render_pool", self.path, str(lo), str(hi)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        worker.stdin.write(struct.pack("<Q", len(payload)) + payload)
        worker.stdin.flush()
        return worker

    def _expect(self, worker: subprocess.Popen, timeout_s: float, what: str) -> None:
        ready, _, _ = select.select([worker.stdout], [], [], timeout_s)
        reply = os.read(worker.stdout.fileno(), 1) if ready else b""
        if reply == b"k":
            return
        if ready and reply == b"":
            worker.wait(timeout=5.0)
        elif not ready:
            worker.kill()
            worker.wait()
        error = worker.stderr.read().decode(errors="replace").strip().splitlines() if worker.poll() is not None else []
        last = error[-1] if error else f"no answer within {timeout_s:g} s"
        raise RenderError(f"render worker {self.workers.index(worker) if worker in self.workers else '?'} "
                          f"failed to {what}: {last}")

    def render(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Render simulations `ids` (all if None) from the shared states; returns `images`."""
        wanted = self.shared["wanted"]
        wanted[:] = 0
        wanted[slice(None) if ids is None else np.asarray(ids)] = 1
        busy = [w for w, (lo, hi) in zip(self.workers, self.slices) if wanted[lo:hi].any()]
        for worker in busy:
            try:
                worker.stdin.write(b"r")
                worker.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # reported by _expect with the worker's own words
        for worker in busy:
            self._expect(worker, RENDER_TIMEOUT_S, "render")
        return self.images

    def _stop_workers(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                try:
                    worker.stdin.close()  # end of input: the worker frees its context and exits
                except OSError:
                    pass
        for worker in self.workers:
            try:
                worker.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            for stream in (worker.stdout, worker.stderr):
                stream.close()
        self.workers = []

    def close(self) -> None:
        """Stop the workers."""
        self._stop_workers()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


def _worker(path: str, lo: int, hi: int) -> None:
    """A worker's loop: read its setup from stdin, then render its wanted simulations per request byte."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    (size,) = struct.unpack("<Q", stdin.read(8))
    setup = pickle.loads(stdin.read(size))
    shared = SharedArrays(path, setup["shapes"], create=False)
    import mujoco  # after MUJOCO_GL and PYOPENGL_PLATFORM are set (by the pool)

    from sim.arm.cameras import CameraRenderer

    config: CameraConfig = setup["config"]
    context = mujoco.GLContext(config.width, config.height)
    context.make_current()
    renderer = CameraRenderer(setup["model"], config)
    stdout.write(b"k")
    stdout.flush()
    qpos, appearance, geom_size = shared["qpos"], shared["appearance"], shared["geom_size"]
    wanted, images = shared["wanted"], shared["images"]
    while stdin.read(1) == b"r":
        ids = lo + np.flatnonzero(wanted[lo:hi])
        if len(ids):
            block = np.empty((len(ids), *images.shape[1:]), np.uint8)
            renderer.render(qpos[ids], appearance[ids], geom_size[ids], block)
            images[ids] = block
        stdout.write(b"k")
        stdout.flush()
    renderer.close()
    context.free()


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
