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
