"""The generated C against PyTorch: every activation, LayerNorm, normalization, both kernels, bad input,
overflow inside the network, changed weights, and a fuzz of the host C runtime."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from robo_rl.agents.networks import ACTIVATIONS, TanhGaussianActor
from robo_rl.export.c_generator import ACTIVATION_C, c_constants, c_float, constants_checksum, generate_c
from robo_rl.export.c_runtime import (STATUS_INVALID_INPUT, STATUS_INVALID_OUTPUT, STATUS_INVALID_WEIGHTS, STATUS_OK,
                                      CompiledPolicy)
from robo_rl.export.cortex_m4 import verify_on_cortex_m4
from robo_rl.export.errors import CortexM4Error, PolicyCheckError
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


def recorded_pairs(policy: DeterministicPolicy, n_pairs: int = 8) -> list[tuple[np.ndarray, np.ndarray]]:
    observations = np.random.default_rng(1).normal(0, 2, (n_pairs, OBS)).astype(np.float32)
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    return list(zip(observations, actions))


def write_c(spec: PolicySpec, policy: DeterministicPolicy, directory, n_pairs: int = 8):
    for name, text in generate_c(spec, recorded_pairs(policy, n_pairs)).items():
        (directory / name).write_text(text)
    return directory


def replace_value(source: str, array: str, value: str, index: int = 0, kernel: str = "generic") -> str:
    """policy.c with entry `index` of the constant `array` replaced by the C text `value` (weights: in the
    generic or the FMA kernel's copy)."""
    starts = [m.end() for m in re.finditer(rf"\bconst float {array}\[\d+\] = {{", source)]
    start = starts[-1 if kernel == "generic" else 0]  # the FMA copy comes first under #if
    end = source.index("}", start)
    entries = re.split(r",\s*", source[start:end].strip())
    entries[index] = value
    return source[:start] + "\n    " + ", ".join(entries) + "\n" + source[end:]


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


SPECIAL_VALUES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 1.1754944e-38, -5.0, 5.0, 6.0, 7.0,
                           -88.8, 88.8, -100.0, 100.0, 1e30, -1e30, 3.4028235e38, -3.4028235e38], np.float32)


def test_every_activation_keeps_nan_and_inf_as_pytorch_does(tmp_path):
    """Each generated activation against torch's module on NaN, +-Inf, signed zeros, subnormals, the
    ends of float32 and random values: the same NaN and Inf entries (same sign), the rest within float
    rounding. ReLU as `x > 0 ? x : 0` turned NaN into 0."""
    values = np.concatenate([SPECIAL_VALUES, np.random.default_rng(0).normal(0, 30, 200).astype(np.float32)])
    literals = ", ".join("NAN" if np.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY") if np.isinf(v)
                         else c_float(v) for v in values)
    functions = "\n".join(f"static float act_{name}(float x) {{ return {expression}; }}"
                          for name, expression in ACTIVATION_C.items())
    calls = "\n".join(f'    for (int i = 0; i < {len(values)}; ++i) printf("{name} %a\\n", act_{name}(v[i]));'
                      for name in ACTIVATION_C)
    (tmp_path / "activations.c").write_text(f"""#include <math.h>
#include <stdio.h>
{functions}
static const float v[] = {{{literals}}};
int main(void)
{{
{calls}
    return 0;
}}
""")
    subprocess.run(["cc", "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
                    str(tmp_path / "activations.c"), "-o", str(tmp_path / "activations"), "-lm"], check=True)
    output = subprocess.run([str(tmp_path / "activations")], capture_output=True, text=True, check=True).stdout
    results: dict[str, list[float]] = {}
    for line in output.splitlines():
        name, text = line.split()
        results.setdefault(name, []).append(float.fromhex(text) if "nan" not in text else float("nan"))
    assert sorted(results) == sorted(ACTIVATIONS)
    for name, c_values in results.items():
        c_values = np.array(c_values, np.float32)
        with torch.no_grad():
            expected = ACTIVATIONS[name]()(torch.as_tensor(values)).numpy()
        np.testing.assert_array_equal(np.isnan(c_values), np.isnan(expected), err_msg=f"{name}: NaN entries")
        np.testing.assert_array_equal(np.isposinf(c_values), np.isposinf(expected), err_msg=f"{name}: +Inf entries")
        np.testing.assert_array_equal(np.isneginf(c_values), np.isneginf(expected), err_msg=f"{name}: -Inf entries")
        finite = np.isfinite(expected)
        np.testing.assert_allclose(c_values[finite], expected[finite], rtol=1e-6, atol=1e-37, err_msg=name)


