"""C99 code generator for a `PolicySpec`: one header and one source file, no malloc, static const weights.

The generated `policy_step(const float *obs, float *action)` normalizes the observation, runs the dense
layers from static const weights through two fixed-size scratch buffers on the stack, squashes with tanh,
scales to the action range and clamps. A non-finite observation, or a non-finite value anywhere inside the
network (a huge but finite observation that overflows), returns a status and writes `policy_safe_action`
instead: NaN never comes out. The activations keep NaN as PyTorch's do (ReLU(NaN) = NaN), so C and
PyTorch agree on which inputs give a non-finite result.

Changed weights cannot run silently: the generator stores a checksum of every constant array (FNV-1a over
the float32 bits, `constants_checksum`), and the first `policy_step` checks it and that the safe action is
finite and inside the action range; if not, every step returns `POLICY_INVALID_WEIGHTS`. That verdict is
the policy's only static RAM (one byte). `policy_self_test` re-checks the constants and replays the
(observation, action) pairs recorded from PyTorch at export time.

Two dense kernels, chosen at compile time, both with a fixed summation order:
- generic: one accumulator per output, inputs in order (bit-for-bit a sequential float32 reference
  under `-ffp-contract=off`);
- Cortex-M4F (`POLICY_KERNEL_FMA=1`, the default where the compiler targets a core with an FPU FMA,
  e.g. `-mcpu=cortex-m4 -mfpu=fpv4-sp-d16`): four interleaved `fmaf` accumulators over the inputs, so
  the loop issues one VFMA per weight with no dependency stall, summed pairwise at the end.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from robo_rl.export.policy_spec import LAYER_NORM_EPS, PolicySpec

# C expressions of each activation, applied to a float `x`: torch's definitions, NaN and +-Inf included
# (NaN stays NaN: every comparison with NaN is false, so each expression's last branch must return x or a
# function of it; `x > 0.0f ? x : 0.0f` would turn NaN into 0 where torch's ReLU keeps it)
ACTIVATION_C: dict[str, str] = {
    "relu": "x < 0.0f ? 0.0f : x",
    "tanh": "tanhf(x)",
    "relu6": "x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x)",
    "hardtanh": "x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x)",
    "leaky_relu": "x > 0.0f ? x : 0.01f * x",
    "elu": "x > 0.0f ? x : expm1f(x)",
    "silu": "x / (1.0f + expf(-x))",
}


# FNV-1a (32 bit) over one 32-bit word per float: any single changed value always changes the hash (each step
# is a bijection of the hash and of the word); a guard against edits and corrupted flash, not against an attacker
FNV_OFFSET = 2166136261
FNV_PRIME = 16777619
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The prefix names the files and symbols (<prefix>.h, <prefix>_step, ...): an identifier short enough for
# C89's 31 significant characters with the longest suffix the generator adds, and not a C keyword
C_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,15}")
C_KEYWORDS = frozenset("auto break case char const continue default do double else enum extern float for goto if "
                       "inline int long register restrict return short signed sizeof static struct switch typedef "
                       "union unsigned void volatile while".split())


# firmware/cortex_m4's own sources and the test vectors' header, built beside the policy's <prefix>.c and .h
HARNESS_FILES = ("main", "startup", "semihost", "serial_loop", "test_vectors")


def check_prefix(prefix: object) -> str:
    """`prefix` if it can name the generated C files and symbols; ValueError saying what is allowed otherwise."""
    if not isinstance(prefix, str) or not C_PREFIX.fullmatch(prefix) or prefix in C_KEYWORDS:
        raise ValueError(f"c_prefix={prefix!r} must be a C identifier of 1-16 letters, digits and underscores, "
                         "not starting with a digit and not a C keyword (it names files inside the bundle)")
    if prefix in HARNESS_FILES:
        raise ValueError(f"c_prefix={prefix!r} names a file of the STM32F405 check's harness (firmware/cortex_m4: "
                         f"{', '.join(HARNESS_FILES)}); give another")
    return prefix


def c_float(value: float) -> str:
    """A C float literal that parses back to exactly this float32 (the sign of zero included)."""
    v = np.float32(value)
    if not np.isfinite(v):
        raise ValueError(f"cannot write non-finite {value} as a C constant")
    if v == 0:
        return "-0.0f" if np.signbit(v) else "0.0f"
    return f"{np.format_float_scientific(v, unique=True, precision=None)}f"


def constants_checksum(arrays: Sequence[np.ndarray]) -> int:
    """FNV-1a over the float32 bit patterns of `arrays` (in order, each row-major): what the generated C's
    `constants_intact` computes over its constant arrays."""
    digest = FNV_OFFSET
    for array in arrays:
        for word in np.ascontiguousarray(array, dtype=np.float32).ravel().view(np.uint32).tolist():
            digest = ((digest ^ word) * FNV_PRIME) & 0xFFFFFFFF
    return digest


def c_comment(text: str) -> str:
    """`text` made safe inside a /* */ comment (a `*/` in a description would end it early)."""
    return text.replace("*/", "* /")


def c_array(name: str, values: np.ndarray, per_line: int = 8) -> str:
    """`static const float name[...] = {...};` for a 1-D or 2-D array (row-major, a brace per row)."""
    values = np.asarray(values, dtype=np.float32)
    dims = "".join(f"[{d}]" for d in values.shape)

    def row(entries: np.ndarray, indent: str) -> str:
        flat = [c_float(v) for v in entries]
        return f",\n{indent}".join(", ".join(flat[i:i + per_line]) for i in range(0, len(flat), per_line))

    if values.ndim == 1:
        body = row(values, "    ")
    elif values.ndim == 2:
        body = ",\n    ".join("{" + row(r, "     ") + "}" for r in values)
    else:
        raise ValueError(f"{name}: only 1-D and 2-D arrays, got shape {values.shape}")
    return f"static const float {name}{dims} = {{\n    {body}\n}};\n"


FMA_BLOCK = 8  # outputs per block in the FMA kernel: 8 accumulators + input + weights fit the M4F's 32 registers


def blocked_weights(weight: np.ndarray, block: int = FMA_BLOCK) -> np.ndarray:
    """The FMA kernel's weight order (flat): full blocks of `block` rows stored input-major
    (w[o + r][i] at (o * n_in + i * block + r)), then the leftover rows row-major."""
    n_out, n_in = weight.shape
    full = n_out // block * block
    blocks = weight[:full].reshape(-1, block, n_in).transpose(0, 2, 1).ravel()
    return np.concatenate([blocks, weight[full:].ravel()])


def generate_c(spec: PolicySpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]], prefix: str = "policy",
               tolerance: float = 1e-5, description: str = "") -> dict[str, str]:
    """C sources for `spec`: {"<prefix>.h": ..., "<prefix>.c": ...}.

    pairs: recorded (observation, action) pairs for `<prefix>_self_test`; tolerance: its absolute bound.
    Raises ValueError, naming the input, for what the C cannot hold: a prefix that is not a C identifier,
    non-finite constants, a safe action outside the action range, a tolerance that is not finite and > 0.
    """
    if spec.activation not in ACTIVATION_C:
        raise ValueError(f"no C for activation {spec.activation!r}")
    check_prefix(prefix)
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance must be finite and > 0, got {tolerance}")
    _check_finite(spec, pairs)
    up = prefix.upper()
    widths = [spec.obs_size, *spec.hidden_sizes, spec.action_size]
    header = _header(spec, prefix, up, len(pairs), max(widths), tolerance, description)
    source = _source(spec, pairs, prefix, up)
    return {f"{prefix}.h": header, f"{prefix}.c": source}


def _check_finite(spec: PolicySpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    """ValueError naming the first non-finite constant, or a safe action outside [action_low, action_high]."""
    named = {"obs_mean": spec.obs_mean, "obs_std": spec.obs_std, "action_low": spec.action_low,
             "action_high": spec.action_high, "safe_action": spec.safe_action}
    for i, layer in enumerate(spec.layers):
        named.update({f"layers[{i}].weight": layer.weight, f"layers[{i}].bias": layer.bias})
        if layer.norm_weight is not None:
            named.update({f"layers[{i}].norm_weight": layer.norm_weight, f"layers[{i}].norm_bias": layer.norm_bias})
    for p, (observation, action) in enumerate(pairs):
        named.update({f"pairs[{p}] observation": observation, f"pairs[{p}] action": action})
    for name, values in named.items():
        values = np.asarray(values, dtype=np.float32)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} has non-finite values ({values.ravel()[~np.isfinite(values.ravel())][:3]}); "
                             "the C policy needs finite constants")
    safe = np.asarray(spec.safe_action, np.float32)
    if not (np.all(spec.action_low <= safe) and np.all(safe <= spec.action_high)):
        raise ValueError(f"safe_action {safe} must lie inside [action_low, action_high] = "
                         f"[{spec.action_low}, {spec.action_high}]")


def _header(spec: PolicySpec, prefix: str, up: str, n_pairs: int, max_width: int, tolerance: float,
            description: str) -> str:
    shape = "-".join(str(w) for w in [spec.obs_size, *spec.hidden_sizes, spec.action_size])
    return f"""/* {prefix}.h: generated by robo_rl.export; do not edit.
 * {c_comment(description) or 'Policy network'}
 * Network {shape}, {spec.activation} hidden activation{', LayerNorm' if spec.layer_norm else ''}, tanh output scaled to
 * the action range. C99, no dynamic memory; weights are static const (flash on a microcontroller).
 */
