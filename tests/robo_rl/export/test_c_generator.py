"""The generated C against PyTorch: every activation, LayerNorm, normalization, both kernels, bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from robo_rl.agents.networks import ACTIVATIONS, TanhGaussianActor
from robo_rl.export.c_generator import c_float, generate_c
from robo_rl.export.c_runtime import CompiledPolicy
from robo_rl.export.policy_spec import DeterministicPolicy, PolicySpec

TOLERANCE = 1e-5
OBS, ACT = 22, 4
LOW, HIGH = torch.tensor([0.0, 0.0, -1.0, -2.0]), torch.tensor([1.0, 1.0, 1.0, 0.5])


def make_policy(activation: str, layer_norm: bool = False, seed: int = 0, normalized: bool = False,
                hidden: tuple[int, ...] = (24, 16)) -> tuple[DeterministicPolicy, PolicySpec]:
    torch.manual_seed(seed)
    actor = TanhGaussianActor(OBS, ACT, hidden, activation, LOW, HIGH, layer_norm)
    with torch.no_grad():  # weights large enough that every activation works off its linear part
        for p in actor.parameters():
            p.mul_(3.0)
    rng = np.random.default_rng(seed)
    mean, std = (rng.normal(size=OBS), rng.uniform(0.2, 3.0, OBS)) if normalized else (None, None)
    spec = PolicySpec.from_actor(actor, activation, obs_mean=mean, obs_std=std)
    return DeterministicPolicy(actor, spec).eval(), spec


def write_c(spec: PolicySpec, policy: DeterministicPolicy, directory, n_pairs: int = 8):
    observations = np.random.default_rng(1).normal(0, 2, (n_pairs, OBS)).astype(np.float32)
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    for name, text in generate_c(spec, list(zip(observations, actions))).items():
        (directory / name).write_text(text)
    return directory


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("layer_norm", [False, True])
def test_c_matches_pytorch_for_every_activation_both_kernels(activation, layer_norm, tmp_path):
    policy, spec = make_policy(activation, layer_norm, normalized=layer_norm)
    write_c(spec, policy, tmp_path)
    observations = np.random.default_rng(2).normal(0, 3, (256, OBS)).astype(np.float32)
    with torch.no_grad():
        expected = policy(torch.as_tensor(observations)).numpy()
    variants = [(False, ()), (True, ())]
    if activation == "relu" and layer_norm:  # scratch buffers in .bss, as the Crazyflie app builds it
        variants.append((True, ("POLICY_STATIC_SCRATCH",)))
    for fma, defines in variants:
        compiled = CompiledPolicy(tmp_path, fma_kernel=fma, build_dir=tmp_path / f"build{int(fma)}{len(defines)}",
                                  defines=defines)
        actions, status = compiled.batch(observations)
        assert (status == 0).all()
        np.testing.assert_allclose(actions, expected, atol=TOLERANCE, rtol=0)
        failures, worst = compiled.self_test()
        assert failures == 0 and worst <= TOLERANCE


def test_non_finite_input_gives_the_safe_action_and_a_status_never_nan(tmp_path):
    policy, spec = make_policy("relu")
    spec.safe_action = np.array([0.25, 0.5, 0.0, -1.0], np.float32)
    write_c(spec, policy, tmp_path)
    compiled = CompiledPolicy(tmp_path)
    for bad in (np.nan, np.inf, -np.inf):
        obs = np.zeros(OBS, np.float32)
        obs[7] = bad
        action, status = compiled.step(obs)
        assert status == 1
        np.testing.assert_array_equal(action, spec.safe_action)
    # huge but finite inputs saturate inside the range instead of overflowing to NaN
    action, status = compiled.step(np.full(OBS, 1e30, np.float32))
    assert status == 0 and np.all(np.isfinite(action))
    assert np.all(action >= LOW.numpy()) and np.all(action <= HIGH.numpy())
    with pytest.raises(ValueError, match="shape"):
        compiled.step(np.zeros(OBS + 1, np.float32))


def test_self_test_catches_a_policy_that_changed_after_recording(tmp_path):
    policy, spec = make_policy("tanh")
    observations = np.random.default_rng(3).normal(size=(8, OBS)).astype(np.float32)
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    actions[3, 1] += 1e-3  # a pair the network no longer reproduces
    for name, text in generate_c(spec, list(zip(observations, actions))).items():
        (tmp_path / name).write_text(text)
    failures, worst = CompiledPolicy(tmp_path).self_test()
    assert failures == 1 and worst == pytest.approx(1e-3, rel=1e-2)


def test_header_states_sizes_as_compile_time_constants(tmp_path):
    policy, spec = make_policy("relu6", hidden=(40, 8))
    header = generate_c(spec, [])["policy.h"]
    for line in ("#define POLICY_OBS_SIZE 22", "#define POLICY_ACTION_SIZE 4", "#define POLICY_MAX_WIDTH 40",
                 f"#define POLICY_NUM_PARAMETERS {spec.parameter_count}"):
        assert line in header
    source = generate_c(spec, [])["policy.c"]
    assert "malloc" not in source and "static const float w0[880]" in source


def test_float_literals_round_trip_exactly():
    values = (np.random.default_rng(0).normal(size=1000) * 10.0 ** np.arange(-20, 20, 0.04)[:1000]).astype(np.float32)
    for v in values:
        assert np.float32(float(c_float(v)[:-1])) == v
    with pytest.raises(ValueError):
        c_float(float("nan"))


def test_spec_rejects_what_it_cannot_export():
    policy, spec = make_policy("relu")
    with pytest.raises(ValueError, match="activation"):
        PolicySpec(spec.layers, "gelu", spec.obs_mean, spec.obs_std, spec.action_low, spec.action_high, spec.safe_action)
    with pytest.raises(ValueError, match="safe_action"):
        PolicySpec(spec.layers, "relu", spec.obs_mean, spec.obs_std, spec.action_low, spec.action_high,
                   np.full(ACT, 5.0, np.float32))
    with pytest.raises(ValueError, match="obs_std"):
        PolicySpec(spec.layers, "relu", spec.obs_mean, np.zeros(OBS, np.float32), spec.action_low, spec.action_high,
                   spec.safe_action)


def test_a_million_hostile_inputs_give_finite_actions_in_range(tmp_path):
    """NaN, +-Inf, values up to 3e38 and subnormals: every output finite and inside the action range."""
    policy, spec = make_policy("silu", layer_norm=True, normalized=True)  # exp, sqrt and division inside
    write_c(spec, policy, tmp_path)
    driver = tmp_path / "fuzz"
    subprocess.run(["cc", "-std=c99", "-pedantic", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path}",
                    str(Path(__file__).with_name("fuzz_policy.c")), str(tmp_path / "policy.c"), "-o", str(driver),
                    "-lm"], check=True)
    lines = subprocess.run([str(driver), "1000000"], capture_output=True, text=True, check=True).stdout.splitlines()
    counts = {line.split()[0]: int(line.split()[1]) for line in lines if not line.startswith("range")}
    assert counts["non_finite"] == 0
    assert counts["ok"] + counts["invalid_input"] + counts["invalid_output"] == 1_000_000
    assert counts["ok"] > 200_000 and counts["invalid_input"] > 500_000  # both paths exercised
    for line in (line for line in lines if line.startswith("range")):
        _, k, low, high = line.split()
        assert LOW[int(k)] <= float(low) <= float(high) <= HIGH[int(k)]
