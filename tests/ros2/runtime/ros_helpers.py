"""Starting the installed executables as launch would (`--ros-args --params-file`), and spinning."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import rclpy
import yaml

# Node logs and parameter files of this test process, removed when it exits.
_SCRATCH = tempfile.TemporaryDirectory(prefix="robo_rl_ros_test-")


def _scratch_file(prefix: str, suffix: str) -> Path:
    """A new empty file in the scratch folder (its descriptor closed)."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=_SCRATCH.name)
    os.close(fd)
    return Path(path)


class NodeProcess:
    """An installed executable of robo_rl_ros run in a shell that sourced the workspace's setup.bash."""

    def __init__(self, install: Path, executable: str, params_files: list[Path], overrides: dict | None = None,
                 prefix: str = "", arguments: list[str] | None = None):
        """`prefix`: a command the node runs under (e.g. setpriv dropping a capability); `arguments`: ROS
        arguments after the parameter files, as a user types them (`-p name:=value`)."""
        self.install, self.executable = install, executable
        self.log = _scratch_file(f"{executable}-", ".log")
        args = []
        for params in params_files:
            args += ["--params-file", str(params)]
        if overrides:
            args += ["--params-file", str(write_params(executable, overrides))]
        args += [shlex.quote(argument) for argument in arguments or []]
        command = (f". {install}/setup.bash && exec {prefix} {install}/robo_rl_ros/lib/robo_rl_ros/{executable} "
                   f"--ros-args {' '.join(args)}")
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(["bash", "-c", command], stdout=self.log.open("w"),
                                        stderr=subprocess.STDOUT, env=env)

    def output(self) -> str:
        """Everything the node printed so far."""
        return self.log.read_text()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT (Ctrl-C) and the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.executable} ignored SIGINT for {timeout} s:\n{self.output()}")

    def __enter__(self) -> "NodeProcess":
        return self

    def __exit__(self, *exc) -> None:
        code = self.stop()
        if exc[0] is None:
            assert code == 0, f"{self.executable} exited with {code}:\n{self.output()}"


def write_params(node_name: str, values: dict) -> Path:
    """A parameter file `<node_name>: ros__parameters: values`."""
    path = _scratch_file(f"{node_name}-", ".yaml")
    path.write_text(yaml.safe_dump({node_name: {"ros__parameters": values}}))
    return path


def config(install: Path, name: str) -> Path:
    """An installed parameter file of the package."""
    path = install / "robo_rl_ros" / "share" / "robo_rl_ros" / "config" / name
    assert path.is_file(), path
    return path


def spin_until(node, condition: Callable[[], bool], timeout: float, step: float = 0.005) -> bool:
    """Spin `node` until `condition()` or `timeout` seconds; whether the condition held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=step)
        if condition():
            return True
    return condition()


# the learner's Python (.venv): a Ray cluster started from it runs the learner's code in the workers Ray starts
LEARNER_PYTHON = os.environ.get("ROBO_RL_PYTHON", str(Path(__file__).resolve().parents[3] / ".venv" / "bin" / "python"))
_RAY_HEAD = """
import signal, sys, time
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": int(sys.argv[1]), "include_dashboard": False})
signal.signal(signal.SIGTERM, lambda *_: (cluster.shutdown(), sys.exit(0)))
print(cluster.address, flush=True)
while True:
    time.sleep(1)
"""


def start_ray_head(num_cpus: int) -> tuple[subprocess.Popen, str]:
    """A fresh Ray cluster on this machine, from the learner's Python: (its process, which shuts the cluster down
    on SIGTERM, and its address)."""
    head = subprocess.Popen([LEARNER_PYTHON, "-c", _RAY_HEAD, str(num_cpus)], stdout=subprocess.PIPE, text=True)
    address = head.stdout.readline().strip()
    if not address:
        raise RuntimeError(f"the Ray head did not start ({head.wait()})")
    return head, address