def overflowing_observations(count: int, seed: int) -> np.ndarray:
    """Finite observations of magnitude 1e36 to 3e38, random signs: products and sums inside the network
    overflow to +-Inf and, where both meet, NaN."""
    rng = np.random.default_rng(seed)
    magnitude = np.minimum(10.0 ** rng.uniform(36, 38.6, (count, OBS)), 3.4028235e38)
    return (np.sign(rng.normal(size=(count, OBS))) * magnitude).astype(np.float32)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_a_finite_input_that_overflows_inside_the_network_is_invalid_output(activation, tmp_path):
    """Where PyTorch's action is NaN or Inf, the C's status is INVALID_OUTPUT (with the
    safe action), never OK; where the C says OK, PyTorch agrees. The ReLU that turned NaN into 0 returned OK
    with a finite action for 9 of these 200 observations where PyTorch gives NaN."""
    policy, spec = make_policy(activation)
    write_c(spec, policy, tmp_path)
    observations = overflowing_observations(200, seed=0)
    assert np.all(np.isfinite(observations))
    with torch.no_grad():
        expected = policy(torch.as_tensor(observations)).numpy()
    torch_non_finite = ~np.isfinite(expected).all(1)
    if activation in ("relu", "leaky_relu", "elu", "silu"):  # unbounded activations pass Inf on: NaN follows
        assert torch_non_finite.sum() >= 50
    for fma in (False, True):
        compiled = CompiledPolicy(tmp_path, fma_kernel=fma, build_dir=tmp_path / f"build{int(fma)}")
        actions, statuses = compiled.batch(observations)
        assert set(statuses.tolist()) <= {STATUS_OK, STATUS_INVALID_OUTPUT}
        assert np.all(statuses[torch_non_finite] == STATUS_INVALID_OUTPUT)
        invalid = statuses != STATUS_OK
        np.testing.assert_array_equal(actions[invalid], np.tile(spec.safe_action, (invalid.sum(), 1)))
        ok = statuses == STATUS_OK
        assert ok.sum() >= 20  # some overflow nowhere: the comparison below is not empty
        np.testing.assert_allclose(actions[ok], expected[ok], atol=TOLERANCE, rtol=0)


def test_an_overflow_that_a_later_tanh_would_hide_is_still_invalid_output(tmp_path):
    """A hidden unit overflows to +Inf and tanh makes it 1: PyTorch gives a finite action, but the network
    ran outside float32, so the C reports INVALID_OUTPUT (it checks every dense layer's outputs)."""
    policy, spec = make_policy("tanh")
    with torch.no_grad():
        policy.actor.trunk[0].weight[0, 0] = 10.0
    spec.layers[0].weight[0, 0] = 10.0
    write_c(spec, policy, tmp_path)
    obs = np.zeros(OBS, np.float32)
    obs[0] = 1e38  # 10 * 1e38 overflows in one product, whatever the summation order
    with torch.no_grad():
        assert np.all(np.isfinite(policy(torch.as_tensor(obs[None])).numpy()))
    for fma in (False, True):
        action, status = CompiledPolicy(tmp_path, fma_kernel=fma).step(obs)
        assert status == STATUS_INVALID_OUTPUT
        np.testing.assert_array_equal(action, spec.safe_action)


