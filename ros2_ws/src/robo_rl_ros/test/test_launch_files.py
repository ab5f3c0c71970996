"""Launch files checked statically (launch and launch_ros need not be installed): each compiles, defines
generate_launch_description, starts only executables this package installs, with node names their YAML
files address, and names only parameter files that exist in config/."""

import ast
import re
from pathlib import Path

import pytest
import yaml

PACKAGE = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((PACKAGE / "launch").glob("*.launch.py"))


def _console_scripts() -> set[str]:
    tree = ast.parse((PACKAGE / "setup.py").read_text())
    scripts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = re.fullmatch(r"\s*(\w+)\s*=\s*[\w.{}]+:main\s*", node.value)
            if match:
                scripts.add(match.group(1))
        if isinstance(node, ast.JoinedStr):  # f"name = {PACKAGE}.module:main"
            text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
            match = re.fullmatch(r"\s*(\w+)\s*=\s*[\w.]+:main\s*", text)
            if match:
                scripts.add(match.group(1))
    return scripts


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def test_there_are_launch_files_and_executables():
    assert [p.name for p in LAUNCH_FILES] == ["arm_policy.launch.py", "crazyflie_policy.launch.py",
                                              "robot_actor.launch.py", "sim_hil.launch.py", "sim_hover.launch.py",
                                              "sim_pick.launch.py", "sim_pick_pixels.launch.py"]
    assert _console_scripts() == {"quadrotor_policy_node", "sim_bridge_node", "mcap_recorder_node", "arm_policy_node",
                                  "arm_sim_bridge_node", "robot_actor_node", "scripted_spacenav_node"}


def test_sim_pick_connects_the_bridge_and_the_arm_node():
    """The sim pick loop's parameter files agree on the topics, the controllers and their joint order."""
    bridge = yaml.safe_load((PACKAGE / "config" / "sim_arm_bridge.yaml").read_text())["arm_sim_bridge_node"]
    node = yaml.safe_load((PACKAGE / "config" / "sim_arm_policy.yaml").read_text())["arm_policy_node"]
    bridge, node = bridge["ros__parameters"], node["ros__parameters"]
    assert node["object_topic"] == bridge["object_pose_topic"]
    assert node["joint_states_topic"] == bridge["joint_states_topic"]
    assert node["output"] == "forward_command"
    assert node["controller_name"] == bridge["controller_name"]
    assert node["command_joints"] == bridge["controller_joints"]
    assert node["gripper_controller_name"] == bridge["gripper_controller_name"]
    assert bridge["joint_state_order"] != [*bridge["controller_joints"], "finger_left", "finger_right"]
    assert len(bridge["kp"]) == len(bridge["kd"]) == len(bridge["controller_joints"])
    assert node["use_sim_time"] and bridge["publish_clock"]


def _parameters(config: str, node: str) -> dict:
    return yaml.safe_load((PACKAGE / "config" / config).read_text())[node]["ros__parameters"]


def test_sim_hil_connects_the_bridge_the_robot_actor_and_the_scripted_person():
    """The robot actor reads what the bridge publishes, commands what it takes, resets it through its service,
    takes the interventions the scripted person publishes, and shares the arm settings of the sim pick loop."""
    bridge = _parameters("sim_arm_bridge.yaml", "arm_sim_bridge_node")
    actor = _parameters("sim_robot_actor.yaml", "robot_actor_node")
    person = _parameters("scripted_spacenav.yaml", "scripted_spacenav_node")
    policy = _parameters("sim_arm_policy.yaml", "arm_policy_node")
    assert actor["object_topic"] == bridge["object_pose_topic"] == person["object_topic"]
    assert actor["joint_states_topic"] == bridge["joint_states_topic"] == person["joint_states_topic"]
    assert actor["success_topic"] == bridge["success_topic"]
    assert actor["reset_service"] == "/arm_sim_bridge_node/reset"
    assert (actor["twist_topic"], actor["joy_topic"]) == (person["twist_topic"], person["joy_topic"])
    assert (actor["close_button"], actor["open_button"], actor["linear_scale"]) == \
        (person["close_button"], person["open_button"], person["linear_scale"])
    for key in ("output", "controller_name", "command_joints", "gripper_controller_name", "max_joint_speed",
                "state_timeout", "ik_damping", "orientation_gain", "use_sim_time"):
        assert actor[key] == policy[key], key
    # every robot_actor_node parameter the sim sets, the robot's file documents
    assert set(actor) - {"use_sim_time"} <= set(_parameters("robot_actor.yaml", "robot_actor_node"))


def test_sim_hover_emulates_the_backend_the_node_converts_for():
    """The bridge's crazyswarm2 chain and the node's cmd_vel_legacy conversion name the same backend, and the
    robot config uses crazyswarm2's default (cpp, crazyflie/launch/launch.py)."""
    def backend(config: str, node: str) -> str:
        return yaml.safe_load((PACKAGE / "config" / config).read_text())[node]["ros__parameters"]["crazyswarm2_backend"]
    assert backend("sim_bridge.yaml", "sim_bridge_node") == backend("sim_quadrotor_policy.yaml", "quadrotor_policy_node")
    assert backend("quadrotor_policy.yaml", "quadrotor_policy_node") == "cpp"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file(path):
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    compile(tree, str(path), "exec")
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    scripts = _console_scripts()
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Node"]
    assert nodes, f"{path.name} starts no Node"
    for call in nodes:
        kw = _keywords(call)
        assert kw["package"].value == "robo_rl_ros"
        executable = kw["executable"].value
        assert executable in scripts, f"{path.name}: {executable} is not an installed executable"
        assert kw["name"].value == executable
    yaml_names = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value.endswith(".yaml")]
    assert yaml_names, f"{path.name} names no parameter file"
    for name in yaml_names:
        config = PACKAGE / "config" / name
        assert config.is_file(), f"{path.name}: config/{name} does not exist"
        parameters = yaml.safe_load(config.read_text())
        for node_name, body in parameters.items():
            assert node_name in scripts and "ros__parameters" in body, f"config/{name}: {node_name}"


def test_package_manifest():
    manifest = (PACKAGE / "package.xml").read_text()
    assert '<package format="3">' in manifest
    assert "<build_type>ament_python</build_type>" in manifest
    assert (PACKAGE / "resource" / "robo_rl_ros").is_file()
    setup_cfg = (PACKAGE / "setup.cfg").read_text()
    assert "script_dir=$base/lib/robo_rl_ros" in setup_cfg and "install_scripts=$base/lib/robo_rl_ros" in setup_cfg
