"""Policy inference on a Cortex-M4F: robo-rl's generated C next to emlearn's, on an emulated STM32F405.

    .venv/bin/python bench/mcu.py [--vectors 64] [--seed 0]

Two actor shapes, ReLU hidden layers, PyTorch's default initialization (seeded): the default hover actor
50-64-64-4 (actions in [0, 1]) and a learning-to-fly-shaped one 146-64-64-4 (actions in [-1, 1]). For
each, every implementation computes the same function, action = clamp(tanh(MLP((obs - mean) / std)) *
scale + offset), and is checked against `DeterministicPolicy` (PyTorch) on the same test vectors
(`--vectors` random observations at twice unit spread, plus one with a NaN, which must give the safe action
and status 1):

- robo-rl: `generate_c(spec, [])` (no self-test pairs, so the flash is weights + code), built with the
  generic kernel (-DPOLICY_KERNEL_FMA=0, one accumulator, inputs in order) and the FMA kernel (=1);
- emlearn (PyPI `emlearn`, installed by this script into bench/.venv-emlearn only): the same float32
  layers in a scikit-learn `MLPRegressor`, converted with `emlearn.convert(model, method="loadable",
  return_type="regressor")` (bench/emlearn_peer.py). emlearn's network ends at the pre-tanh layer, so a
  small adapter (policy.c/policy.h here, written below) gives it robo-rl's API and wraps
  `emlnet_regress` -> `eml_net_regress` in the SAME normalization, finiteness checks, tanh, scaling and
  clamp as robo-rl's policy_step: the rows differ only in the network code.

Each is built by `robo_rl.export.cortex_m4.verify_on_cortex_m4` (firmware/cortex_m4, -O2, hard float) and
run under `qemu-system-arm -M netduinoplus2 -icount shift=0`. Columns:
- instr/inf: instructions per policy_step (deterministic under -icount; QEMU does not model M4 cycles);
- flash: text + data of the linked image that comes from policy.o (weights, constants, code; sections
  the linker's --gc-sections drops are not counted; libm's tanhf is not counted for anyone); policy.o's
  own size (what verify_on_cortex_m4 reports, unused emlearn functions included) is in the JSON;
- stack: deepest call chain from policy_step in GCC's -fcallgraph-info=su graph of policy.c (libm not
  included); static RAM: .data + .bss of policy.o (emlearn keeps its activation buffers there);
- max err: largest |action - PyTorch's action| over the test vectors, as the board computed it.
Writes bench/results/mcu.json. Needs gcc-arm-none-eabi, libnewlib-arm-none-eabi and qemu-system-arm.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
from peers import BenchArgumentParser, NonNegative, Positive, Seed, peer_python, write_results

from robo_rl.agents.networks import TanhGaussianActor
from robo_rl.export.c_generator import c_array, c_float, generate_c
from robo_rl.export.cortex_m4 import HARNESS_DIR, missing_tools, verify_on_cortex_m4
from robo_rl.export.policy_spec import DeterministicPolicy, PolicySpec

ROOT = Path(__file__).resolve().parent
EMLEARN_VENV = ROOT / ".venv-emlearn"
EMLEARN_REQUIREMENTS = ["emlearn==0.23.2", "scikit-learn"]
TOLERANCE = 1e-5  # the bound robo-rl's export checks targets against; the harness counts vectors above it
ACTIVATION = "relu"
# the harness's compile flags (firmware/cortex_m4/Makefile), for the call-graph stack analysis
CFLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-std=c99", "-O2",
          "-ffunction-sections", "-fdata-sections"]
LDFLAGS = ["-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs", "-T", str(HARNESS_DIR / "stm32f405.ld"),
           "-Wl,--gc-sections"]


@dataclasses.dataclass(frozen=True)
class Network:
    """An actor shape and its action range."""

    name: str
    obs: int
    hidden: tuple[int, ...]
    action: int
    low: float
    high: float

    @property
    def shape(self) -> str:
        """e.g. 50-64-64-4."""
        return "-".join(map(str, (self.obs, *self.hidden, self.action)))


NETWORKS = (Network("hover", 50, (64, 64), 4, 0.0, 1.0), Network("learning-to-fly", 146, (64, 64), 4, -1.0, 1.0))


def make_actor(net: Network, seed: int) -> tuple[TanhGaussianActor, PolicySpec, DeterministicPolicy]:
    """A seeded, untrained ReLU actor of this shape, its spec and its PyTorch reference policy."""
    torch.manual_seed(seed)
    actor = TanhGaussianActor(net.obs, net.action, list(net.hidden), ACTIVATION,
                              torch.full((net.action,), net.low), torch.full((net.action,), net.high)).eval()
    spec = PolicySpec.from_actor(actor, ACTIVATION)
    return actor, spec, DeterministicPolicy(actor, spec).eval()


def test_vectors(policy: DeterministicPolicy, spec: PolicySpec, count: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`count` random observations (twice unit spread) and one with a NaN; PyTorch's actions and statuses."""
    rng = np.random.default_rng(seed)
    observations = (2.0 * rng.standard_normal((count, spec.obs_size))).astype(np.float32)
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    invalid = observations[:1].copy()
    invalid[0, 0] = np.nan
    statuses = np.zeros(count + 1, dtype=np.int64)
    statuses[-1] = 1
    return np.concatenate([observations, invalid]), np.concatenate([actions, spec.safe_action[None]]), statuses


