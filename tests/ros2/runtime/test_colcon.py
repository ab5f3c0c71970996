"""colcon builds the package where ROS 2 tools look for it, and `colcon test` passes."""

import subprocess


def test_colcon_build_installs_executables_launch_and_config(workspace):
    share = workspace["install"] / "robo_rl_ros" / "share"
    lib = workspace["install"] / "robo_rl_ros" / "lib" / "robo_rl_ros"
    assert sorted(p.name for p in lib.iterdir()) == ["arm_policy_node", "arm_sim_bridge_node", "mcap_recorder_node",
                                                     "quadrotor_policy_node", "robot_actor_node",
                                                     "scripted_spacenav_node", "sim_bridge_node"]
    assert (share / "ament_index" / "resource_index" / "packages" / "robo_rl_ros").is_file()
    assert sorted(p.name for p in (share / "robo_rl_ros" / "launch").iterdir()) == [
        "arm_policy.launch.py", "crazyflie_policy.launch.py", "robot_actor.launch.py", "sim_hil.launch.py",
        "sim_hover.launch.py", "sim_pick.launch.py", "sim_pick_pixels.launch.py"]
    assert sorted(p.name for p in (share / "robo_rl_ros" / "config").iterdir()) == [
        "arm_policy.yaml", "quadrotor_policy.yaml", "robot_actor.yaml", "scripted_spacenav.yaml", "sim_arm_bridge.yaml",
        "sim_arm_policy.yaml", "sim_bridge.yaml", "sim_quadrotor_policy.yaml", "sim_robot_actor.yaml",
        "sim_so_arm100_bridge.yaml", "sim_so_arm100_pixels_policy.yaml"]
    assert (share / "robo_rl_ros" / "package.xml").is_file()


def test_colcon_test_passes(workspace):
    base, colcon = workspace["base"], workspace["colcon"]
    common = ["--build-base", str(base / "build"), "--install-base", str(base / "install")]
    run = subprocess.run([colcon, "--log-base", str(base / "log"), "test", "--base-paths",
                          str(workspace_src()), *common,
                          "--test-result-base", str(base / "results")],
                         cwd=base, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = subprocess.run([colcon, "test-result", "--test-result-base", str(base / "results")],
                             cwd=base, capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert "0 errors, 0 failures, 0 skipped" in summary.stdout, summary.stdout
    tests = int(summary.stdout.split("Summary:")[1].split("tests")[0])
    assert tests >= 7, summary.stdout


def workspace_src():
    """The colcon workspace's source folder."""
    from conftest import ROOT

    return ROOT / "ros2_ws" / "src"
