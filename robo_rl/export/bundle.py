"""A run's policy as a deployable bundle: `policy.onnx`, `policy.json` and the generated C.

`policy.json` is the contract with every target (ROS 2 node, firmware): the kind of robot ("quadrotor" or
"arm") and of task ("hover", "pick_cube", ...), the observation layout by named
fields with units and normalization, the action layout, range and safe value, the control rate, the
network's shape and activation, the env config and vehicle parameters it was trained on, the source run
and commit, and (observation, action) pairs recorded from PyTorch on real rollouts that every target must
reproduce. A quadrotor bundle also names the vehicle it is deployed on (`deployment`): the policy's action is
a fraction of the flown vehicle's own maximum thrust, so the targets turn actions into newtons with that
vehicle's `thrust_max_newton`, reset the action history to its hover command, and the firmware app checks
that it runs on the flight firmware whose per-motor limits the bundle records. Export verifies ONNX Runtime and (where a C compiler exists) the host-compiled C on those pairs
before it writes anything under its final name.

A policy on camera images exports to ONNX only: inputs "state" and one uint8 (batch, height, width, 3) RGB
image per camera, named after the camera, each listed in policy.json's `observation.images` with the
camera's mount in the training scene; its recorded pairs' images are in `recorded_images.npz`. The C
generator takes policies on state vectors only, so such a bundle has no C and the firmware tools refuse it.

Export never deletes what it did not create: the bundle is built in a fresh hidden folder beside `out` and
then takes the place of `out` (in one step where the file system can swap two folders, so that a stop there
leaves the earlier bundle or the new one at `out`, never neither). An existing `out` is replaced only if it is
empty or a bundle that export wrote (every file in it listed in its BUNDLE_MARKER, or for bundles from before the
marker: policy.json of this format, policy.onnx and generated C); any other folder (a run, a folder of runs, a
mount point) is refused with one ExportError before anything is written.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import uuid
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from omegaconf import OmegaConf

from robo_rl.checkpoint import agent_from_checkpoint, check_compatible, check_not_in_another_run, load_run_policy
from robo_rl.cli import remove_made_folders
from robo_rl.envs import check_quadrotor_env, env_spec, make_vector_env
from robo_rl.export.c_generator import check_prefix, generate_c, generate_layout_header
from robo_rl.export.errors import ExportError
from robo_rl.export.kinematics import arm_kinematics, arm_task_config
from robo_rl.export.policy_spec import DeterministicPolicy, ImagePolicy, Policy, PolicySpec, policy_actions
from robo_rl.evaluation import env_uses_torch
from robo_rl.observations import STATE, to_numpy
from sim.observation import observation_row
from robo_rl_ros.core.bundle import BUNDLE_FORMAT  # the contract, defined where the robot reads it

TOLERANCE = 1e-5  # absolute, per action entry: ONNX Runtime and C against PyTorch
C_SELF_TEST_PAIRS = 8
RANDOM_TEST_VECTORS = 1000  # random observations each target must also reproduce
BUNDLE_MARKER = ".robo_rl_bundle.json"  # written last into every bundle: its format and the files export wrote
RECORDED_IMAGES = "recorded_images.npz"  # a camera policy's recorded pairs' images, one (pairs, H, W, 3) per camera
NO_C_FOR_IMAGES = ("a policy on camera images has no C: the C generator takes policies on state vectors (ONNX runs "
                   "it, e.g. in the ROS 2 arm node)")
def record_pairs(policy: Policy, env: Any, count: int, seed: int) -> tuple[Any, np.ndarray]:
    """`count` (observation, action) pairs of the deterministic policy driving `env` (count envs, seeded):
    env i contributes its observation after 3 i steps, so the pairs span starts, recoveries and hover. The
    observations are an array (count, obs), or for a camera env a dict of the states and the images."""
    obs, _ = env.reset(seed=seed)
    rows = []
    for step in range(3 * count):
        obs = to_numpy(obs) if env_uses_torch(env) else obs  # the torch backend's observations are tensors
        if step % 3 == 0:
            rows.append(observation_row(obs, step // 3))
        obs, *_ = env.step(policy_actions(policy, obs))
    if isinstance(rows[0], Mapping):
        recorded: Any = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
        recorded[STATE] = recorded[STATE].astype(np.float32)
    else:
        recorded = np.stack(rows).astype(np.float32)
    return recorded, policy_actions(policy, recorded)


def export_onnx(policy: Policy, example: Any, path: Path, opset: int, ir_version: int) -> None:
    """Write `policy` as ONNX: its `input_names` (batch first; "observation" (batch, obs) for a vector policy),
    output "action" (batch, act); `example` a numpy batch of observations to trace it with."""
    import onnx

    names = policy.input_names
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated, still exact and dependency-free
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(policy, policy.inputs(example), str(path), input_names=names, output_names=["action"],
                          dynamic_axes={**{name: {0: "batch"} for name in names}, "action": {0: "batch"}},
                          opset_version=opset, dynamo=False)
    model = onnx.load(str(path))
    model.ir_version = ir_version  # pinned so that older ONNX Runtime builds on robots load it
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def onnx_actions(path: Path, observations: Any) -> np.ndarray:
    """Actions from ONNX Runtime (CPU) for a batch of observations (an array, or a dict of the states and the
    cameras' uint8 images)."""
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state as runtime_errors

    # ONNX Runtime's errors (InvalidProtobuf, InvalidArgument, ...) derive from Exception alone
    errors = tuple(kind for kind in vars(runtime_errors).values()
                   if isinstance(kind, type) and issubclass(kind, Exception))
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except errors as error:  # a damaged or truncated file: a traceback said "a bug in robo-rl"
        raise ExportError(f"{path} is not an ONNX model that ONNX Runtime can load ({_first_line(error)}); export "
                          "the bundle again") from None
    if isinstance(observations, Mapping):
        feed = {key: np.asarray(value, dtype=np.float32 if key == STATE else np.uint8)
                for key, value in observations.items()}
    else:
        feed = {"observation": np.asarray(observations, dtype=np.float32)}
    try:
        return session.run(["action"], feed)[0]
    except errors as error:  # another policy's model copied into the bundle
        raise ExportError(f"{path} does not take this bundle's observations ({_first_line(error)}); it is not the "
                          "policy of this bundle's policy.json: export the bundle again") from None


def _first_line(error: BaseException) -> str:
    """An error's message up to its first line break (ONNX Runtime's carry the whole graph position)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_vehicle_name(vehicle: str | None, default: str = "the run's training vehicle") -> None:
    """ExportError unless `vehicle` is None (what the command then flies, `default`) or a name in
    sim.quadrotor.model.VEHICLES."""
    from sim.quadrotor.model import VEHICLES

    if vehicle is not None and vehicle not in VEHICLES:
        raise ExportError(f"vehicle={vehicle} is not a known vehicle; allowed: {', '.join(sorted(VEHICLES))} "
                          f"(or none: {default})")


def deployment_block(config: Any, vehicle: str | None = None) -> dict[str, Any]:
    """policy.json's `deployment`: the named vehicle a quadrotor policy (trained with env config `config`, a
    QuadrotorEnvConfig) flies, default the training vehicle. Its numbers come from its compiled model; the
    training's `vehicle_overrides` (a user's identified numbers) apply when it is the training vehicle, as
    they describe that very vehicle. `firmware_thrust_max/min` are the per-motor limits of the flight
    firmware that flies it (sim.quadrotor.model.Vehicle), null where the vehicle names none."""
    from sim.quadrotor.config import vehicle_from_config
    from sim.quadrotor.env import jsonable, vehicle_parameters
    from sim.quadrotor.model import VEHICLES, QuadrotorParams, load_model

    check_vehicle_name(vehicle)
    name = vehicle or config.vehicle
    own = name == config.vehicle
    spec = vehicle_from_config(config) if own else VEHICLES[name]
    params = QuadrotorParams.from_model(load_model(spec))
    overrides = dict(config.vehicle_overrides) if own else {}
    return {
        "vehicle": name,
        "source": spec.source,
        "vehicle_overrides": jsonable(overrides),
        "thrust_max_newton": params.thrust_max,
        "hover_command": params.hover_command,
        "firmware_thrust_max": spec.firmware_thrust_max,
        "firmware_thrust_min": spec.firmware_thrust_min,
        "vehicle_parameters": vehicle_parameters(params),
        "action": "motor thrust = action * thrust_max_newton [N] (fraction of this vehicle's own maximum thrust)",
    }


def _deployment_constants(description: dict[str, Any], deployment: dict[str, Any] | None) -> dict[str, Any]:
    """policy_layout.h's constants: the env's, with the deployment vehicle's thrust and hover command and the
    firmware limits it was exported for."""
    constants = dict(description.get("deployment_constants", {}))
    if "action_history" in constants:  # a quadrotor's: its state history's length too (0 for none)
        constants.setdefault("state_history", int(description.get("config", {}).get("state_history", 0)))
    if deployment is not None:
        constants["thrust_max_newton"] = deployment["thrust_max_newton"]
        constants["hover_command"] = deployment["hover_command"]
        for key in ("firmware_thrust_max", "firmware_thrust_min"):
            if deployment[key] is not None:
                constants[key] = deployment[key]
    return constants


C_CHOICES = ("auto", "true", "false")  # export's `c`: generate the C where the policy allows, always, never


def export_bundle(run: str | Path, checkpoint: str | None = "best", out: str | Path | None = None, pairs: int = 16,
                  seed: int = 0, safe_action: str | Sequence[float] = "nominal", opset: int = 17,
                  ir_version: int = 8, prefix: str = "policy", vehicle: str | None = None, c: str = "auto") -> Path:
    """Export a run's policy to the folder `out` (default `<run>/export`); returns that folder.

    checkpoint: "best", "last" or a checkpoint file. pairs: recorded (observation, action) pairs (>= 8).
    safe_action: the action for invalid observations: "nominal" (the env's nominal action, e.g. the
    deployment vehicle's hover thrust, else the middle of the range), "midpoint", or explicit values.
    vehicle: the quadrotor the policy is deployed on (a name in sim.quadrotor.model.VEHICLES; default the
    run's training vehicle). c: "auto" generates the C of every policy on state vectors and none for a policy
    on camera images (ONNX only: the ROS 2 arm node runs it), "true" refuses a policy the C generator cannot
    take, "false" writes no C.
    """
    if pairs < 8:
        raise ExportError(f"at least 8 recorded pairs are needed, got {pairs}")
    if c not in C_CHOICES:
        raise ExportError(f"c={c!r} is not a choice; allowed: {', '.join(C_CHOICES)}")
    try:
        check_prefix(prefix)
    except ValueError as error:
        raise ExportError(str(error)) from None
    check_vehicle_name(vehicle)
    out = Path(out) if out else Path(run) / "export"
    check_out_folder(out)  # before any work: a folder that cannot be replaced is refused at once
    check_not_in_another_run(out, run, "out", "export")  # another run's own export/ was replaced without a word
    out = Path(os.path.abspath(out))  # the staging folder goes beside it: "sub/.." has a parent "sub", "." none
    state = load_run_policy(run, checkpoint)
    run_cfg = OmegaConf.create(state["config"])
    if run_cfg.env.get("privileged_actor", False):
        raise ExportError(f"run={run} is a teacher (env.privileged_actor=true): its policy reads simulator state no "
                          "vehicle measures; distill it into a deployable policy with python -m robo_rl.distill")
    images = state["env_spec"].get("observation_images") or {}
    if images and c == "true":
        raise ExportError(f"c=true: run={run} is a policy on camera images ({', '.join(sorted(images))}), and the C "
                          "generator takes policies on state vectors only (a microcontroller has no camera pipeline); "
                          "export its ONNX with c=auto and run it with the ROS 2 arm node")
    env = make_vector_env(run_cfg.env, pairs, torch.device("cpu"), threads=1, cameras=bool(images))
    try:
        return _export(state, run_cfg, env, run, out, pairs, seed, safe_action, opset, ir_version, prefix, vehicle,
                       c != "false" and not images)
    finally:
        env.close()


def _export(state: dict[str, Any], run_cfg: Any, env: Any, run: str | Path, out: Path, pairs: int, seed: int,
            safe_action: str | Sequence[float], opset: int, ir_version: int, prefix: str, vehicle: str | None,
            with_c: bool) -> Path:
    """export_bundle's work once the run's env is built."""
    check_compatible(state, env_spec(env, run_cfg.env.id))
    agent = agent_from_checkpoint(state, torch.device("cpu"))
    env_description = env.description()
    quadrotor = env_description["robot"] == "quadrotor"
    deployment = deployment_block(env.config, vehicle) if quadrotor else None
    if deployment is None and vehicle is not None:
        check_quadrotor_env(run_cfg.env.id, f"vehicle={vehicle}", "a vehicle")
    nominal = None if deployment is None else np.full(4, deployment["hover_command"], dtype=np.float32)
    spec = PolicySpec.from_actor(agent.policy_actor, agent.config.activation,
                                 safe_action=_safe_action(safe_action, env, nominal))
    if nominal is not None and not isinstance(safe_action, str) and np.any(spec.safe_action > nominal + 1e-6):
        # the Crazyflie app faults and the ROS 2 node stops on a non-OK status; firmware that flew the returned
        # action instead would climb on every invalid observation
        warnings.warn(f"safe_action={spec.safe_action.tolist()} lies above the vehicle's hover command "
                      f"{float(nominal[0]):.4f}: a consumer of the generated C that flies the action a fault returns "
                      "would climb; 'nominal' (the hover command) or less descends", stacklevel=2)
    policy: Policy = (DeterministicPolicy(agent.policy_actor, spec) if agent.encoder is None
                      else ImagePolicy(agent.encoder, agent.policy_actor, spec)).eval()
    observations, actions = record_pairs(policy, env, pairs, seed)

    created_parents = [parent for parent in out.parents if not parent.exists()]  # removed again on failure
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as error:  # it named the hidden staging folder, as if the user had given that
        remove_made_folders(created_parents)
        raise ExportError(f"out={out}: no bundle can be written in {out.parent} ({error.strerror}); give a folder "
                          "you can write to") from None
    staging.chmod(0o755)
    done = False
    try:
        export_onnx(policy, observations, staging / "policy.onnx", opset, ir_version)
        if env_description["robot"] == "arm":  # what a target needs of the arm: its kinematic chain
            env_description = {"config": arm_task_config(env.config), **env_description,
                               "kinematics": arm_kinematics(env.model, env.config.spec)}
        if isinstance(policy, ImagePolicy):
            np.savez_compressed(staging / RECORDED_IMAGES, **{name: observations[name] for name in policy.encoder.names})
            env_description["cameras"] = camera_mounts(env.model, policy.encoder.names)
            verification = {"tolerance": TOLERANCE, **_verify_onnx_on_images(staging / "policy.onnx", policy,
                                                                               observations, actions, seed),
                            **{target: {"checked": False, "reason": NO_C_FOR_IMAGES} for target in ("c_host", "cortex_m4")}}
        else:
            onnx_error = float(np.abs(onnx_actions(staging / "policy.onnx", observations) - actions).max())
            if not onnx_error <= TOLERANCE:
                raise ExportError(f"ONNX Runtime differs from PyTorch by {onnx_error:.3g} > {TOLERANCE}")
            verification = {"tolerance": TOLERANCE, "onnxruntime_max_abs_error": onnx_error}
            if with_c:
                verification |= _write_and_verify_c(staging / "c", policy, spec, observations, actions, prefix,
                                                    run_cfg, run, env_description, deployment, seed)
            else:
                verification |= {target: {"checked": False, "reason": "exported with c=false"}
                                 for target in ("c_host", "cortex_m4")}
        manifest = _manifest(state, env_description, spec, run, observations, actions, verification, opset,
                             ir_version, prefix if with_c else None, deployment, policy)
        (staging / "policy.json").write_text(json.dumps(manifest, indent=2))
        files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())
        (staging / BUNDLE_MARKER).write_text(json.dumps({"format": BUNDLE_FORMAT, "files": files}, indent=2))
        _replace_folder(staging, out)
        done = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not done:
            remove_made_folders(created_parents)
    return out


def _write_and_verify_c(c_dir: Path, policy: DeterministicPolicy, spec: PolicySpec, observations: np.ndarray,
                        actions: np.ndarray, prefix: str, run_cfg: Any, run: str | Path,
                        env_description: dict[str, Any], deployment: dict[str, Any] | None,
                        seed: int) -> dict[str, Any]:
    """Generate the C of a policy on state vectors into `c_dir` and verify it on the host and on the emulated
    Cortex-M4; the verification entries of policy.json."""
    c_dir.mkdir()
    description = f"{run_cfg.env.id} policy from {Path(run).resolve().name}"
    # the firmware self-test keeps the first C_SELF_TEST_PAIRS (flash is precious); policy.json keeps all
    c_pairs = list(zip(observations, actions))[:C_SELF_TEST_PAIRS]
    for name, text in generate_c(spec, c_pairs, prefix, TOLERANCE, description).items():
        (c_dir / name).write_text(text)
    if env_description.get("observation_layout"):
        (c_dir / f"{prefix}_layout.h").write_text(generate_layout_header(
            env_description["observation_layout"], env_description["control_hz"],
            _deployment_constants(env_description, deployment), prefix))
    vectors = check_vectors(policy, spec, observations, RANDOM_TEST_VECTORS, seed)
    return {"c_host": _verify_c_on_host(c_dir, prefix, vectors), "cortex_m4": _verify_c_on_cortex_m4(c_dir, prefix, vectors)}


def _verify_onnx_on_images(path: Path, policy: ImagePolicy, observations: dict[str, np.ndarray],
                           actions: np.ndarray, seed: int) -> dict[str, Any]:
    """ONNX Runtime against PyTorch on the recorded observations and on as many with random images and states
    (twice the recorded spread); ExportError beyond TOLERANCE."""
    rng = np.random.default_rng(seed)
    states = observations[STATE]
    random_obs = {STATE: (states.mean(0) + (2.0 * states.std(0) + 1e-3) * rng.standard_normal(states.shape)
                          ).astype(np.float32),
                  **{name: rng.integers(0, 256, observations[name].shape, dtype=np.uint8)
                     for name in policy.encoder.names}}
    errors = [float(np.abs(onnx_actions(path, obs) - expected).max())
              for obs, expected in ((observations, actions), (random_obs, policy_actions(policy, random_obs)))]
    if not max(errors) <= TOLERANCE:
        raise ExportError(f"ONNX Runtime differs from PyTorch by {max(errors):.3g} > {TOLERANCE}")
    return {"onnxruntime_max_abs_error": errors[0], "onnxruntime_random_inputs": len(states),
            "onnxruntime_random_inputs_max_abs_error": errors[1]}


def camera_mounts(model: Any, names: Sequence[str]) -> list[dict[str, Any]]:
    """Where each named camera of a MuJoCo model sits (its body, position and orientation in that body,
    vertical field of view): what a real camera must match to show the policy what training showed it."""
    import mujoco

    mounts = []
    for name in names:
        cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
        mounts.append({"name": name, "body": model.body(int(model.cam_bodyid[cam])).name,
                       "pos": model.cam_pos[cam].tolist(), "quat": model.cam_quat[cam].tolist(),
                       "fovy_deg": float(model.cam_fovy[cam]),
                       "frame": "MuJoCo camera: looks along -z, y up; pos and quat (w, x, y, z) in the body's frame"})
    return mounts


def read_manifest(bundle: str | Path) -> dict[str, Any]:
    """The policy.json of an exported bundle for the firmware tools, with the entries they read (env_id,
    training.env_config and checkpoint, observation and action sizes) and generated C; ExportError naming what
    is missing otherwise."""
    path = Path(bundle) / "policy.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"bundle={bundle} is not an exported bundle: {path} cannot be read ({error})") from error
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise ExportError(f"bundle={bundle}: {path} is not a policy.json of format {BUNDLE_FORMAT!r}")
    training = manifest.get("training")
    ok = (isinstance(manifest.get("env_id"), str) and isinstance(training, dict)
          and isinstance(training.get("env_config"), dict) and isinstance(training.get("checkpoint"), str)
          and all(isinstance(manifest.get(k), dict) and isinstance(manifest[k].get("size"), int)
                  for k in ("observation", "action")))
    if not ok:
        raise ExportError(f"bundle={bundle}: {path} lacks env_id, training.env_config, training.checkpoint or the "
                          "observation and action sizes; export the run again")
    files = manifest.get("files")
    if not (isinstance(files, dict) and files.get("c_source")):
        cameras = [str(image.get("name")) for image in manifest["observation"].get("images") or []
                   if isinstance(image, dict)]
        why = (f"it is a policy on camera images ({', '.join(cameras)}), which the C generator does not take" if cameras
               else "it was exported with c=false")
        raise ExportError(f"bundle={bundle} holds no generated C for the firmware: {why}; run its ONNX with the ROS 2 "
                          "node, or export a policy on state vectors with c=auto")
    source = Path(str(files["c_source"]))  # c/<c_prefix>.c: the prefix names what the C checks build and call
    try:
        check_prefix(source.stem)
    except ValueError:
        source = None
    if source is None or source.parent != Path("c") or source.suffix != ".c":
        raise ExportError(f"bundle={bundle}: policy.json's files.c_source is {files['c_source']!r}, not "
                          "c/<c_prefix>.c; export the run again")
    for key in ("onnx", "c_header", "c_source", "c_layout"):
        name = files.get(key)
        if isinstance(name, str) and not (Path(bundle) / name).is_file():
            raise ExportError(f"bundle={bundle} lacks {name}, which its policy.json lists; export the run again")
    return manifest


RECORDED_PAIR_TOLERANCE = 1e-4  # the export holds ONNX and C to 1e-5 of these; a checkpoint must match them too


def bundle_checkpoint(manifest: Mapping[str, Any]) -> Path:
    """The training checkpoint a bundle was exported from. Bundles before this version recorded it relative to the
    folder export ran in (`runs/x/best_policy.pt` for run=runs/x): that path is taken from the run's absolute
    folder, which they also recorded, so that it does not depend on where a command runs."""
    training = manifest["training"]
    path = Path(training["checkpoint"])
    run = Path(str(training.get("run") or ""))
    if path.is_absolute() or not run.is_absolute():
        return path
    for shared in range(min(len(run.parts), len(path.parts)), 0, -1):  # run's last parts = the path's first
        if run.parts[-shared:] == path.parts[:shared]:
            return run.joinpath(*path.parts[shared:])
    return run / path if (run / path).exists() else path  # exported from inside the run (run=.)


def torch_actor(manifest: Mapping[str, Any], checkpoint: str | Path | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The bundle's PyTorch actor (its training checkpoint, or `checkpoint`), deterministic, as observation ->
    action; ExportError unless it reproduces the bundle's recorded (observation, action) pairs (a checkpoint of
    another run, or of another task with the same spaces, is refused)."""
    from robo_rl.checkpoint import load_checkpoint

    path = checkpoint or bundle_checkpoint(manifest)
    if checkpoint is None and not Path(path).exists():  # said only that the file does not exist
        raise ExportError(f"the bundle's training checkpoint {path} is gone (its run moved or deleted); the "
                          "PyTorch reference flies from it: give checkpoint=<that file where it is now>")
    agent = agent_from_checkpoint(load_checkpoint(path))

    def act(obs: np.ndarray) -> np.ndarray:
        return agent.act(torch.as_tensor(obs[None], dtype=torch.float32), deterministic=True).numpy()[0]
    pairs = manifest.get("recorded_pairs") or []
    try:
        error = max((float(np.abs(act(np.asarray(p["observation"], np.float32)) - np.asarray(p["action"])).max())
                     for p in pairs), default=0.0)
    except (RuntimeError, ValueError) as failure:  # another observation size
        raise ExportError(f"checkpoint={path} does not take this bundle's observations: {failure}") from None
    if not error <= RECORDED_PAIR_TOLERANCE:
        raise ExportError(f"checkpoint={path} is not the policy this bundle was exported from: its actions differ "
                          f"by {error:.3g} from the bundle's recorded pairs")
    return act


def check_out_folder(out: Path) -> None:
    """ExportError unless the bundle may go to `out`: a new folder, an empty one, or a bundle that export
    wrote (nothing in it that export did not create). Never a file, a link or a mount point."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ExportError(f"out={out} is {'a link' if out.is_symlink() else 'a file'}; give a folder for the bundle")
    if not out.exists():
        return
    if os.path.ismount(out):
        raise ExportError(f"out={out} is a mount point; give a folder inside it for the bundle")
    here, real = Path.cwd(), Path(os.path.realpath(out))
    if real in (here, *here.parents):  # replaced whole, it would leave the shell in a deleted folder
        where = "the current folder" if real == here else "a folder that holds the current one"
        raise ExportError(f"out={out} is {where}; give a folder for the bundle inside it, e.g. out={out / 'export'}")
    foreign = _not_from_export(out)
    if foreign:
        shown = ", ".join(str(p.relative_to(out)) for p in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ExportError(f"out={out} is a folder that export did not write ({len(foreign)} entries it would delete: "
                          f"{shown}); give a new or empty folder, or the folder of an earlier export")


def _not_from_export(folder: Path) -> list[Path]:
    """What in `folder` an export did not write (empty for an empty folder or a bundle). A folder without a
    bundle's policy.json is answered from its top level, without walking it (it may be a whole disk)."""
    top = sorted(folder.iterdir())
    if not top:
        return []
    allowed: set[str] | None = None
    try:
        marker = json.loads((folder / BUNDLE_MARKER).read_text())
        if marker.get("format") == BUNDLE_FORMAT and isinstance(marker.get("files"), list):
            allowed = {str(f) for f in marker["files"]} | {BUNDLE_MARKER}
    except (OSError, ValueError, AttributeError):
        pass
    if allowed is None:  # a bundle from before the marker: policy.json of this format, the ONNX and the C
        try:
            legacy = json.loads((folder / "policy.json").read_text()).get("format") == BUNDLE_FORMAT
        except (OSError, ValueError, AttributeError):
            legacy = False
        if not legacy:
            return top
        allowed = {"policy.json", "policy.onnx"} | {str(p.relative_to(folder)) for p in (folder / "c").glob("*")
                                                     if p.suffix in (".c", ".h") and p.is_file()}
    folders = {str(parent) for name in allowed for parent in Path(name).parents if str(parent) != "."}

    def from_export(path: Path) -> bool:
        name = str(path.relative_to(folder))
        if path.is_symlink():
            return False
        return name in allowed if path.is_file() else path.is_dir() and name in folders

    return [p for p in sorted(folder.rglob("*")) if not from_export(p)]


def _replace_folder(staging: Path, out: Path) -> None:
    """Put the finished bundle `staging` at `out`, replacing an empty folder or an earlier bundle (checked again
    here). Where the file system can, the two folders swap names in one step, so that `out` always holds a whole
    bundle, the earlier one or the new one, even if export is stopped there; the earlier bundle is left in
    `staging` for the caller to delete. Elsewhere it is moved aside first and deleted only once the new one is in
    place."""
    check_out_folder(out)
    try:
        if not out.exists() or not any(out.iterdir()):
            os.replace(staging, out)  # rename(2) replaces an empty folder
            return
        if _exchange(staging, out):
            return
        previous = out.with_name(f".{out.name}-replaced-{uuid.uuid4().hex[:8]}")
        os.rename(out, previous)
    except OSError as error:  # it named the hidden staging folder, as if the user had given that
        raise ExportError(f"out={out}: the bundle cannot replace that folder ({error.strerror}); give a folder you "
                          "can write to") from None
    try:
        os.rename(staging, out)
    except OSError:
        os.rename(previous, out)
        raise
    shutil.rmtree(previous)


_AT_FDCWD = -100  # <fcntl.h>: paths relative to the working directory
_RENAME_EXCHANGE = 2  # <linux/fs.h>
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV}


def _exchange(first: Path, second: Path) -> bool:
    """Swap the names of two existing paths in one step (Linux renameat2 with RENAME_EXCHANGE); False where the
    C library, kernel or file system cannot, so the caller falls back to two renames."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not glibc >= 2.28 (macOS, musl before 1.2.3)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(second))


def _safe_action(choice: str | Sequence[float], env: Any, nominal: np.ndarray | None = None) -> np.ndarray | None:
    """The safe action for `choice`; "nominal" is `nominal` (the deployment vehicle's hover command) where
    given, else the env's nominal action."""
    if isinstance(choice, str):
        if choice == "nominal" and nominal is not None:
            return nominal
        if choice == "nominal" and getattr(env, "nominal_action", None) is not None:
            return np.asarray(env.nominal_action, dtype=np.float32)
        if choice in ("nominal", "midpoint"):
            return None  # PolicySpec's default: the middle of the action range
        raise ExportError(f"safe_action must be 'nominal', 'midpoint' or a list of values, got {choice!r}")
    with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, which the spec then refuses in one line
        return np.asarray(list(choice), dtype=np.float32)


def _verify_c_on_host(c_dir: Path, prefix: str, vectors: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, Any]:
    from robo_rl.export.c_runtime import CompiledPolicy, find_c_compiler
    from robo_rl.export.errors import CompileError

    try:
        find_c_compiler()
    except CompileError as error:
        return {"checked": False, "reason": str(error)}
    observations, actions, statuses = vectors
    results: dict[str, Any] = {"test_vectors": len(statuses)}
    for kernel, fma in (("generic", False), ("fma", True)):
        with tempfile.TemporaryDirectory() as build:
            compiled = CompiledPolicy(c_dir, prefix, fma_kernel=fma, build_dir=build)
            failures, _ = compiled.self_test()
            c_actions, c_statuses = compiled.batch(observations)
        error = float(np.abs(c_actions - actions).max())
        if failures or not error <= TOLERANCE or not np.array_equal(c_statuses, statuses):
            raise ExportError(f"the generated C ({kernel} kernel) disagrees with PyTorch on the host: "
                              f"{failures} self-test failures, max error {error:.3g}")
        results[f"{kernel}_kernel_max_abs_error"] = error
    return {"checked": True, **results}


def check_vectors(policy: DeterministicPolicy, spec: PolicySpec, recorded: np.ndarray, count: int,
                 seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observations for checking a target: the recorded ones, random ones at twice their spread, and one
    with a NaN; with PyTorch's actions and the expected status (1 and the safe action for the NaN)."""
    rng = np.random.default_rng(seed)
    spread = 2.0 * recorded.std(0) + 1e-3
    random_obs = (recorded.mean(0) + spread * rng.standard_normal((count, recorded.shape[1]))).astype(np.float32)
    observations = np.concatenate([recorded, random_obs])
    with torch.no_grad():
        actions = policy(torch.as_tensor(observations)).numpy()
    invalid = observations[:1].copy()
    invalid[0, 0] = np.nan
    statuses = np.zeros(len(observations) + 1, dtype=np.int64)
    statuses[-1] = 1
    return (np.concatenate([observations, invalid]), np.concatenate([actions, spec.safe_action[None]]), statuses)


def _verify_c_on_cortex_m4(c_dir: Path, prefix: str, vectors: tuple[np.ndarray, np.ndarray, np.ndarray]
                           ) -> dict[str, Any]:
    from robo_rl.export.cortex_m4 import missing_tools, verify_on_cortex_m4

    missing = missing_tools()
    if missing:
        return {"checked": False, "reason": f"missing {', '.join(missing)}"}
    observations, actions, statuses = vectors
    with tempfile.TemporaryDirectory() as build:
        result = verify_on_cortex_m4(c_dir, observations, actions, statuses, build, prefix=prefix)
    if result.report["self_test_failures"] or result.report["test_vector_failures"]:
        raise ExportError(f"the generated C disagrees with PyTorch on the emulated Cortex-M4: {result.report}")
    return {"checked": True, "board": "qemu-system-arm -M netduinoplus2 (STM32F405)", "test_vectors": len(statuses),
            "max_abs_error": result.report["test_vector_max_error_e12"] * 1e-12, **result.to_json()}


def _manifest(state: dict[str, Any], description: dict[str, Any], spec: PolicySpec, run: str | Path,
              observations: Any, actions: np.ndarray, verification: dict[str, Any], opset: int,
              ir_version: int, prefix: str | None, deployment: dict[str, Any] | None, policy: Policy) -> dict[str, Any]:
    """policy.json (prefix None: no C was generated)."""
    observation_layout = description.get("observation_layout") or state["env_spec"].get("observation_layout")
    network = spec.to_json()
    normalization = {"mean": spec.obs_mean.tolist(), "std": spec.obs_std.tolist(),
                     "formula": "(obs - mean) / std, inside the network's input (ONNX and C)"}
    images: list[dict[str, Any]] = []
    if isinstance(policy, ImagePolicy):
        states = observations[STATE]
        normalization = {"mean": [0.0] * states.shape[1], "std": [1.0] * states.shape[1],
                         "formula": "none: the state enters the network as it is"}
        del network["observation_normalization"]  # of the encoder's features, which the network makes itself
        encoder = policy.encoder_json()
        network = {**network, "type": "cnn_encoder_then_mlp", "encoder": encoder,
                   "parameters": network["parameters"] + encoder["parameters"]}
        mounts = {mount["name"]: mount for mount in description["cameras"]}
        images = [{"name": name, "onnx_input": name, "height": int(observations[name].shape[1]),
                   "width": int(observations[name].shape[2]), "channels": 3, "dtype": "uint8", "encoding": "rgb8",
                   "mount": mounts[name]} for name in policy.encoder.names]
        observations = states
    return {
        "format": BUNDLE_FORMAT,
        "env_id": state["env_spec"]["id"],
        "robot": description["robot"],  # what the targets read to tell the kinds apart, never env_id
        "task": description["task"],
        "control_hz": description.get("control_hz", state["env_spec"].get("control_hz")),
        "observation": {
            "size": int(observations.shape[1]),  # with cameras: the state vector's (ONNX input "state")
            "layout": observation_layout,
            "normalization": normalization,
            **({"images": images} if images else {}),
        },
        "action": {
            "size": spec.action_size,
            "layout": description.get("action_layout"),
            "low": spec.action_low.tolist(),
            "high": spec.action_high.tolist(),
            "scaling": "action = tanh(y) * (high - low) / 2 + (high + low) / 2, clamped to [low, high]",
            "safe_action": spec.safe_action.tolist(),
            "deterministic": True,
        },
        "network": network,
        "training": {
            "run": str(Path(run).resolve()),
            "checkpoint": str(Path(state["path"]).resolve()),  # a relative one would depend on where a tool runs
            "commit": state.get("commit"),
            "env_steps": state["counters"]["env_steps"],
            "evaluation": state.get("evaluation"),
            "env_config": description.get("config"),
            "vehicle_parameters": description.get("vehicle_parameters"),
        },
        "files": {"onnx": "policy.onnx", "onnx_opset": opset, "onnx_ir_version": ir_version,
                  "onnx_inputs": policy.input_names,
                  "c_header": f"c/{prefix}.h" if prefix else None, "c_source": f"c/{prefix}.c" if prefix else None,
                  "c_layout": f"c/{prefix}_layout.h" if prefix and description.get("observation_layout") else None,
                  **({"recorded_images": RECORDED_IMAGES} if images else {})},
        "recorded_pairs": [{"observation": o.tolist(), "action": a.tolist()} for o, a in zip(observations, actions)],
        "verification": verification,
        **({"deployment": deployment} if deployment is not None else {}),
        **({"kinematics": description["kinematics"]} if description.get("kinematics") else {}),
    }
