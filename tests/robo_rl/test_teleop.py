"""Keyboard teleoperation, driven through a real pseudo-terminal: keys in, a Minari dataset out."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def test_keyboard_demonstration_is_recorded_accepted_and_stored(tmp_path, monkeypatch):
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    controller, terminal = pty.openpty()  # the recorder's stdin is a terminal, as for a person
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    recorder = subprocess.Popen(
        [sys.executable, "-m", "robo_rl.record", "device=keyboard", "env=arm_reach", "episodes=1",
         "dataset=reach/keyboard-v0", f"hydra.run.dir={tmp_path / 'run'}"],
        stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    output = ""
    try:
        def wait_for(text: str, timeout: float = 60.0) -> None:
            nonlocal output
            deadline = time.monotonic() + timeout
            while text not in output:
                assert time.monotonic() < deadline and recorder.poll() is None, output
                if select.select([recorder.stdout], [], [], 0.05)[0]:
                    output += os.read(recorder.stdout.fileno(), 4096).decode(errors="replace")

        wait_for("go")
        for _ in range(5):  # hold "w" (tool +x) as key repeat would, then close the gripper
            os.write(controller, b"w")
            time.sleep(0.05)
        os.write(controller, b" ")
        time.sleep(0.3)
        os.write(controller, b"x")  # end the episode early
        wait_for("keep it")
        os.write(controller, b"y")
        assert recorder.wait(timeout=60) == 0, output
    finally:
        recorder.kill()
        os.close(controller)
        os.close(terminal)
    dataset = minari.load_dataset("reach/keyboard-v0")
    assert dataset.total_episodes == 1
    episode = next(dataset.iterate_episodes())
    actions = np.asarray(episode.actions)
    assert 10 <= len(actions) < 150 and episode.truncations[-1]  # ended by the operator, not the time limit
    assert (actions[:, 0] == 1.0).sum() >= 6 and (actions[:, 1:3] == 0.0).all()  # +x while "w" was held
    assert actions[0, 3] == -1.0 and actions[-1, 3] == 1.0  # gripper open, then closed by the space bar
