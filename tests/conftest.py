"""Test-session settings: two pytest workers share the two cores, so each uses one thread.

OpenMP's spin-waiting makes oversubscribed cores stall for seconds at every parallel region; with one
intra-op thread per worker (and passive waiting for any child process) the workers never contend.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display (Mesa's EGL)

import torch  # noqa: E402

torch.set_num_threads(1)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """A briefly trained hover run (tests/robo_rl/quick.py settings): 1600 env steps, one checkpoint."""
    from robo_rl.train import Trainer
    from tests.robo_rl.quick import quick_config

    run = tmp_path_factory.mktemp("trained_run")
    cfg = quick_config("total_env_steps=1600", "learning_starts=800", "eval.interval_env_steps=1600",
                       "checkpoint.interval_env_steps=1600", "logging.tensorboard=false")
    Trainer(cfg, run).run()
    return run


PIXEL_RUN_OVERRIDES = [
    "+experiment=pick_cube_pixels", "demos=null", "env.overrides.cameras.width=24", "env.overrides.cameras.height=24",
    "num_envs=4", "torch_threads=1", "total_env_steps=480", "learning_starts=240", "eval.episodes=2",
    "eval.interval_env_steps=480", "checkpoint.interval_env_steps=240", "buffer.capacity=1000",
    "agent.actor_hidden=[32,32]", "agent.critic_hidden=[32,32]", "agent.batch_size=32",
    "agent.encoder.channels=[8,8]", "agent.encoder.strides=[2,2]", "logging.progress_bar=false",
    "logging.tensorboard=false", "logging.video=true"]


@pytest.fixture(scope="session")
def pixel_run(tmp_path_factory):
    """A briefly trained SO-ARM100 pick-cube run on its two cameras (24x24): 480 env steps, checkpointed."""
    from hydra import compose, initialize_config_dir

    from robo_rl.train import Trainer
    from tests.robo_rl.quick import CONFIGS

    run = tmp_path_factory.mktemp("pixel_run")
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="train", overrides=PIXEL_RUN_OVERRIDES)
    Trainer(cfg, run).run()
    return run


@pytest.fixture(scope="session")
def exported_bundle(trained_run, tmp_path_factory):
    """`trained_run` exported as a policy bundle."""
    from robo_rl.export.bundle import export_bundle

    return export_bundle(trained_run, out=tmp_path_factory.mktemp("bundle") / "bundle")


@pytest.fixture(scope="session")
def state_history_run(tmp_path_factory):
    """`trained_run`'s settings with 4 past velocity errors and body rates in the observation (state_history) and
    the position error observed up to 0.15 m (position_error_limit), as make train's family policy observes."""
    from robo_rl.train import Trainer
    from tests.robo_rl.quick import quick_config

    run = tmp_path_factory.mktemp("state_history_run")
    cfg = quick_config("total_env_steps=1600", "learning_starts=800", "eval.interval_env_steps=1600",
                       "checkpoint.interval_env_steps=1600", "logging.tensorboard=false",
                       "+env.overrides.state_history=4", "+env.overrides.position_error_limit=0.15")
    Trainer(cfg, run).run()
    return run


@pytest.fixture(scope="session")
def state_history_bundle(state_history_run, tmp_path_factory):
    """`state_history_run` exported as a policy bundle."""
    from robo_rl.export.bundle import export_bundle

    return export_bundle(state_history_run, out=tmp_path_factory.mktemp("state_history_bundle") / "bundle")


def pytest_terminal_summary(terminalreporter):
    """Print every fuzz tally's counts (tests/fuzz). Here in the top conftest: under pytest-xdist the controller,
    which prints the summary, loads no conftest below tests/; the counts reach it as the reports' user_properties."""
    lines = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) == "teardown" or getattr(report, "when", None) == "call":
                lines += [value for name, value in getattr(report, "user_properties", []) if name == "fuzz"]
    if lines:
        terminalreporter.section("fuzz counts")
        total = 0
        for line in sorted(set(lines)):
            terminalreporter.write_line(line)
            total += int(line.split(": ", 1)[1].split(" ", 1)[0])
        terminalreporter.write_line(f"total: {total} inputs")
