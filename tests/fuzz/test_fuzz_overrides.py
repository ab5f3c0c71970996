"""Fuzzed command-line overrides of `train` and `evaluate`, through the config layer without training:
Hydra's override grammar and merge, the command's option checks (robo_rl.options, what `hydra_command`
runs first), then what the command builds from them before its loop: the envs (a reset and two steps, whose
outputs must be finite) and, for evaluate, the run's policy checked against the changed env.

Most inputs apply their overrides with Hydra's own parser and merge (`OverridesParser`,
`ConfigLoaderImpl._apply_overrides_to_config`, what `compose` does after the defaults list) to a config
composed once, since a full composition takes ~0.3 s; config group choices (env=, agent=, ...) go through
`hydra.compose`."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from robo_rl.checkpoint import agent_from_checkpoint, check_compatible, load_checkpoint, policy_file
from robo_rl.envs import env_spec, make_vector_env
from robo_rl.evaluate import env_changes
from robo_rl.options import check_options
from sim.quadrotor.config import default_config
from tests.fuzz.harness import ROOT, SEED

CONFIGS = str(ROOT / "configs")
VALUE_INPUTS = {"train": 400, "evaluate": 300}
COMPOSE_INPUTS = {"train": 14, "evaluate": 8}
VALUES = ("nan", "inf", "-inf", "1e400", "-1", "0", "1", "2.5", "1e30", "abc", "[1,2", "{a: 1}", "null", "true",
          "[]", "{}", "[nan, 1]", "[0, 1]", "'quoted'", "${nope}", "???", "-9223372036854775809", "[[1]]", "cuda:7",
          "mujoco_batch", "auto")
GROUPS = {"train": {"env": ["hover", "reach", "figure_eight", "takeoff_land", "arm_reach", "pick_cube", "so_arm100_reach", "nope"],
                    "agent": ["sac", "sac_arm", "sac_quadrotor", "nope"], "intervention": ["none", "scripted"],
                    "buffer": ["default"]},
          "evaluate": {}}


def leaves(cfg: DictConfig) -> list[str]:
    """Dotted paths of every value in a config (not the hydra node)."""
    paths = []

    def visit(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            paths.append(prefix)

    visit(OmegaConf.to_container(cfg, resolve=False), "")
    return [p for p in paths if not p.startswith("hydra")]


ENV_FIELDS = [".".join(p) for p in (("randomization", "disturbance_force"), ("reward_scales", "alive"),
                                    ("randomization", "observation_noise", "position"), ("control_hz",),
                                    ("center",), ("randomization", "latency_steps"), ("vehicle",),
                                    ("initial_state", "max_tilt_deg"), ("max_speed",), ("action_history",))]


def fuzzed_overrides(command: str, keys: list[str], rng: np.random.Generator) -> list[str]:
    """1-3 override strings: a known key, an env field, an unknown key; =, +, ++, ~ forms; fuzzed values."""
    result = []
    for _ in range(int(rng.integers(1, 4))):
        value = VALUES[int(rng.integers(len(VALUES)))]
        kind = int(rng.integers(10))
        if kind < 5:
            result.append(f"{keys[int(rng.integers(len(keys)))]}={value}")
        elif kind < 7:
            field = ENV_FIELDS[int(rng.integers(len(ENV_FIELDS)))]
            prefix = "env.overrides" if command == "train" else "overrides"
            result.append(f"+{prefix}.{field}={value}" if command == "train" else f"+{prefix}.{field}={value}")
        elif kind == 7:
            result.append(f"{rng.choice(['+', '++', '~', ''])}fuzz_{int(rng.integers(3))}={value}")
        elif kind == 8:
            result.append(f"~{keys[int(rng.integers(len(keys)))]}")
        else:
            result.append(rng.choice([f"={value}", "seed", "seed=", "a b=c", "seed=1=2", "x.y.z.=1", "+=1", "@=1"]))
    return result


def apply(base: DictConfig, overrides: list[str]) -> DictConfig:
    """`overrides` on a copy of `base`, as Hydra's compose applies them after its defaults list."""
    cfg = copy.deepcopy(base)
    parsed = OverridesParser.create().parse_overrides(overrides=overrides)
    ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    return cfg


def step(env) -> dict:
    obs, _ = env.reset(seed=0)
    outputs = {"reset": np.asarray(obs)}
    for index in range(2):
        action = np.tile((env.single_action_space.low + env.single_action_space.high) / 2, (env.num_envs, 1))
        obs, reward, *_ = env.step(action.astype(np.float32))
        outputs[f"step{index}"] = (np.asarray(obs), np.asarray(reward))
    env.close()
    return outputs


def train_layer(cfg: DictConfig) -> dict:
    """What `python -m robo_rl.train` checks and builds before it trains (small: 2 envs, no compilation)."""
    check_options(cfg, "train")
    with_small = OmegaConf.merge(cfg, {"env": {"compile": False}})
    env = make_vector_env(with_small.env, 2, torch.device("cpu"), threads=1)
    return step(env)


def evaluate_layer(cfg: DictConfig, state: dict) -> dict:
    """What `python -m robo_rl.evaluate` checks and builds before its rollouts."""
    check_options(cfg, "evaluate")
    changes = env_changes(cfg)
    run_cfg = OmegaConf.create(state["config"])
    env = make_vector_env(OmegaConf.merge(run_cfg.env, {"compile": False}), 2, torch.device("cpu"), overrides=changes)
    check_compatible(state, env_spec(env, run_cfg.env.id))
    outputs = step(env)
    agent = agent_from_checkpoint(state)
    with torch.no_grad():
        outputs["actions"] = agent.act(torch.as_tensor(outputs["reset"]), deterministic=True)
    return outputs


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_fuzzed_overrides(command, trained_run, report):
    rng = np.random.default_rng([SEED, 10, ["train", "evaluate"].index(command)])
    base_overrides = [f"run={trained_run}"] if command == "evaluate" else []
    state = load_checkpoint(policy_file(trained_run, "best")) if command == "evaluate" else None
    layer = (lambda cfg: evaluate_layer(cfg, state)) if command == "evaluate" else train_layer
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        base = compose(config_name=command, overrides=base_overrides)
        keys = leaves(base)
        tally = report.tally(f"{command} overrides (config layer)")
        tally.run("defaults", lambda: layer(base))
        for index in range(VALUE_INPUTS[command]):
            overrides = fuzzed_overrides(command, keys, rng)
            tally.run(f"#{index} {overrides}", lambda: layer(apply(base, overrides)))
        for index in range(COMPOSE_INPUTS[command]):
            overrides = fuzzed_overrides(command, keys, rng)
            for group, options in GROUPS[command].items():
                if rng.random() < 0.5:
                    overrides.append(f"{group}={options[int(rng.integers(len(options)))]}")
            tally.run(f"compose #{index} {overrides}",
                      lambda: layer(compose(config_name=command, overrides=[*base_overrides, *overrides])))