def test_the_emulated_cortex_m4_gives_the_host_statuses_for_overflow_and_changed_weights(tmp_path):
    """The same C on QEMU's STM32F405 (FMA kernel): an observation PyTorch maps to NaN is INVALID_OUTPUT
    there too; with one weight changed every step is INVALID_WEIGHTS and the self-test fails."""
    policy, spec = make_policy("relu")
    write_c(spec, policy, tmp_path)
    observations = overflowing_observations(200, seed=0)
    with torch.no_grad():
        expected = policy(torch.as_tensor(observations)).numpy()
    overflowing = observations[~np.isfinite(expected).all(1)][:4]
    normal = np.random.default_rng(4).normal(0, 2, (4, OBS)).astype(np.float32)
    with torch.no_grad():
        normal_actions = policy(torch.as_tensor(normal)).numpy()
    vectors = (np.concatenate([normal, overflowing]),
               np.concatenate([normal_actions, np.tile(spec.safe_action, (4, 1))]), np.array([0] * 4 + [2] * 4))
    result = verify_on_cortex_m4(tmp_path, *vectors, build_dir=tmp_path / "m4")
    assert result.report["self_test_failures"] == 0 and result.report["test_vector_failures"] == 0
    # the first step also checks the constants: a one-off cost of the order of an inference
    first_step, inference = result.report["first_step_instructions"], result.instructions_per_inference
    assert inference < first_step < 5 * inference
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "policy.h").write_text((tmp_path / "policy.h").read_text())
    (changed / "policy.c").write_text(replace_value((tmp_path / "policy.c").read_text(), "b1", "0.25f"))
    result = verify_on_cortex_m4(changed, vectors[0], np.tile(spec.safe_action, (8, 1)), np.full(8, 3),
                                 build_dir=tmp_path / "m4_changed")
    assert result.report["self_test_failures"] == 8 + 1 and result.report["test_vector_failures"] == 0


def test_test_vectors_beyond_the_stm32f405s_flash_are_refused_in_one_line(tmp_path):
    # export pairs=2048 once ended, after the recording, in the linker's error text ("region `FLASH' overflowed")
    policy, spec = make_policy("relu")
    write_c(spec, policy, tmp_path)
    observations = np.random.default_rng(5).normal(0, 2, (12000, OBS)).astype(np.float32)  # about 1.3 MB of them
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    with pytest.raises(CortexM4Error, match=r"^the policy and its 12000 test vectors do not fit the STM32F405's 1 MB "
                                            r"of flash \(by \d+ bytes\); export fewer pairs= or a smaller network$"):
        verify_on_cortex_m4(tmp_path, observations, actions, np.zeros(12000, dtype=np.int64), build_dir=tmp_path / "m4")


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


@pytest.mark.parametrize("flag", ["-ffast-math", "-ffinite-math-only", "-Ofast"])
def test_flags_that_compile_the_nan_checks_away_stop_the_build(flag, tmp_path):
    """With -ffast-math a NaN observation returned status 0 and an action, and the self-test still passed."""
    policy, spec = make_policy("relu")
    write_c(spec, policy, tmp_path)
    built = subprocess.run(["cc", "-std=c99", "-O2", flag, "-c", str(tmp_path / "policy.c"), "-o",
                            str(tmp_path / "policy.o")], capture_output=True, text=True)
    assert built.returncode != 0 and "must not be compiled with -ffast-math or -ffinite-math-only" in built.stderr
    assert subprocess.run(["cc", "-std=c99", "-O2", "-fno-math-errno", "-c", str(tmp_path / "policy.c"), "-o",
                           str(tmp_path / "policy.o")], capture_output=True).returncode == 0  # the firmware's flag


def test_self_test_catches_a_policy_that_changed_after_recording(tmp_path):
    policy, spec = make_policy("tanh")
    observations = np.random.default_rng(3).normal(size=(8, OBS)).astype(np.float32)
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    actions[3, 1] += 1e-3  # a pair the network no longer reproduces
    for name, text in generate_c(spec, list(zip(observations, actions))).items():
        (tmp_path / name).write_text(text)
    failures, worst = CompiledPolicy(tmp_path, verify=False).self_test()
    assert failures == 1 and worst == pytest.approx(1e-3, rel=1e-2)
    with pytest.raises(PolicyCheckError, match="self-test"):
        CompiledPolicy(tmp_path)


