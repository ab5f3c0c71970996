"""Clear single errors for bad parameters, a clean exit on Ctrl-C, and a robot-side node free of
torch and MuJoCo."""

import subprocess

import pytest

from conftest import HOVER_BUNDLE
from ros_helpers import NodeProcess, config


@pytest.mark.parametrize("overrides, message", [
    ({"bundle_path": str(HOVER_BUNDLE), "command_mode": "cmd_full_state"},
     "command_mode 'cmd_full_state' needs the crazyflie_interfaces package"),
    ({"bundle_path": "/nonexistent/bundle"}, "no policy.json in /nonexistent/bundle"),
    ({"bundle_path": str(HOVER_BUNDLE), "state_source": "gps"}, "state_source must be one of"),
    ({"bundle_path": str(HOVER_BUNDLE), "rate_lead": 1.5}, "rate_lead must be in [0, 1]"),
])
def test_bad_parameters_exit_with_one_error(workspace, overrides, message):
    install = workspace["install"]
    node = NodeProcess(install, "quadrotor_policy_node", [config(install, "quadrotor_policy.yaml")], overrides)
    code = node.process.wait(60)
    errors = [line for line in node.output().splitlines() if "[ERROR]" in line]
    assert code == 1 and len(errors) == 1 and message in errors[0], node.output()
    assert "Traceback" not in node.output()


def test_sigint_exits_zero_and_the_policy_node_loads_no_torch_or_mujoco(workspace):
    install = workspace["install"]
    with NodeProcess(install, "quadrotor_policy_node", [config(install, "quadrotor_policy.yaml")],
                     {"bundle_path": str(HOVER_BUNDLE)}) as node:
        for _ in range(600):
            if "flying robo_rl/CrazyflieHover-v0" in node.output():
                break
            subprocess.run(["sleep", "0.05"])
        maps = open(f"/proc/{_python_pid(node.process.pid)}/maps").read()
    assert "flying robo_rl/CrazyflieHover-v0" in node.output()
    assert "libtorch" not in maps and "mujoco" not in maps


def _python_pid(shell_pid: int) -> int:
    # bash -c '... && exec node': the shell's pid becomes the node's
    return shell_pid


def test_latency_benchmark_runs(tmp_path):
    """bench/ros2_latency.py (the figures come from its full run, 10,000 ticks) works end to end."""
    import json
    import sys

    from conftest import ROOT

    out = tmp_path / "latency.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "ros2_latency.py"), "--ticks", "200", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(out.read_text())
    assert results["ticks"] == 200 and "tick latency" in run.stdout
    assert 0 < results["tick_latency_ms"]["p50"] < results["state_to_command_ms"]["p99"] < 1000 / results["control_hz"] * 3
