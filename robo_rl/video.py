"""Rollout videos: `python -m robo_rl.video run=<run dir> [episodes=2] [seed=0]` writes <run>/rollout.gif
(or out=<a new file.gif>).

The run's best evaluated policy (deterministic) flies or picks in a single env of the run's task with
MuJoCo's offscreen renderer. Without a display MuJoCo needs an offscreen GL: this command defaults
MUJOCO_GL to "egl" (Mesa's EGL renders on the CPU; "osmesa" also works where PyOpenGL supports it).
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's GL context

import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from robo_rl.checkpoint import check_not_in_another_run  # noqa: E402
from robo_rl.cli import command, key_values  # noqa: E402
from sim.errors import ConfigError  # noqa: E402

VIDEO_NAME = "rollout.gif"  # in the run folder, where out= is not given: the run's own video, rewritten on each call
# what record_rollouts writes, the animated GIF its frame duration and loop settings are for: PIL picks the format
# from out='s extension, and refused `afile` or `best_policy.pt` only after the minutes of rendering
VIDEO_SUFFIX = ".gif"
MAX_EPISODES = 20  # the frames of all of them are held in memory until the GIF is written (as 256-colour frames)


def output_path(run: str | Path, out: str | Path | None, policy: str | Path | None = None) -> Path:
    """The file record_rollouts writes: `out`, else the run's VIDEO_NAME. Checked before anything is rendered
    (ConfigError): `out` must end in VIDEO_SUFFIX, lie in an existing folder, and be a new file, never one that
    this command did not write (a user's notes.gif was silently overwritten); the run's own video is rewritten,
    but only with a `policy` file of the run (another run's checkpoint replaced its video)."""
    default = Path(run) / VIDEO_NAME
    if policy is not None and not Path(policy).resolve().is_relative_to(Path(run).resolve()) \
            and (out is None or Path(out).resolve() == default.resolve()):
        raise ConfigError(f"checkpoint={policy} is not a file of run={run}: its video would replace the run's own "
                          f"({default}); give out=<a new file{VIDEO_SUFFIX}>")
    if out is None:
        return default
    path = Path(out)
    if str(out) == "":
        raise ConfigError(f"out= is empty; give a new file ending {VIDEO_SUFFIX}, or omit out= for {default}")
    if path.suffix.lower() != VIDEO_SUFFIX:
        raise ConfigError(f"out={out}: the video is an animated GIF; give a file name ending {VIDEO_SUFFIX}")
    if path.is_dir():
        raise ConfigError(f"out={out} is a folder; give a new file ending {VIDEO_SUFFIX}")
    if not path.parent.is_dir():
        raise ConfigError(f"out={out}: there is no folder {path.parent}; give a file in an existing folder")
    if not os.access(path.parent, os.W_OK | os.X_OK):  # found only when the rendered GIF was written
        raise ConfigError(f"out={out}: the folder {path.parent} cannot be written; give a file in a folder you can "
                          "write to")
    check_not_in_another_run(path, run, "out", "video")  # it was taken as that run's own video
    if path.exists() and path.resolve() != default.resolve():
        raise ConfigError(f"out={out} already exists and is not this run's video ({default}, which is rewritten); "
                          "give a new file, or delete that one first")
    return path


def record_rollouts(run: str | Path, out: str | Path | None = None, episodes: int = 1, seed: int = 0,
                    checkpoint: str = "best", frame_every: int = 2, progress: bool = False) -> Path:
    """Render `episodes` deterministic episodes of a run's policy into an animated GIF; returns its path. The GIF
    appears complete or not at all: an interrupted write keeps the previous video (it was left empty).

    frame_every: keep every n-th control step (the GIF plays at the control rate divided by n). progress: a
    progress bar of the episodes on stderr.
    """
    import gymnasium as gym
    from omegaconf import OmegaConf
    from PIL import Image
    from tqdm import tqdm

    import sim  # noqa: F401  (registers the ids)
    from robo_rl import observations
    from robo_rl.checkpoint import agent_from_checkpoint, load_run_policy, policy_file

    policy = policy_file(run, checkpoint)
    out = output_path(run, out, policy)  # before the minutes of rendering
    state = load_run_policy(run, checkpoint)  # refuses a policy of another env than the run's, as evaluate does
    cfg = OmegaConf.create(state["config"])
    overrides: dict[str, Any] = dict(cfg.env.get("overrides") or {})
    overrides = OmegaConf.to_container(OmegaConf.create(overrides), resolve=True)
    env = gym.make(cfg.env.id, render_mode="rgb_array", config=overrides).unwrapped
    agent = agent_from_checkpoint(state, "cpu")
    frames = []
    for episode in tqdm(range(episodes), desc="video", unit="episode", disable=not progress, dynamic_ncols=True):
        obs, _ = env.reset(seed=seed + episode)
        for t in range(100_000):
            if t % frame_every == 0:  # held as the GIF stores it, 256 colours: a third of the RGB frame's memory
                frames.append(Image.fromarray(np.asarray(env.render())).quantize(256))
            batch = {k: v[None] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[None]
            with torch.no_grad():
                action = agent.act(observations.to_tensor(batch, agent.device), deterministic=True)[0].cpu().numpy()
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()  # its render workers, if it has cameras
    fps = env.metadata.get("render_fps", 50) / frame_every
    return write_gif(out, frames, fps)


def write_gif(out: Path, frames: list[Any], fps: float) -> Path:
    """Write PIL `frames` as an animated GIF at `fps` to `out`, complete or not at all: a Ctrl-C or an error while
    writing keeps the file that was there (it was left empty, the run's previous video lost)."""
    from robo_rl.checkpoint import write_atomically

    return write_atomically(out, lambda file: frames[0].save(file, format="GIF", save_all=True,
                                                             append_images=frames[1:], duration=int(1000 / fps),
                                                             loop=0))


@command
def main(argv: list[str]) -> None:
    """`key=value` arguments: run (required), out, episodes, seed, checkpoint."""
    # episodes: every frame is kept until the GIF is written, about 230 MB per 640x480 hover episode
    args = key_values(argv, {"run": str, "out": str, "episodes": (int, 1, MAX_EPISODES), "seed": int, "checkpoint": str},
                      "usage: python -m robo_rl.video run=<run dir> [out=<file.gif>] [episodes=1] [seed=0] [checkpoint=best]")
    path = record_rollouts(args["run"], args.get("out"), args.get("episodes", 1), args.get("seed", 0),
                           args.get("checkpoint", "best"), progress=sys.stderr.isatty())
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