def write_robo_rl_c(spec: PolicySpec, c_dir: Path) -> None:
    """robo-rl's generated policy.h/policy.c (no self-test pairs)."""
    c_dir.mkdir(parents=True, exist_ok=True)
    for name, text in generate_c(spec, [], tolerance=TOLERANCE, description="bench/mcu.py").items():
        (c_dir / name).write_text(text)


def write_emlearn_c(actor: TanhGaussianActor, spec: PolicySpec, observations: np.ndarray,
                    c_dir: Path) -> dict[str, Any]:
    """emlearn's C for the actor's network (via bench/emlearn_peer.py) plus the policy.h/policy.c adapter.

    Returns the peer's report (versions, scikit-learn's forward error vs PyTorch's pre-squash output).
    """
    c_dir.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        mean = actor.mean(actor.trunk(torch.as_tensor(observations))).numpy()
    arrays = {"obs": observations, "mean": mean}
    for i, layer in enumerate(spec.layers):
        arrays[f"w{i}"], arrays[f"b{i}"] = layer.weight, layer.bias
    python = peer_python(EMLEARN_VENV, EMLEARN_REQUIREMENTS, probe="emlearn, sklearn")
    with tempfile.TemporaryDirectory() as scratch:
        np.savez(Path(scratch) / "net.npz", **arrays)
        out = subprocess.run([str(python), str(ROOT / "emlearn_peer.py"), "--weights", str(Path(scratch) / "net.npz"),
                              "--out", str(c_dir)], check=True, stdout=subprocess.PIPE, text=True, cwd=scratch).stdout
    peer = json.loads(out.strip().splitlines()[-1])
    (c_dir / "policy.h").write_text(_adapter_header(spec))
    (c_dir / "policy.c").write_text(_adapter_source(spec, peer["name"], peer["file"]))
    return peer


def _adapter_header(spec: PolicySpec) -> str:
    return f"""/* policy.h: bench/mcu.py's adapter, robo-rl's policy API around emlearn's generated network. */
#ifndef POLICY_H
#define POLICY_H

#define POLICY_OBS_SIZE {spec.obs_size}
#define POLICY_ACTION_SIZE {spec.action_size}
#define POLICY_SELF_TEST_TOLERANCE {c_float(TOLERANCE)}

typedef enum {{
    POLICY_OK = 0,
    POLICY_INVALID_INPUT = 1,
    POLICY_INVALID_OUTPUT = 2
}} policy_status_t;

extern const float policy_safe_action[POLICY_ACTION_SIZE];

policy_status_t policy_step(const float *obs, float *action);
int policy_self_test(float *max_abs_error);

#endif /* POLICY_H */
"""