#ifndef {up}_H
#define {up}_H

#ifdef __cplusplus
extern "C" {{
#endif

#define {up}_OBS_SIZE {spec.obs_size}
#define {up}_ACTION_SIZE {spec.action_size}
#define {up}_NUM_LAYERS {len(spec.layers)}
#define {up}_MAX_WIDTH {max_width}
#define {up}_NUM_PARAMETERS {spec.parameter_count}
#define {up}_NUM_SELF_TEST_PAIRS {n_pairs}
#define {up}_SELF_TEST_TOLERANCE {c_float(tolerance)}

typedef enum {{
    {up}_OK = 0,              /* action computed by the network */
    {up}_INVALID_INPUT = 1,   /* an observation entry was NaN or Inf: action = {prefix}_safe_action */
    {up}_INVALID_OUTPUT = 2,  /* a value inside the network or the result was NaN or Inf (a finite observation
                               * so large that it overflows): action = {prefix}_safe_action */
    {up}_INVALID_WEIGHTS = 3  /* the constants differ from the exported ones (checksum) or the safe action is
                               * not finite inside the action range: action = {prefix}_safe_action, its
                               * non-finite entries as 0; every step returns this */
}} {prefix}_status_t;

/* The action written for any status other than {up}_OK; callers should treat such a status as a fault
 * and hand control to their fallback controller. */
extern const float {prefix}_safe_action[{up}_ACTION_SIZE];

/* obs: {spec.obs_size} floats laid out as policy.json describes. action: {spec.action_size} floats, each
 * within [low, high] of policy.json. Its scratch takes {(2 * max_width + spec.obs_size) * 4} bytes of stack, or of
 * static RAM when compiled with -D{up}_STATIC_SCRATCH (then not reentrant). The first call also checks the constants'
 * checksum (a one-off cost of the order of an inference) and keeps the verdict in one static byte: call it (or
 * {prefix}_self_test) once before concurrent use. */
{prefix}_status_t {prefix}_step(const float *obs, float *action);

/* Checks the constants (checksum, safe action) and runs the recorded (observation, action) pairs; returns
 * the number of failures: pairs that differ by more than {up}_SELF_TEST_TOLERANCE in any entry or do not
 * return {up}_OK, plus 1 if the constants are not intact (0: pass). max_abs_error may be NULL. */
int {prefix}_self_test(float *max_abs_error);

#ifdef __cplusplus
}}
#endif