@pytest.mark.parametrize("array", ["b1", "w0", "obs_mean", "policy_safe_action"])
def test_changed_constants_are_refused_at_load_and_by_every_step(array, tmp_path):
    """An edited (or corrupted) constant: the first step finds the checksum wrong, so no step computes an
    action; the self-test counts it; the host runtime refuses to load it."""
    policy, spec = make_policy("relu")
    write_c(spec, policy, tmp_path)
    source = (tmp_path / "policy.c").read_text()
    kernels = ("generic", "fma") if array.startswith("w") else ("generic",)
    for kernel in kernels:  # a weight is stored twice (one order per kernel): each copy is checked
        changed = tmp_path / kernel
        changed.mkdir()
        (changed / "policy.h").write_text((tmp_path / "policy.h").read_text())
        # 0.25 is inside every action range here, so the safe-action check alone would not see it
        (changed / "policy.c").write_text(replace_value(source, array, "0.25f", kernel=kernel))
        with pytest.raises(PolicyCheckError, match="changed after export"):
            CompiledPolicy(changed, fma_kernel=kernel == "fma")
        compiled = CompiledPolicy(changed, fma_kernel=kernel == "fma", verify=False)
        for obs in (np.zeros(OBS, np.float32), recorded_pairs(policy)[0][0]):
            action, status = compiled.step(obs)
            assert status == STATUS_INVALID_WEIGHTS
            assert np.all(np.isfinite(action))
        failures, _ = compiled.self_test()
        assert failures == 8 + 1  # every recorded pair, and the checksum
        # the other kernel's copy is unchanged: it still runs
        if kernel == "fma":
            assert CompiledPolicy(changed, fma_kernel=False).step(np.zeros(OBS, np.float32))[1] == STATUS_OK


def test_a_non_finite_safe_action_is_refused_by_the_generator_and_fails_the_self_test(tmp_path):
    policy, spec = make_policy("relu")
    spec.safe_action = np.array([0.5, np.nan, 0.0, 0.0], np.float32)
    with pytest.raises(ValueError, match="safe_action"):
        generate_c(spec, [])
    spec.safe_action = np.array([0.5, 0.5, 0.0, 0.0], np.float32)
    pairs = recorded_pairs(policy)
    for name, text in generate_c(spec, pairs).items():
        (tmp_path / name).write_text(text)
    # a hand-edited NaN with the checksum updated to match: the safe-action check alone must catch it
    constants = [generic for _, generic, _ in c_constants(spec, pairs)]
    constants[7] = np.array([0.5, np.nan, 0.0, 0.0], np.float32)  # policy_safe_action
    source = replace_value((tmp_path / "policy.c").read_text(), "policy_safe_action", "NAN", index=1)
    source = re.sub(r"(#else\n#define CONSTANTS_CHECKSUM )0x[0-9a-f]{8}u",
                    rf"\g<1>0x{constants_checksum(constants):08x}u", source)
    (tmp_path / "policy.c").write_text(source)
    assert "policy_safe_action[4] = {\n    5.e-01f, NAN, 0.0f, 0.0f\n}" in source
    with pytest.raises(PolicyCheckError):
        CompiledPolicy(tmp_path)
    compiled = CompiledPolicy(tmp_path, verify=False)
    assert compiled.self_test()[0] == 8 + 1
    action, status = compiled.step(np.zeros(OBS, np.float32))
    assert status == STATUS_INVALID_WEIGHTS
    np.testing.assert_array_equal(action, [0.5, 0.0, 0.0, 0.0])  # never NaN: the NaN entry comes out as 0


def test_checksum_matches_the_c_for_both_kernels(tmp_path):
    """The Python checksum (what the generator stores) is what the C computes: an intact policy runs."""
    policy, spec = make_policy("elu", layer_norm=True, normalized=True, hidden=(19, 9))  # leftover FMA rows
    write_c(spec, policy, tmp_path)
    for fma in (False, True):
        assert CompiledPolicy(tmp_path, fma_kernel=fma).step(np.zeros(OBS, np.float32))[1] == STATUS_OK
    single = constants_checksum([np.array([1.0], np.float32)])
    assert single == ((2166136261 ^ 0x3F800000) * 16777619) & 0xFFFFFFFF


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
    for v in [*values, np.float32(-0.0), np.float32(0.0), np.float32(1e-45), np.float32(3.4028235e38)]:
        parsed = np.float32(float(c_float(v)[:-1]))
        assert parsed.view(np.uint32) == v.view(np.uint32)  # bit for bit: the checksum covers the sign of zero
    with pytest.raises(ValueError):
        c_float(float("nan"))