def _adapter_source(spec: PolicySpec, name: str, model_file: str) -> str:
    """The same wrapping as robo-rl's policy_step (c_generator._source), with emlearn computing the network."""
    constants = "".join([
        c_array("obs_mean", spec.obs_mean),
        c_array("obs_inv_std", (1.0 / spec.obs_std.astype(np.float64)).astype(np.float32)),
        c_array("action_low", spec.action_low), c_array("action_high", spec.action_high),
        c_array("action_scale", (spec.action_high - spec.action_low) / np.float32(2)),
        c_array("action_offset", (spec.action_high + spec.action_low) / np.float32(2)),
        c_array("policy_safe_action", spec.safe_action).replace("static const", "const", 1),
    ])
    return f"""/* policy.c: bench/mcu.py's adapter; the network is emlearn's ({model_file}, eml_net_regress). */
#include "policy.h"

#include <math.h>
#include <stddef.h>

#include "{model_file}"

{constants}
static void safe(float *action)
{{
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {{
        action[k] = policy_safe_action[k];
    }}
}}

policy_status_t policy_step(const float *obs, float *action)
{{
    float x[POLICY_OBS_SIZE];
    float y[POLICY_ACTION_SIZE];
    for (int k = 0; k < POLICY_OBS_SIZE; ++k) {{
        if (!isfinite(obs[k])) {{
            safe(action);
            return POLICY_INVALID_INPUT;
        }}
        x[k] = (obs[k] - obs_mean[k]) * obs_inv_std[k];
    }}
    if ({name}_regress(x, POLICY_OBS_SIZE, y, POLICY_ACTION_SIZE) != EmlOk) {{
        safe(action);
        return POLICY_INVALID_OUTPUT;
    }}
    for (int k = 0; k < POLICY_ACTION_SIZE; ++k) {{
        const float a = tanhf(y[k]) * action_scale[k] + action_offset[k];
        if (!isfinite(a)) {{
            safe(action);
            return POLICY_INVALID_OUTPUT;
        }}
        action[k] = a < action_low[k] ? action_low[k] : (a > action_high[k] ? action_high[k] : a);
    }}
    return POLICY_OK;
}}

int policy_self_test(float *max_abs_error)
{{
    if (max_abs_error != NULL) {{
        *max_abs_error = 0.0f;
    }}
    return 0;
}}
"""


def call_graph_stack(c_dir: Path, fma_kernel: bool, root: str = "policy_step") -> int:
    """Bytes of the deepest call chain from `root` in policy.c (GCC -fcallgraph-info=su; external calls: 0)."""
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["arm-none-eabi-gcc", *CFLAGS, f"-DPOLICY_KERNEL_FMA={int(fma_kernel)}", f"-I{c_dir}",
                        "-fcallgraph-info=su", "-c", str(c_dir / "policy.c"), "-o", str(Path(scratch) / "policy.o")],
                       check=True, capture_output=True, cwd=scratch)
        graph = (Path(scratch) / "policy.ci").read_text()
    node = r'node: \{ title: "([^"]+)" label: "[^"]*?\\n(\d+) bytes'
    frames = {m.group(1): int(m.group(2)) for m in re.finditer(node, graph)}
    calls: dict[str, set[str]] = {}
    for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', graph):
        calls.setdefault(m.group(1), set()).add(m.group(2))

    def deepest(function: str, seen: frozenset[str]) -> int:
        if function in seen:
            raise RuntimeError(f"recursion through {function}")
        return frames.get(function, 0) + max((deepest(callee, seen | {function}) for callee in calls.get(function, ())),
                                             default=0)
    return deepest(root, frozenset())


def linked_flash(build: Path) -> int:
    """Flash bytes (allocated PROGBITS: code, constants, .data's initial values) of policy.o that survive
    the harness link's --gc-sections."""
    objects = [str(build / f"{name}.o") for name in ("policy", "main", "startup", "semihost")]
    with tempfile.TemporaryDirectory() as scratch:
        link = subprocess.run(["arm-none-eabi-gcc", *CFLAGS, *LDFLAGS, "-Wl,--print-gc-sections", *objects, "-o",
                               str(Path(scratch) / "image.elf"), "-lm"], check=True, capture_output=True, text=True)
    removed = set(re.findall(r"removing unused section '([^']+)' in file '[^']*policy\.o'", link.stderr))
    sections = subprocess.run(["arm-none-eabi-readelf", "-S", "-W", str(build / "policy.o")],
                              check=True, capture_output=True, text=True).stdout
    total = 0
    for line in sections.splitlines():
        # [Nr] Name Type Addr Off Size ES Flg Lk Inf Al
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+\S+\s+\S+\s+([0-9a-f]+)\s+\S+\s+([A-Za-z]*)\s+\d+\s+\d+\s+\d+",
                     line)
        if m and m.group(2) == "PROGBITS" and "A" in m.group(4) and m.group(1) not in removed:
            total += int(m.group(3), 16)
    return total


def measure(c_dir: Path, vectors: tuple[np.ndarray, np.ndarray, np.ndarray], fma_kernel: bool) -> dict[str, Any]:
    """Build and run on the emulated board; the row's figures."""
    with tempfile.TemporaryDirectory() as build:
        result = verify_on_cortex_m4(c_dir, *vectors, build, fma_kernel=fma_kernel)
        flash = linked_flash(Path(build))
    report = result.report
    return {
        "instructions_per_inference": result.instructions_per_inference,
        "flash_bytes": flash,
        "policy_object_flash_bytes": result.policy_flash_bytes,
        "stack_bytes": call_graph_stack(c_dir, fma_kernel),
        "policy_su_stack_bytes": result.policy_stack_bytes,
        "static_ram_bytes": result.policy_ram_bytes,
        "measured_stack_high_water_bytes": result.measured_stack_bytes,
        "max_abs_error": report["test_vector_max_error_e12"] * 1e-12,
        "test_vectors": report["test_vectors"],
        "test_vector_failures": report["test_vector_failures"],
    }


