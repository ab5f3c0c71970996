"""The quadrotor control step as one generated C++ loop over vehicles: the torch backend's CPU kernel.

torch.compile splits `QuadrotorBatch._transition` into about 30 loops over feature-major buffers
(rotor model, physics, history, reward terms, observation, restart), and on a CPU the step then costs
about 15x its rigid-body part. `native_step.cpp` does the whole step in a single pass, 16 vehicles at a
time with AVX-512 and 8 with AVX2 (one vector register per quantity), reading and writing the batch's own
tensors (state in place, outputs fresh); restarts are only done in blocks where an episode ended. The task's constants are written
into a generated header, so each configuration compiles (g++, about 1 s on a 2-core Xeon, cached by
content under `cache_dir()`) to straight-line code. `QuadrotorBatch._transition` remains the reference
(tests compare the two) and the path on other devices and dtypes.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import torch

from sim.errors import ConfigError
from sim.kernel_expr import CppMath, Expr
from sim.quadrotor import episode_starts as starts
from sim.quadrotor import motor, rotations
from sim.quadrotor.observation import limited_position_error
from sim.quadrotor.tasks import StepValues

if TYPE_CHECKING:
    from sim.quadrotor.core import QuadrotorBatch, StepResult

SOURCE = Path(__file__).with_name("native_step.cpp")
COMPILER = os.environ.get("CXX", "g++")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-std=c++17",
         "-shared", "-fPIC")
# The kernel's arguments, declared once: their order in the pointer array it receives (ARG_<name>), and what
# each is, from which the kernel's `Arrays` struct and its unpacking are generated (`arguments_header`):
# "rows" a feature-major float32 array (quantity f of env i at f * stride + i), "int64" and "flags" int64 and
# bool arrays over the envs, "starts" env-major float64 episode starts (START_SIZE from env * stride), "key"
# one int64 read as a value, "action" the actions (N, 4) float32.
ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("state", "rows"), ("rotor_speed", "rows"), ("history", "rows"), ("pending", "rows"),
    ("previous_action", "rows"), ("steps", "rows"), ("success_count", "rows"), ("latency", "int64"),
    ("thrust_scale", "rows"), ("decay_rise", "rows"), ("decay_fall", "rows"), ("targets", "rows"), ("mass", "rows"),
    ("inertia", "rows"), ("yaw_coefficients", "rows"), ("force", "rows"), ("torque", "rows"),
    ("episode", "int64"),  # index of each env's current episode
    ("current_start", "starts"),  # each env's current start
    ("next_start", "starts"),  # each env's next start, drawn ahead (see NextStarts in the kernel)
    ("next_episode", "int64"),  # the episode whose start next_start holds, per env
    ("next_key", "int64"),  # the seed's key the next starts were drawn with, and whether they were
    ("start_key", "key"), ("action", "action"), ("noise", "rows"), ("final_noise", "rows"),
    ("observation", "rows"), ("reward", "rows"), ("terms", "rows"), ("terminated", "flags"), ("truncated", "flags"),
    ("is_success", "flags"), ("ended", "flags"), ("final_observation", "rows"), ("privileged", "rows"),
    ("final_privileged", "rows"), ("thrust_curve", "rows"), ("arm_scale", "rows"), ("state_history", "rows"),
    ("last_observed", "rows"),
    ("predicted_state", "rows"), ("predicted_speed", "rows"),  # quadrotor_predict's outputs (NativeStep.predict)
)
ARGS = tuple(name for name, _ in ARGUMENTS)
PAD = 16  # elements added to each row of the kernel's feature-major arrays (see padded_rows)
# the state the kernel keeps across steps (updated in place, the key read only): public attributes of
# QuadrotorBatch and of its TorchPhysics, named as the kernel's arguments except where STATE_ARGUMENTS says
STATE_OF_BATCH = ("current_starts", "start_key", "rotor_speed", "history", "pending", "previous_action", "steps",
                  "success_count", "latency", "thrust_scale", "decay_rise", "decay_fall", "targets", "episode",
                  "thrust_curve", "state_history", "last_observed")
STATE_OF_PHYSICS = ("buffer", "mass", "inertia", "yaw_coefficients", "force", "torque", "arm_scale")
STATE_ARGUMENTS = {"buffer": "state", "current_starts": "current_start"}  # the kernel's names where they differ


class BuildError(RuntimeError):
    """The compiler failed on the kernel (its message holds the command and the compiler's output)."""


def cache_dir() -> Path:
    """Where built kernels are kept: $ROBO_RL_CACHE or $XDG_CACHE_HOME/robo_rl (default ~/.cache/robo_rl)."""
    root = os.environ.get("ROBO_RL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "robo_rl"
    return Path(root) / "native_step"


def available(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether the native kernel can run the step: float32 tensors on an x86-64 Linux CPU (glibc's vector
    math library) with a C++ compiler."""
    return (torch.device(device).type == "cpu" and dtype == torch.float32 and platform.system() == "Linux"
            and platform.machine() == "x86_64" and shutil.which(COMPILER) is not None)


def _cpu_signature() -> str:
    """What -march=native compiles for: the CPU's model and instruction-set flags (a cache shared by
    machines, e.g. a network home directory, must not hand one CPU's library to another)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    wanted = ("model name", "flags")
    return "\n".join(next((line for line in lines if line.startswith(key)), "") for key in wanted)


def _float(value: float) -> str:
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"{float(value)!r}f"


def headers(batch: QuadrotorBatch) -> dict[str, str]:
    """The generated headers the kernel includes, by file name: the configuration's constants, and the task's
    functions traced from its task object in float (the step) and double precision (episode starts)."""
    return {"native_step_config.h": header(batch), "native_step_arguments.h": arguments_header(),
            **task_headers(batch)}


def arguments_header() -> str:
    """The kernel's `Arrays` (its arguments by name) and `unpack`, which fills them from the pointer and stride
    arrays in the order of `ARGUMENTS`."""
    members = {"rows": "Rows {name};", "int64": "int64_t* {name};", "flags": "bool* {name};",
               "starts": "double* {name};\n  int64_t {name}_stride;", "key": "uint64_t {name};",
               "action": "const float* {name};"}
    unpack = {"rows": "a.{name} = Rows{{(float*)pointers[{i}], strides[{i}]}};",
              "int64": "a.{name} = (int64_t*)pointers[{i}];", "flags": "a.{name} = (bool*)pointers[{i}];",
              "starts": "a.{name} = (double*)pointers[{i}];\n  a.{name}_stride = strides[{i}];",
              "key": "a.{name} = (uint64_t)*(const int64_t*)pointers[{i}];",
              "action": "a.{name} = (const float*)pointers[{i}];"}
    lines = ["// generated by sim/quadrotor/native_step.py from ARGUMENTS", "#pragma once", "struct Arrays {"]
    lines += [f"  {members[kind].format(name=name)}" for name, kind in ARGUMENTS]
    lines += ["};", "", "inline Arrays unpack(void* const* pointers, const int64_t* strides) {", "  Arrays a;"]
    lines += [f"  {unpack[kind].format(name=name, i=index)}" for index, (name, kind) in enumerate(ARGUMENTS)]
    lines += ["  return a;", "}"]
    lines += [f"#define ARG_{name} {index}" for index, name in enumerate(ARGS)]
    return "\n".join(lines) + "\n"


def header(batch: QuadrotorBatch) -> str:
    """The C++ header of `batch`'s constants: rotor model, vehicle, task bounds, reward scales, layout."""
    config, params = batch.config, batch.params
    c0, c1, c2 = batch.constants.thrust_curve
    scales, terms = batch.constants.reward_scales, batch.task.term_names
    unknown = set(scales) - set(terms)
    if unknown:
        raise ConfigError(f"the native step has no reward terms {sorted(unknown)}")
    reward = " + ".join(f"{_float(scale)} * (t)[TERM_{name}]" for name, scale in scales.items()) or "0.0f"
    noise_std = [0.0] * 18 if batch.noise_std is None else [float(v) for v in batch.noise_std.flatten().tolist()]
    defines: dict[str, str] = {
        "SUBSTEPS": str(batch.substeps), "TIMESTEP": _float(params.timestep),
        "GRAVITY": _float(params.gravity),  # (read by kernel sources before TIMESTEP_GRAVITY: bench/native_kernel.py --sources)
        "TIMESTEP_GRAVITY": _float(params.timestep * params.gravity),
        "CONTROL_DT": _float(config.control_dt),
        "THRUST_C0": _float(c0), "THRUST_C1": _float(c1), "THRUST_C2": _float(c2), "THRUST_SUM": _float(c0 + c1 + c2),
        "HOVER_COMMAND": _float(batch.constants.hover_command), "HOVER_ROTOR_SPEED": _float(batch.constants.hover_rotor_speed),
        "COMMAND_MAX": _float(batch.constants.command_max), "COMMAND_CUTOFF": _float(batch.constants.command_cutoff),
        "NOMINAL_MASS": _float(params.mass), "NOMINAL_YAW0": _float(params.yaw_torque_coefficients[0]),
        "NOMINAL_THRUST_MAX": _float(params.thrust_max),
        "DISTURBANCE_FORCE": _float(batch.constants.disturbance_bounds[0]),
        "DISTURBANCE_TORQUE": _float(batch.constants.disturbance_bounds[1]),
        "MAX_LATENCY": str(batch.constants.max_latency), "ACTION_HISTORY": str(config.action_history),
        "STATE_HISTORY": str(config.state_history),
        "FLOOR": str(int(config.floor_height is not None)),
        "FLOOR_HEIGHT": _float(config.floor_height or 0.0),
        "SUCCESS_WINDOW": _float(max(batch.constants.success_window_steps, 1)), "EPISODE_STEPS": _float(config.episode_steps),
        "NOISE": str(int(batch.noise is not None)), "AUTORESET": str(int(batch.autoreset)),
        "PRIVILEGED": str(int(batch.privileged)), "NUM_TERMS": str(len(terms)),
        "REWARD_SUM(t)": f"({reward})",
    }
    for index, x in enumerate(params.rotor_positions[:, 0]):
        defines[f"ROTOR_X{index}"] = _float(x)
    for index, y in enumerate(params.rotor_positions[:, 1]):
        defines[f"ROTOR_Y{index}"] = _float(y)
    defines.update({f"TERM_{name}": str(index) for index, name in enumerate(terms)})
    defines.update({f"START_{name}": str(offset) for name, offset in starts.START_OFFSETS.items()})
    defines["START_SIZE"] = str(starts.START_SIZE)
    defines.update({f"U_{name}": str(offset) for name, offset in starts.UNIFORM_OFFSETS.items()})
    defines.update(_start_constants(batch))
    lines = ["// generated by sim/quadrotor/native_step.py: the constants of one task configuration",
             "#pragma once"]
    lines += [f"#define {name} {value}" for name, value in defines.items()]
    lines.append(f"static const float NOISE_STD[18] = {{{', '.join(_float(v) for v in noise_std)}}};")
    vectors = {"NOMINAL_INERTIA": params.inertia, "NOMINAL_YAW": params.yaw_torque_coefficients,
               "NOMINAL_CURVE": params.thrust_curve, "CENTER": config.center}
    lines += [f"static const double {name}[{len(v)}] = {{{', '.join(repr(float(x)) for x in v)}}};"
              for name, v in vectors.items()]
    # what the privileged observation divides by or subtracts (QuadrotorBatch._privileged), as float32
    lines.append(f"static const float INERTIA_F[3] = {{{', '.join(_float(v) for v in params.inertia)}}};")
    lines.append(f"static const float CURVE_F[3] = {{{', '.join(_float(v) for v in params.thrust_curve)}}};")
    return "\n".join(lines) + "\n"


def task_headers(batch: QuadrotorBatch) -> dict[str, str]:
    """The task's functions as C++, traced from `batch.task` (sim.kernel_expr): task_reference,
    task_terminated, task_reward_terms and task_within_success on the step's float vectors (V, StepRows in
    the kernel), vehicle_hover_commands (motor.hover_commands) and observed_position_error
    (observation.limited_position_error) likewise, and task_targets on the episode
    starts' double vectors (DV)."""
    task, config = batch.task, batch.config

    def rows(m: CppMath, name: str, count: int) -> list[Expr]:
        return [m.input(f"{name}[{k}]") for k in range(count)]

    m = CppMath("float")
    position, velocity = task.reference(m, config, rows(m, "target", 3), m.input("t"))
    functions = [m.function("inline void task_reference(V t, const V target[3], V position[3], V velocity[3])",
                            [(f"position[{k}]", position[k]) for k in range(3)]
                            + [(f"velocity[{k}]", velocity[k]) for k in range(3)])]

    def step_values(m: CppMath) -> StepValues:
        fields = ("position", "velocity", "angular_velocity", "position_error", "velocity_error")
        return StepValues(*(rows(m, f"s.{name}", 3) for name in fields), m.input("s.uprightness"),
                          rows(m, "s.command", 4), rows(m, "s.previous_command", 4), rows(m, "s.hover_command", 4))

    m = CppMath("float")
    functions.append(m.function("inline void task_terminated(const StepRows& s, M& terminated)",
                                [("terminated", task.terminated(m, step_values(m), config))]))
    m = CppMath("float")
    terms = task.reward_terms(m, step_values(m), m.input("terminated"), config)
    if tuple(terms) != task.term_names:
        raise ConfigError(f"task {task.name}'s reward_terms gives {tuple(terms)}, its term_names are {task.term_names}")
    functions.append(m.function("inline void task_reward_terms(const StepRows& s, M terminated, V term[NUM_TERMS])",
                                [(f"term[TERM_{name}]", value) for name, value in terms.items()]))
    m = CppMath("float")
    functions.append(m.function("inline void task_within_success(const StepRows& s, M& within)",
                                [("within", task.within_success(m, step_values(m), config))]))
    m = CppMath("float")
    hover = motor.hover_commands(m, m.input("mass"), rows(m, "scale", 4), rows(m, "curve", 3),
                                 batch.constants.thrust_curve, float(batch.params.gravity))
    functions.append(m.function("inline void vehicle_hover_commands(V mass, const V scale[4], const V curve[3], V hover[4])",
                                [(f"hover[{r}]", hover[r]) for r in range(4)]))
    m = CppMath("float")
    limited = limited_position_error(m, rows(m, "error", 3), config.position_error_limit)
    functions.append(m.function("inline void observed_position_error(const V error[3], V limited[3])",
                                [(f"limited[{k}]", limited[k]) for k in range(3)]))
    m = CppMath("double")
    target = task.targets(m, rows(m, "u", 3), config)
    starts_function = m.function("inline void task_targets(const DV u[3], DV target[3])",
                                 [(f"target[{k}]", target[k]) for k in range(3)])
    note = f"// generated by sim/quadrotor/native_step.py from task {task.name!r} (sim.quadrotor.tasks)\n#pragma once\n"
    return {"native_step_task.h": note + "\n\n".join(functions) + "\n",
            "native_step_task_starts.h": note + starts_function + "\n"}


def _start_constants(batch: QuadrotorBatch) -> dict[str, str]:
    """The double-precision constants of `episode_starts.draw` for the batch's task (draw_start in the kernel)."""
    config, params, randomization = batch.config, batch.params, batch.config.randomization
    init = config.initial_state
    bound = min(max(math.radians(init.max_tilt_deg), 0.0), math.pi)  # as rotations.tilt_angle
    low, high = (int(v) for v in randomization.latency_steps)
    values: dict[str, float] = {
        "NOMINAL_MASS_D": params.mass, "NOMINAL_TAU_RISE": params.motor_tau_rise, "NOMINAL_TAU_FALL": params.motor_tau_fall,
        "DISTURBANCE_FORCE_D": randomization.disturbance_force, "DISTURBANCE_TORQUE_D": randomization.disturbance_torque,
        "LATENCY_LOW": low, "LATENCY_COUNT": high - low + 1, "TIMESTEP_D": params.timestep,
        "POSITION_RANGE": init.position_range, "VELOCITY_RANGE": init.velocity_range,
        "ANGULAR_VELOCITY_RANGE": init.angular_velocity_range, "HOVER_FRACTION": init.hover_fraction,
        "TILT_TARGET_SCALE": bound - math.sin(bound), "TWO_PI": 2.0 * math.pi,
    }
    for name in ("mass_scale", "inertia_scale", "thrust_scale", "yaw_torque_scale", "motor_tau_scale",
                 "arm_length_scale", "thrust_curve_linear_share", "motor_tau_rise_scale", "motor_tau_fall_scale"):
        values[f"{name.upper()}_LOW"], values[f"{name.upper()}_HIGH"] = getattr(randomization, name)
    ratio = randomization.thrust_to_weight
    values["THRUST_TO_WEIGHT_LOW"], values["THRUST_TO_WEIGHT_HIGH"] = ratio if ratio is not None else (0.0, 0.0)
    values["INERTIA_SIZE_LOG_LOW"], values["INERTIA_SIZE_LOG_HIGH"] = (math.log(v) for v in randomization.inertia_size_scale)
    values["THRUST_MAX_D"] = params.thrust_max
    values["WEIGHT_TO_THRUST"] = params.gravity / (4.0 * params.thrust_max)  # as randomization._thrust_curve
    defines = {name: f"({float(value)!r})" for name, value in values.items()}
    defines.update(RANDOMIZE=str(int(randomization.enabled)),
                   VEHICLE_PARAMETERS=str(int(randomization.vehicle_parameters)),
                   INERTIA_FOLLOWS_MASS_AND_ARM=str(int(randomization.inertia_follows_mass_and_arm)),
                   DRAW_THRUST_TO_WEIGHT=str(int(ratio is not None)), NEWTON_STEPS=str(rotations.NEWTON_STEPS))
    return defines


def build(header_files: Mapping[str, str]) -> Path:
    """Compile the kernel with its generated headers (file name -> text; once per content, concurrent
    builders are safe) and return the library."""
    source = SOURCE.read_text()
    texts = [text for name in sorted(header_files) for text in (name, header_files[name])]
    key = hashlib.sha256("\0".join([source, *texts, COMPILER, *FLAGS, _cpu_signature()]).encode()).hexdigest()[:24]
    library = cache_dir() / f"quadrotor_step_{key}.so"
    if library.exists():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as tmp:
        (Path(tmp) / "native_step.cpp").write_text(source)
        for name, text in header_files.items():
            (Path(tmp) / name).write_text(text)
        built = Path(tmp) / library.name
        command = [COMPILER, *FLAGS, "native_step.cpp", "-o", str(built), "-lmvec"]
        process = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
        if process.returncode != 0:
            raise BuildError(f"building the native quadrotor step failed ({' '.join(command)}):\n{process.stderr}")
        os.replace(built, library)  # atomic: another process sees the whole library or none
    return library


def padded_rows(*shape: int, device: torch.device | str, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized feature-major array (..., N) whose rows are PAD elements longer than N.

    With N a multiple of 1024, unpadded rows lie a multiple of 4 KiB apart and all map to the same cache
    sets; the ~150 rows a block of the kernel touches then evict each other (the kernel ran 1.8x slower).
    """
    *lead, n = shape
    strides = [1]
    for size in reversed([*lead, n + PAD][1:]):  # a dimension's stride: the elements of one step along it
        strides.insert(0, strides[0] * size)
    return torch.empty_strided(shape, strides, device=device, dtype=dtype)


def row_allocator(device: torch.device | str, dtype: torch.dtype) -> Callable[..., torch.Tensor]:
    """`padded_rows` on `device` in `dtype`: how a batch stepped by the native kernel allocates its arrays."""
    return functools.partial(padded_rows, device=device, dtype=dtype)


def in_kernel_layout(value: torch.Tensor) -> bool:
    """Whether the kernel can read `value` as it is: unit stride along the envs, rows evenly spaced and not a
    multiple of 1024 elements apart."""
    return value.stride(-1) == 1 and (value.dim() == 1 or (
        value.stride(-2) % 1024 != 0
        and all(value.stride(i) == value.size(i + 1) * value.stride(i + 1) for i in range(value.dim() - 2))))


def row_stride(value: torch.Tensor) -> int:
    """Elements between consecutive rows of a feature-major array in kernel layout."""
    return value.stride(-2) if value.dim() > 1 else 0


class TermRows(Mapping[str, torch.Tensor]):
    """The reward terms of one step, name -> (N,) values: a column of the kernel's `terms` output, (N, terms),
    whose columns are the task's `term_names` (a view, made when looked up: most steps nobody reads them,
    and 11 views cost more than the rest of the result)."""

    def __init__(self, terms: torch.Tensor, rows: Mapping[str, int]):
        self._terms, self._rows = terms, rows

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._terms[:, self._rows[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


# How many tensors and storage objects refer to a storage (torch's own counter, not public API; where a torch
# build lacks it, NativeStep allocates every step's outputs anew).
_STORAGE_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)


class NativeStep:
    """`QuadrotorBatch._transition` of a float32 CPU torch batch, as one call into the generated kernel."""

    def __init__(self, batch: QuadrotorBatch):
        if not available(batch.physics.device, batch.physics.dtype):
            raise ConfigError("the native quadrotor step needs float32 tensors on a CPU and a C++ compiler "
                              f"({COMPILER}); got {batch.physics.dtype} on {batch.physics.device}")
        self.batch = batch
        library = ctypes.CDLL(str(build(headers(batch))))
        arguments = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int]
        self._function = library.quadrotor_step
        self._function.argtypes = arguments
        self._function.restype = ctypes.c_int
        self._library, self._arguments = library, arguments
        self._predict: Callable[..., None] | None = None  # looked up when first asked for (kernels of earlier
        # sources, which bench/native_kernel.py --sources builds, have the step only)
        self._pointers = (ctypes.c_void_p * len(ARGS))()
        self._strides = (ctypes.c_int64 * len(ARGS))()
        # (owner, attribute, argument): the arrays the kernel keeps across steps, updated in place (the
        # noise table and the seed's key are read only, and replaced by reseeding)
        self._state = [(batch, name, STATE_ARGUMENTS.get(name, name)) for name in STATE_OF_BATCH]
        self._state += [(batch.physics, name, STATE_ARGUMENTS.get(name, name)) for name in STATE_OF_PHYSICS]
        if batch.noise is not None:
            self._state.append((batch.noise, "table", "noise_table"))
        self._bound: dict[str, torch.Tensor] = {}  # the arrays last bound, by argument
        self._noise_base = 0  # address of the noise table's first element
        self._index = {name: index for index, name in enumerate(ARGS)}
        # The kernel's own cache of each env's next episode start, drawn ahead (NextStarts in the kernel):
        # rows (N, START_SIZE), the episode each row is for, and [the seed's key, whether drawn]; an env
        # whose episode index moved (a reset from Python) or a new key is drawn again in the kernel.
        n = batch.num_envs
        self._next_starts = {"next_start": torch.empty(n, starts.START_SIZE, dtype=torch.float64),
                             "next_episode": torch.full((n,), -1, dtype=torch.int64),
                             "next_key": torch.zeros(2, dtype=torch.int64)}
        for argument, value in self._next_starts.items():
            self._bind(argument, value)
        # The float outputs are consecutive rows of one `padded_rows` array per step (one allocation),
        # allocated as its transpose (N, rows), the env-major view every output is returned as.
        size, extra = batch.layout.size, batch.privileged_size if batch.privileged else 0
        self._term_rows = {name: index for index, name in enumerate(batch.task.term_names)}
        outputs = [("observation", size), ("terms", len(self._term_rows)), ("reward", 1)]
        if batch.autoreset:
            outputs.append(("final_observation", size))
            if batch.privileged:
                outputs += [("privileged", extra), ("final_privileged", extra)]
        self._output_names = [argument for argument, _ in outputs]
        self._output_sizes = [count for _, count in outputs]
        self._out_shape, self._out_strides = (n, sum(self._output_sizes)), (1, n + PAD)
        self._out_offsets: list[tuple[int, int]] = []  # (argument index, byte offset of its first row)
        row = 0
        for argument, count in outputs:
            self._out_offsets.append((self._index[argument], row * (n + PAD) * 4))
            self._strides[self._index[argument]] = n + PAD
            row += count
        self._flag_offsets = [(self._index[argument], offset * n)
                              for offset, argument in enumerate(("terminated", "truncated", "is_success", "ended"))]
        self._recent_outputs: list[tuple[torch.Tensor, torch.UntypedStorage]] = []  # see _output_array

    def _output_array(self) -> torch.Tensor:
        """The (N, rows) array this step's float outputs go into: one of the last two steps' arrays if no
        output of that step is held any more, else a new one.

        A new array of this size (~4 MB at 8192 envs) comes from pages glibc's malloc has just returned to
        the OS whenever a loop holds each step's outputs until the next (as training does): ~6 page faults
        per step, 221-241 instead of 178-184 us at 8192 envs (Zen 5). Alternating between two arrays keeps
        their pages mapped and in cache.
        """
        for out, storage in self._recent_outputs:
            if _STORAGE_USE_COUNT(storage._cdata) == 2:  # `out` and `storage` here: none of its views exists
                return out
        out = torch.empty_strided(self._out_shape, self._out_strides, device=self.batch.physics.device,
                                  dtype=torch.float32)
        if _STORAGE_USE_COUNT is not None:
            self._recent_outputs = [(out, out.untyped_storage()), *self._recent_outputs[:1]]
        return out

    def _bind(self, argument: str, value: torch.Tensor | None) -> None:
        """Pass `value` (laid out for the kernel) as the kernel's argument `argument` from now on."""
        index = self._index[argument]
        self._pointers[index] = None if value is None else value.data_ptr()
        self._strides[index] = 0 if value is None else row_stride(value)

    def _bind_state(self) -> None:
        """Bind the arrays the kernel keeps across steps where one is new (the kernel updates them in place, so
        that happens only when the batch replaces one: a reseeded noise table or key). The batch allocates
        them in kernel layout (`row_allocator`)."""
        for owner, attribute, argument in self._state:
            value = getattr(owner, attribute)
            if value is not None and value is not self._bound.get(argument):
                if not in_kernel_layout(value):
                    raise RuntimeError(f"{type(owner).__name__}.{attribute} is not in the native step's layout: "
                                       "allocate it with native_step.row_allocator")
                self._bound[argument] = value
                if argument in self._index:
                    self._bind(argument, value)
                elif argument == "noise_table":  # the kernel's `noise` and `final_noise` are its columns (__call__)
                    self._noise_base = value.data_ptr()
                    self._strides[self._index["noise"]] = self._strides[self._index["final_noise"]] = row_stride(value)

    def predict(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each env's rigid-body state (13, N) and rotor speeds (4, N) when the command sent now starts to act:
        `ModelExpert.predicted_state` in one pass over the vehicles (its torch form costs ~100 small tensor
        operations per physics substep); the batch is left as it is."""
        if self._predict is None:
            self._predict = self._library.quadrotor_predict
            self._predict.argtypes = self._arguments
            self._predict.restype = None
        n, device = self.batch.num_envs, self.batch.physics.device
        state = padded_rows(13, n, device=device, dtype=torch.float32)
        speed = padded_rows(4, n, device=device, dtype=torch.float32)
        self._bind_state()
        self._bind("predicted_state", state)
        self._bind("predicted_speed", speed)
        self._predict(self._pointers, self._strides, n, torch.get_num_threads())
        return state, speed

    def __call__(self, action: torch.Tensor, noise_offset: int | None) -> StepResult:
        """One control step from actions (N, 4) of the right shape, as `QuadrotorBatch._transition`, with
        the observation noise of the batch's noise table at `noise_offset` (as `NoiseTable.step_windows`
        with autoreset, else `window_at`; None without noise); the state advances in place. Raises
        ValueError, with nothing changed, if an action is NaN or infinite."""
        from sim.quadrotor.core import StepResult

        batch, n = self.batch, self.batch.num_envs
        device = batch.physics.device
        out = self._output_array()
        flags = torch.empty(4, n, dtype=torch.bool, device=device)
        self._bind_state()
        action = action.contiguous()
        pointers = self._pointers
        base = out.data_ptr()
        for index, offset in self._out_offsets:
            pointers[index] = base + offset
        base = flags.data_ptr()
        for index, offset in self._flag_offsets:
            pointers[index] = base + offset
        pointers[self._index["action"]] = action.data_ptr()
        # the noise table's columns from noise_offset (NoiseTable.window_at) and the next one (read only with
        # autoreset, for the final observations)
        noise = self._noise_base + 4 * noise_offset if noise_offset is not None else None  # float32: 4 bytes
        pointers[self._index["noise"]] = noise
        pointers[self._index["final_noise"]] = None if noise is None else noise + 4
        status = self._function(pointers, self._strides, n, torch.get_num_threads())
        if status == 1:
            raise ValueError("action contains NaN or Inf")
        outputs = dict(zip(self._output_names, out.split_with_sizes(self._output_sizes, 1)))  # one call: the cheapest
        terminated, truncated, is_success, ended = flags.unbind(0)
        result = StepResult(outputs["observation"], outputs["reward"].select(1, 0), terminated, truncated, is_success,
                            TermRows(outputs["terms"], self._term_rows), any_done=status == 2, ended=ended)
        if batch.autoreset:
            result.final_observation = outputs["final_observation"]
            if batch.privileged:
                result.privileged_observation = outputs["privileged"]
                result.final_privileged_observation = outputs["final_privileged"]
        return result