#endif /* {up}_H */
"""


def c_constants(spec: PolicySpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                prefix: str = "policy") -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every constant array of the generated C, in the order of its checksum table: (C name, values for the
    generic kernel, values for the FMA kernel), flat float32; the two are the same object except for weights."""
    constants: list[tuple[str, np.ndarray, np.ndarray]] = []

    def add(name: str, values: np.ndarray, fma_values: np.ndarray | None = None) -> None:
        values = np.asarray(values, dtype=np.float32).ravel()
        constants.append((name, values, values if fma_values is None else np.asarray(fma_values, np.float32)))

    add("obs_mean", spec.obs_mean)
    add("obs_inv_std", (1.0 / spec.obs_std.astype(np.float64)).astype(np.float32))
    add("action_low", spec.action_low)
    add("action_high", spec.action_high)
    # the actor's own float32 constants: action = tanh(y) * (high - low) / 2 + (high + low) / 2
    add("action_scale", (spec.action_high - spec.action_low) / np.float32(2))
    add("action_offset", (spec.action_high + spec.action_low) / np.float32(2))
    add(f"{prefix}_safe_action", spec.safe_action)
    for i, layer in enumerate(spec.layers):
        add(f"w{i}", layer.weight, fma_values=blocked_weights(layer.weight))
        add(f"b{i}", layer.bias)
        if layer.norm_weight is not None:
            add(f"ln_w{i}", layer.norm_weight)
            add(f"ln_b{i}", layer.norm_bias)
    if pairs:  # flat, pair after pair: the checksum reads each array through one pointer, within its bounds
        add("self_test_obs", np.concatenate([np.asarray(o, np.float32).ravel() for o, _ in pairs]))
        add("self_test_action", np.concatenate([np.asarray(a, np.float32).ravel() for _, a in pairs]))
    return constants


