"""The rollout GIF is written complete or not at all."""

import numpy as np
import pytest
from PIL import Image

from robo_rl.video import write_gif


def _frames(n: int, value: int) -> list[Image.Image]:
    return [Image.fromarray(np.full((8, 8, 3), (value + k) % 256, dtype=np.uint8)).quantize(256) for k in range(n)]


def test_an_interrupted_write_keeps_the_previous_video(tmp_path, monkeypatch):
    """A Ctrl-C while the GIF was saved left the run's rollout.gif empty: the previous video was lost."""
    out = tmp_path / "rollout.gif"
    write_gif(out, _frames(3, 10), fps=25)
    before = out.read_bytes()
    original = Image.Image.save

    def interrupted(self, fp, *args, **kwargs):
        fp.write(b"GIF89a partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(Image.Image, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_gif(out, _frames(5, 99), fps=25)
    monkeypatch.setattr(Image.Image, "save", original)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["rollout.gif"]
    write_gif(out, _frames(5, 99), fps=25)
    assert Image.open(out).n_frames == 5


def test_a_checkpoint_of_another_env_than_the_runs_is_refused(trained_run, tmp_path):
    """video run=<an arm run> checkpoint=<a hover policy> out=... rendered the hover policy as the arm run's video
    (export and evaluate refuse it)."""
    import shutil

    from omegaconf import OmegaConf

    from robo_rl.checkpoint import CheckpointError
    from robo_rl.video import record_rollouts

    arm_run = tmp_path / "arm_run"
    arm_run.mkdir()
    config = OmegaConf.load(trained_run / "config.yaml")
    config.env.id = "robo_rl/ArmPickCube-v0"
    OmegaConf.save(config, arm_run / "config.yaml")
    shutil.copy(trained_run / "best_policy.pt", arm_run / "best_policy.pt")
    with pytest.raises(CheckpointError, match="is a policy of robo_rl/CrazyflieHover-v0, run=.* flies "
                                              "robo_rl/ArmPickCube-v0"):
        record_rollouts(arm_run, out=tmp_path / "v.gif", checkpoint=str(trained_run / "best_policy.pt"))
    assert not (tmp_path / "v.gif").exists()