def test_generator_rejects_what_the_c_cannot_hold():
    policy, spec = make_policy("relu")
    for prefix in ("../../x", "9policy", "my-policy", "", "static", "a" * 17):  # one rule for export and generator
        with pytest.raises(ValueError, match="must be a C identifier of 1-16 letters"):
            generate_c(spec, [], prefix=prefix)
    with pytest.raises(ValueError, match="tolerance"):
        generate_c(spec, [], tolerance=float("nan"))
    spec.layers[1].weight[2, 3] = np.inf
    with pytest.raises(ValueError, match=r"layers\[1\].weight has non-finite"):
        generate_c(spec, [])
    policy, spec = make_policy("relu")
    with pytest.raises(ValueError, match=r"pairs\[0\] action has non-finite"):
        generate_c(spec, [(np.zeros(OBS, np.float32), np.full(ACT, np.nan, np.float32))])
    description = generate_c(spec, [], description="ends a comment */ early")["policy.h"]
    assert "*/ early" not in description


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


FUZZ_CATEGORIES = ("normal", "huge", "tiny", "non_finite", "mixed", "bits")


@pytest.mark.parametrize("activation, layer_norm", [("silu", True), ("relu", False)])
def test_fuzz_the_host_c_runtime(activation, layer_norm, tmp_path, record_property):
    """fuzz_policy.c under AddressSanitizer and UBSan: up to 300,000 seeded observations (at most 20 s of CPU)
    in six categories (normal, huge finite, tiny, NaN/Inf among normal, mixed, random bit patterns). No
    crash or undefined behaviour, no NaN or Inf action, the safe action with every non-OK status, the status
    each category must give (INVALID_INPUT exactly for the non-finite ones), actions inside the range."""
    policy, spec = make_policy(activation, layer_norm=layer_norm, normalized=True)
    write_c(spec, policy, tmp_path)
    driver = tmp_path / "fuzz"
    subprocess.run(["cc", "-std=c99", "-pedantic", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", f"-I{tmp_path}",
                    str(Path(__file__).with_name("fuzz_policy.c")), str(tmp_path / "policy.c"), "-o", str(driver),
                    "-lm"], check=True)
    run = subprocess.run([str(driver), "300000", "20", "30"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr  # a sanitizer report exits non-zero
    print(run.stdout)  # the per-category counts, shown with pytest -s
    rows = {}
    for line in run.stdout.splitlines():
        words = line.split()
        if words[0] == "category":
            rows[words[1]] = {key: int(value) for key, value in zip(words[2::2], words[3::2])}
    assert tuple(rows) == FUZZ_CATEGORIES
    for name, row in rows.items():
        assert row["inputs"] >= 2000, name  # the time limit allows far more: ~0.3 s per 100,000 here
        for rule in ("non_finite_action", "bad_fallback", "wrong_status", "other_status", "invalid_weights"):
            assert row[rule] == 0, (name, rule, row)
        assert row["ok"] + row["invalid_input"] + row["invalid_output"] == row["inputs"]
    assert rows["normal"]["ok"] == rows["normal"]["inputs"] and rows["tiny"]["ok"] == rows["tiny"]["inputs"]
    assert rows["huge"]["invalid_output"] > 0 and rows["huge"]["ok"] > 0  # overflow and saturation both seen
    assert rows["non_finite"]["invalid_input"] == rows["non_finite"]["inputs"]
    total = sum(row["inputs"] for row in rows.values())
    record_property("fuzz", f"host C runtime ({activation}{'+LN' if layer_norm else ''}, sanitized): {total} inputs, "
                    + ", ".join(f"{name} {row['ok']} ok/{row['invalid_input']} invalid input/"
                                f"{row['invalid_output']} invalid output" for name, row in rows.items())
                    + ", 0 crashes, 0 non-finite actions")  # the session summary's fuzz counts (tests/conftest.py)
    for line in (line for line in run.stdout.splitlines() if line.startswith("range")):
        _, k, low, high = line.split()
        assert LOW[int(k)] <= float(low) <= float(high) <= HIGH[int(k)]


def fuzz_observations(rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
    """The fuzz driver's categories, drawn in Python: {category: (count, OBS) float32}."""
    sign = lambda shape: rng.choice(np.float32([-1, 1]), shape)  # noqa: E731
    shape = (count, OBS)
    normal = sign(shape) * rng.uniform(0, 1, shape) * 10.0 ** rng.integers(-3, 4, shape)
    huge = sign(shape) * np.minimum(10.0 ** rng.uniform(30, 38.54, shape), 3.4028235e38)
    tiny = sign(shape) * rng.choice([0.0, 1e-45, 1e-40, 1.1754944e-38, 4e-38], shape)
    non_finite = normal.copy()
    rows = np.repeat(np.arange(count), 3)
    non_finite[rows, rng.integers(0, OBS, rows.size)] = rng.choice([np.nan, np.inf, -np.inf], rows.size)
    pick = rng.integers(0, 4, shape)
    mixed = np.choose(pick, [normal, huge, tiny, non_finite])
    bits = rng.integers(0, 2 ** 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return {name: np.asarray(values, np.float32) for name, values in
                (("normal", normal), ("huge", huge), ("tiny", tiny), ("non_finite", non_finite), ("mixed", mixed),
                 ("bits", bits))}


def test_fuzzed_host_c_runtime_agrees_with_pytorch(tmp_path):
    """2,400 seeded observations, 400 per fuzz category, through the host C runtime (CompiledPolicy) and
    PyTorch: a non-finite observation gives INVALID_INPUT; where PyTorch's action is not finite the C says
    INVALID_OUTPUT; every OK action is finite and PyTorch's to float32 rounding (1e-5 times the largest
    normalized observation entry, at least 1: summation order matters more as the sums grow); no status
    ever returns NaN."""
    policy, spec = make_policy("relu", normalized=True)
    write_c(spec, policy, tmp_path)
    compiled = CompiledPolicy(tmp_path)
    counts = {}
    for name, observations in fuzz_observations(np.random.default_rng(30), 400).items():
        actions, statuses = compiled.batch(observations)
        finite_input = np.isfinite(observations).all(1)
        with torch.no_grad():
            expected = policy(torch.as_tensor(observations)).numpy()
        assert np.all(np.isfinite(actions)), name
        assert np.all((statuses == STATUS_INVALID_INPUT) == ~finite_input), name
        assert np.all(statuses[finite_input & ~np.isfinite(expected).all(1)] == STATUS_INVALID_OUTPUT), name
        ok = statuses == STATUS_OK
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.abs((observations[ok].astype(np.float64) - spec.obs_mean) / spec.obs_std).max(1, initial=1.0)
        error = np.abs(actions[ok] - expected[ok]).max(1)
        assert np.all(error <= TOLERANCE * scale), (name, error.max(), scale[error.argmax()])
        counts[name] = {"inputs": len(statuses), **{s: int((statuses == v).sum()) for s, v in
                        (("ok", 0), ("invalid_input", 1), ("invalid_output", 2), ("invalid_weights", 3))}}
    print(counts)
    assert sum(c["inputs"] for c in counts.values()) == 2400
    assert counts["huge"]["invalid_output"] > 0 and counts["normal"]["ok"] == 400


def test_host_c_runtime_refuses_malformed_observations_with_one_clear_error(tmp_path):
    policy, spec = make_policy("relu")
    write_c(spec, policy, tmp_path)
    compiled = CompiledPolicy(tmp_path)
    for bad in (np.zeros(OBS + 1), np.zeros((1, OBS)), np.zeros(0), 3.0, [1.0] * (OBS - 1)):
        with pytest.raises(ValueError, match=rf"observation must have shape \({OBS},\)"):
            compiled.step(bad)
    for bad in (["a"] * OBS, None, {"x": 1}):
        with pytest.raises((ValueError, TypeError)):
            compiled.step(bad)
    action, status = compiled.step([0.0] * OBS)  # a list of the right length is an observation
    assert status == STATUS_OK and np.all(np.isfinite(action))
    for bad in (np.zeros(OBS), np.zeros((2, OBS + 1))):
        with pytest.raises(ValueError, match=rf"observations must have shape \(batch, {OBS}\)"):
            compiled.batch(bad)
    actions, statuses = compiled.batch(np.zeros((0, OBS)))
    assert actions.shape == (0, ACT) and statuses.shape == (0,)