def _source(spec: PolicySpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]], prefix: str, up: str) -> str:
    parts = [f"""/* {prefix}.c: generated by robo_rl.export; do not edit (the constants are checksummed). */
#include "{prefix}.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The NaN and infinity checks that fault on a bad observation or an overflow inside the network assume IEEE
 * semantics, which these flags compile away without a word (the self-test still passes). */
#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "{prefix}.c must not be compiled with -ffast-math or -ffinite-math-only: its NaN and infinity checks need IEEE floats"
#endif

#ifndef {up}_KERNEL_FMA
#if defined(__ARM_FEATURE_FMA) && defined(__ARM_FP)
#define {up}_KERNEL_FMA 1
#else
#define {up}_KERNEL_FMA 0
#endif
#endif

"""]
    constants = c_constants(spec, pairs, prefix)
    for name, generic, fma in constants:
        if generic is fma:
            text = c_array(name, generic)
            parts.append(text.replace("static const", "const", 1) if name == f"{prefix}_safe_action" else text)
        else:
            parts.append(f"#if {up}_KERNEL_FMA /* rows in blocks of {FMA_BLOCK}, input-major inside a block */\n")
            parts.append(c_array(name, fma))
            parts.append("#else\n")
            parts.append(c_array(name, generic))
            parts.append("#endif\n")
    table = "\n".join(f"    {{{name}, {values.size}}}," for name, values, _ in constants)
    checksum_fma = constants_checksum([fma for _, _, fma in constants])
    checksum_generic = constants_checksum([generic for _, generic, _ in constants])
    parts.append(f"""
/* Every constant array above, in order, for the checksum. */
static const struct {{
    const float *values;
    size_t count;
}} constants[] = {{
{table}
}};

/* FNV-1a over the float32 bits of the constants, as robo_rl.export.c_generator.constants_checksum computed it. */
#if {up}_KERNEL_FMA
#define CONSTANTS_CHECKSUM 0x{checksum_fma:08x}u
#else
#define CONSTANTS_CHECKSUM 0x{checksum_generic:08x}u
#endif

/* 1 if the constants are the exported ones and the safe action is finite inside the action range: an edited
 * weight or a corrupted flash word must not fly. */
static int constants_intact(void)
{{
    uint32_t hash = {FNV_OFFSET}u;
    for (size_t a = 0; a < sizeof constants / sizeof constants[0]; ++a) {{
        for (size_t k = 0; k < constants[a].count; ++k) {{
            uint32_t bits;
            memcpy(&bits, &constants[a].values[k], sizeof bits);
            hash = (uint32_t)((hash ^ bits) * {FNV_PRIME}u);
        }}
    }}
    int intact = hash == CONSTANTS_CHECKSUM;
    for (int k = 0; k < {up}_ACTION_SIZE; ++k) {{ /* false for NaN */
        intact &= {prefix}_safe_action[k] >= action_low[k] && {prefix}_safe_action[k] <= action_high[k];
    }}
    return intact;
}}
""")
    fma_lines = "\n".join(f"            acc[{r}] = fmaf(wi[{r}], xi, acc[{r}]);" for r in range(FMA_BLOCK))
    parts.append(f"""
/* y[o] = b[o] + sum_i w[o][i] x[i], each sum in input order. Returns 0 if every y[o] is finite, else NaN:
 * y * 0 is 0 for a finite y and NaN for NaN or Inf, so the sum of them costs one multiply-add per output
 * (ISO C forbids folding y * 0 to 0; -ffinite-math-only, part of -ffast-math, breaks this and isfinite alike).
 * The caller faults on an overflow inside the network even where a later tanh would hide it (tanh(Inf) = 1). */
static float dense(const float *w, const float *b, const float *x, float *y, int n_in, int n_out)
{{
    float zero = 0.0f;
#if {up}_KERNEL_FMA
    /* {FMA_BLOCK} outputs at a time: each input is loaded once for {FMA_BLOCK} fused multiply-adds, and the block's
     * weights for that input are adjacent (one multiple load); leftover rows follow row-major. */
    int o = 0;
    for (; o + {FMA_BLOCK} <= n_out; o += {FMA_BLOCK}) {{
        float acc[{FMA_BLOCK}] = {{0.0f}};
        const float *wi = w + (size_t)o * (size_t)n_in;
        for (int i = 0; i < n_in; ++i, wi += {FMA_BLOCK}) {{
            const float xi = x[i];
{fma_lines}
        }}
        for (int r = 0; r < {FMA_BLOCK}; ++r) {{
            y[o + r] = b[o + r] + acc[r];
            zero += y[o + r] * 0.0f;
        }}
    }}
    for (; o < n_out; ++o) {{
        const float *row = w + (size_t)o * (size_t)n_in;
        float acc = 0.0f;
        for (int i = 0; i < n_in; ++i) {{
            acc = fmaf(row[i], x[i], acc);
        }}
        y[o] = b[o] + acc;
        zero += y[o] * 0.0f;
    }}
#else
    for (int o = 0; o < n_out; ++o) {{
        const float *row = w + (size_t)o * (size_t)n_in;
        float acc = 0.0f;
        for (int i = 0; i < n_in; ++i) {{
            acc += row[i] * x[i];
        }}
        y[o] = b[o] + acc;
        zero += y[o] * 0.0f;
    }}
#endif
    return zero;
}}

static void activate(float *v, int n)
{{
    for (int k = 0; k < n; ++k) {{
        const float x = v[k];
        v[k] = {ACTIVATION_C[spec.activation]};
    }}
}}
""")
    if spec.layer_norm:
        parts.append(f"""
static void layer_norm(float *v, const float *gain, const float *bias, int n)
{{
    float mean = 0.0f, var = 0.0f;
    for (int k = 0; k < n; ++k) {{
        mean += v[k];
    }}
    mean /= (float)n;
    for (int k = 0; k < n; ++k) {{
        const float d = v[k] - mean;
        var += d * d;
    }}
    const float inv = 1.0f / sqrtf(var / (float)n + {c_float(LAYER_NORM_EPS)});
    for (int k = 0; k < n; ++k) {{
        v[k] = (v[k] - mean) * inv * gain[k] + bias[k];
    }}
}}
""")
    body = []
    buffers = ("h0", "h1")
    source_name = "x"
    for i, layer in enumerate(spec.layers):
        n_out, n_in = layer.weight.shape
        target = buffers[i % 2]
        body.append(f"    if (dense(w{i}, b{i}, {source_name}, {target}, {n_in}, {n_out}) != 0.0f) {{\n"
                    f"        safe(action);\n        return {up}_INVALID_OUTPUT;\n    }}")
        if i < len(spec.layers) - 1:
            if layer.norm_weight is not None:  # its NaN (from an overflowing variance) reaches the next check
                body.append(f"    layer_norm({target}, ln_w{i}, ln_b{i}, {n_out});")
            body.append(f"    activate({target}, {n_out});")
        source_name = target
    out = source_name
    layers_code = "\n".join(body)
    parts.append(f"""
/* The safe action, non-finite entries as 0: it is written when the constants are corrupt too. */
static void safe(float *action)
{{
    for (int k = 0; k < {up}_ACTION_SIZE; ++k) {{
        const float a = {prefix}_safe_action[k];
        action[k] = isfinite(a) ? a : 0.0f;
    }}
}}

/* 0: not checked yet, 1: the constants are intact, 2: they are not. Set by the first {prefix}_step. */
static unsigned char constants_state;

{prefix}_status_t {prefix}_step(const float *obs, float *action)
{{
#ifdef {up}_STATIC_SCRATCH /* scratch in .bss instead of on the stack: for small task stacks, not reentrant */
    static float x[{up}_OBS_SIZE];
    static float h0[{up}_MAX_WIDTH];
    static float h1[{up}_MAX_WIDTH];
#else
    float x[{up}_OBS_SIZE];
    float h0[{up}_MAX_WIDTH];
    float h1[{up}_MAX_WIDTH];
#endif
    if (constants_state == 0u) {{
        constants_state = constants_intact() ? 1u : 2u;
    }}
    if (constants_state != 1u) {{
        safe(action);
        return {up}_INVALID_WEIGHTS;
    }}
    for (int k = 0; k < {up}_OBS_SIZE; ++k) {{
        if (!isfinite(obs[k])) {{
            safe(action);
            return {up}_INVALID_INPUT;
        }}
        x[k] = (obs[k] - obs_mean[k]) * obs_inv_std[k];
    }}
{layers_code}
    for (int k = 0; k < {up}_ACTION_SIZE; ++k) {{
        const float a = tanhf({out}[k]) * action_scale[k] + action_offset[k];
        if (!isfinite(a)) {{
            safe(action);
            return {up}_INVALID_OUTPUT;
        }}
        action[k] = a < action_low[k] ? action_low[k] : (a > action_high[k] ? action_high[k] : a);
    }}
    return {up}_OK;
}}
""")
    if pairs:
        loop = f"""    for (int p = 0; p < {up}_NUM_SELF_TEST_PAIRS; ++p) {{
        float action[{up}_ACTION_SIZE];
        int bad = {prefix}_step(&self_test_obs[p * {up}_OBS_SIZE], action) != {up}_OK;
        for (int k = 0; k < {up}_ACTION_SIZE; ++k) {{
            const float e = fabsf(action[k] - self_test_action[p * {up}_ACTION_SIZE + k]);
            worst = e > worst ? e : worst;
            bad |= !(e <= {up}_SELF_TEST_TOLERANCE);
        }}
        failures += bad;
    }}
"""
    else:
        loop = ""
    parts.append(f"""
int {prefix}_self_test(float *max_abs_error)
{{
    int failures = !constants_intact(); /* checked again: the flash may have changed since the first step */
    float worst = 0.0f;
{loop}    if (max_abs_error != NULL) {{
        *max_abs_error = worst;
    }}
    return failures;
}}
""")
    return "".join(parts)