def rounded_weight_error(actor: TanhGaussianActor, policy: DeterministicPolicy, observations: np.ndarray) -> float:
    """|action change| in PyTorch when every weight and bias is rounded to 6 decimals, as emlearn writes them."""
    finite = observations[np.isfinite(observations).all(1)]
    obs = torch.as_tensor(finite)
    with torch.no_grad():
        exact = policy(obs)
        saved = [p.detach().clone() for p in actor.parameters()]
        for p in actor.parameters():
            p.copy_(torch.round(p.double(), decimals=6).float())
        rounded = policy(obs)
        for p, s in zip(actor.parameters(), saved):
            p.copy_(s)
    return float((rounded - exact).abs().max())


def main() -> None:
    """Build, run and check every row; print the table, write JSON."""
    parser = BenchArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, action=Positive, default=64,
                        help="random test observations per network (+1 NaN)")
    parser.add_argument("--seed", type=int, action=Seed, default=0)  # numpy's generators take no negative
    args = parser.parse_args()
    missing = missing_tools()
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi "
                         "qemu-system-arm make")
    torch.set_num_threads(1)
    rows, networks, emlearn_info = [], [], {}
    with tempfile.TemporaryDirectory() as work:
        for net in NETWORKS:
            actor, spec, policy = make_actor(net, args.seed)
            vectors = test_vectors(policy, spec, args.vectors, args.seed)
            networks.append({"name": net.name, "shape": net.shape, "parameters": spec.parameter_count,
                             "weight_bytes": 4 * spec.parameter_count, "action_range": [net.low, net.high]})
            robo_dir, eml_dir = Path(work) / net.name / "robo_rl", Path(work) / net.name / "emlearn"
            write_robo_rl_c(spec, robo_dir)
            peer = write_emlearn_c(actor, spec, vectors[0][:-1], eml_dir)
            emlearn_info = {"emlearn": peer["emlearn_version"], "scikit-learn": peer["sklearn_version"]}
            for implementation, c_dir, fma in (("robo-rl generic (FMA=0)", robo_dir, False),
                                               ("robo-rl FMA (FMA=1)", robo_dir, True),
                                               (f"emlearn {peer['emlearn_version']} loadable", eml_dir, False)):
                row = {"implementation": implementation, "network": f"{net.name} {net.shape}",
                       **measure(c_dir, vectors, fma)}
                if c_dir == eml_dir:
                    row["sklearn_vs_torch_pre_squash_max_abs_error"] = peer["sklearn_vs_torch_max_abs_error"]
                    row["torch_error_from_6_decimal_weights"] = rounded_weight_error(actor, policy, vectors[0])
                rows.append(row)
                print(f"  {implementation:28s} {net.shape:14s} {row['instructions_per_inference']:8d} instructions",
                      flush=True)
    print(f"\n{'implementation':28s} {'network':30s} {'instr/inf':>10s} {'flash B':>8s} {'stack B':>8s} "
          f"{'static RAM B':>12s} {'max err':>9s} {'fails':>6s}")
    for row in rows:
        print(f"{row['implementation']:28s} {row['network']:30s} {row['instructions_per_inference']:10d} "
              f"{row['flash_bytes']:8d} {row['stack_bytes']:8d} {row['static_ram_bytes']:12d} "
              f"{row['max_abs_error']:9.2e} {row['test_vector_failures']:3d}/{row['test_vectors']}")
    print()
    for net in networks:
        print(f"{net['name']} {net['shape']}: {net['parameters']} parameters, "
              f"{net['weight_bytes']} weight bytes (float32)")
    for row in rows:
        if "torch_error_from_6_decimal_weights" in row:
            print(f"{row['network']}: emlearn writes weights with 6 decimals; that alone moves PyTorch's actions by "
                  f"{row['torch_error_from_6_decimal_weights']:.2e}")
    result = {"board": "qemu-system-arm -M netduinoplus2 (STM32F405, Cortex-M4F), -icount shift=0",
              "tolerance": TOLERANCE, "peers": emlearn_info, "networks": networks, "rows": rows}
    write_results(ROOT / "results" / "mcu.json", result)


if __name__ == "__main__":
    main()