def generate_layout_header(layout: Sequence[dict], control_hz: float, constants: dict[str, float],
                           prefix: str = "policy") -> str:
    """`<prefix>_layout.h`: the observation layout (offset and size per named field), the control rate and
    target constants (e.g. the vehicle's thrust_max) as #defines, for the glue that builds observations."""
    check_prefix(prefix)
    for name in [field["name"] for field in layout] + list(constants):
        if not C_IDENTIFIER.fullmatch(str(name)):
            raise ValueError(f"layout field and constant names must be C identifiers, got {name!r}")
    offset = 0
    for field in layout:  # contiguous and in order: the glue writes each field at its offset
        if int(field["offset"]) != offset or int(field["size"]) <= 0:
            raise ValueError(f"layout field {field['name']!r} at offset {field['offset']} (size {field['size']}) "
                             f"does not follow the previous fields, which end at {offset}")
        offset += int(field["size"])
    up = prefix.upper()
    lines = [f"/* {prefix}_layout.h: generated by robo_rl.export from policy.json; do not edit. */",
             f"#ifndef {up}_LAYOUT_H", f"#define {up}_LAYOUT_H", "", f"#define {up}_CONTROL_HZ {int(round(control_hz))}"]
    for field in layout:
        name = field["name"].upper()
        lines.append(f"#define {up}_OBS_{name}_OFFSET {field['offset']}  "
                     f"/* {c_comment(str(field['unit']))}: {c_comment(str(field['description']))} */")
        lines.append(f"#define {up}_OBS_{name}_SIZE {field['size']}")
    # the fields' total: glue that includes <prefix>.h too checks it against {up}_OBS_SIZE at compile time
    lines.append(f"#define {up}_OBS_LAYOUT_SIZE {offset}")
    for name, value in constants.items():
        text = str(value) if isinstance(value, int) else c_float(value)
        lines.append(f"#define {up}_{name.upper()} {text}")
    lines += ["", f"#endif /* {up}_LAYOUT_H */", ""]
    return "\n".join(lines)
