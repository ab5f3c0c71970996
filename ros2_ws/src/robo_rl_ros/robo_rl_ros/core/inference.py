"""Inference of a bundle's policy: one observation (a vector, and for a policy on camera images one uint8 RGB
image per camera) in, one action out."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import onnxruntime

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.onnx_numpy import NumpyGraph, UnsupportedGraph, float_initializers

AGREEMENT = 1e-5  # largest difference from ONNX Runtime for which a tick may run the graph in numpy
# Largest difference between the loaded network's actions and the bundle's recorded (observation, action)
# pairs. The export verified the ONNX file against PyTorch within 1e-5 (policy.json verification.tolerance;
# the committed bundles differ by 3.6e-7); ten times that leaves room for another CPU's float32 rounding,
# and a changed network (weights scaled by -3: 0.99 off) is far beyond it.
PAIR_TOLERANCE = 1e-4


class OnnxPolicy:
    """The bundle's deterministic policy from its ONNX file.

    ONNX Runtime (CPU, one thread: the robot's other work keeps the remaining cores) loads and checks the
    file and runs `batch`. A single observation (`__call__`, once per control tick) runs the same graph in
    numpy (core.onnx_numpy), about twice as fast on the cold cache a tick finds, if that executor supports
    the graph and agrees with ONNX Runtime within `AGREEMENT` on the bundle's recorded observations and
    perturbations of them; otherwise in ONNX Runtime too. `engine` says which. A policy on camera images
    (inputs "state" and one uint8 (batch, height, width, 3) image per camera) always runs in ONNX Runtime.
    """

    def __init__(self, bundle: PolicyBundle):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self._session = onnxruntime.InferenceSession(str(bundle.onnx_path), options,
                                                         providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own exception types for corrupt files
            raise BundleError(f"ONNX Runtime cannot load {bundle.onnx_path}: {error}") from error
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        self.cameras = bundle.cameras
        self._input = "state" if self.cameras else "observation"
        expected = ([self._input, *(camera.name for camera in self.cameras)], ["action"])
        names = ([i.name for i in inputs], [o.name for o in outputs])
        if names != expected:
            raise BundleError(f"{bundle.onnx_path} must have inputs {expected[0]} and output 'action' (as policy.json "
                              f"declares), has {names}")
        obs_dim, act_dim = inputs[0].shape[-1], outputs[0].shape[-1]
        if obs_dim != bundle.observation_size or act_dim != bundle.action_size:
            raise BundleError(f"{bundle.onnx_path} maps {obs_dim} -> {act_dim} entries, policy.json declares "
                              f"{bundle.observation_size} -> {bundle.action_size}")
        for camera, graph_input in zip(self.cameras, inputs[1:]):
            if list(graph_input.shape[1:]) != list(camera.shape) or graph_input.type != "tensor(uint8)":
                raise BundleError(f"{bundle.onnx_path} takes {graph_input.name} as {graph_input.type} "
                                  f"{graph_input.shape[1:]}, policy.json declares uint8 {list(camera.shape)}")
        self.observation_size = bundle.observation_size
        self._check_weights(bundle)
        self._check_recorded_pairs(bundle)
        self._feed = np.zeros((1, bundle.observation_size), dtype=np.float32)
        self._graph, self.engine = (self._numpy_graph(bundle) if not self.cameras
                                    else (None, "onnxruntime (a policy on camera images)"))

    @staticmethod
    def _check_weights(bundle: PolicyBundle) -> None:
        """BundleError if a weight of the network is NaN or infinite."""
        try:
            weights = float_initializers(bundle.onnx_path)
        except UnsupportedGraph:  # ONNX Runtime loaded it: the recorded pairs still judge it
            return
        for name, values in weights.items():
            if not np.all(np.isfinite(values)):
                raise BundleError(f"{bundle.onnx_path}: weight {name!r} holds {int(np.sum(~np.isfinite(values)))} "
                                  "NaN or infinite values; every weight must be finite")

    def _check_recorded_pairs(self, bundle: PolicyBundle) -> None:
        """BundleError unless the network reproduces every recorded pair within PAIR_TOLERANCE."""
        actions = self.batch(bundle.recorded_observations, bundle.recorded_images)
        errors = np.abs(actions.astype(np.float64) - bundle.recorded_actions)
        errors[~np.isfinite(errors)] = np.inf  # a NaN action is as wrong as it gets
        worst = int(np.argmax(errors.max(axis=1)))
        if not errors.max() <= PAIR_TOLERANCE:
            raise BundleError(f"{bundle.onnx_path} does not reproduce the bundle's recorded pairs: its action for "
                              f"recorded_pairs[{worst}] differs by {errors.max():.3g} (allowed: {PAIR_TOLERANCE:g}); "
                              "the network is not the one exported with this policy.json")

    def _numpy_graph(self, bundle: PolicyBundle) -> tuple[NumpyGraph | None, str]:
        """The numpy executor and "numpy", or None and why ONNX Runtime runs the ticks."""
        try:
            graph = NumpyGraph(bundle.onnx_path)
        except UnsupportedGraph as reason:
            return None, f"onnxruntime (numpy cannot run the graph: {reason})"
        rng = np.random.default_rng(0)
        observations = bundle.recorded_observations  # at least one: load_bundle requires it
        perturbed = observations[rng.integers(len(observations), size=256)]
        perturbed = perturbed + rng.normal(scale=0.1, size=perturbed.shape).astype(np.float32)
        checks = np.concatenate([observations, perturbed])
        try:
            error = float(np.max(np.abs(graph(checks) - self.batch(checks))))
        except (ValueError, KeyError) as reason:  # shapes that do not broadcast, a value no node computes
            return None, f"onnxruntime (numpy cannot run the graph: {reason!r})"
        if not error <= AGREEMENT:
            return None, f"onnxruntime (numpy differs from ONNX Runtime by {error:.2g})"
        return graph, "numpy"

    def __call__(self, observation: np.ndarray, images: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """The action (float64) for one observation vector (and for a policy on camera images, one uint8 RGB
        (height, width, 3) image per camera by name)."""
        if self._graph is not None:
            return self._graph(observation).astype(np.float64)
        self._feed[0] = observation
        feed = {self._input: self._feed, **self._image_feed(images, batched=False)}
        return self._session.run(["action"], feed)[0][0].astype(np.float64)

    def batch(self, observations: np.ndarray, images: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Actions (n, act) for observations (n, obs) (and images (n, height, width, 3) per camera)."""
        feed = {self._input: np.asarray(observations, dtype=np.float32), **self._image_feed(images, batched=True)}
        return self._session.run(["action"], feed)[0]

    def _image_feed(self, images: Mapping[str, np.ndarray] | None, batched: bool) -> dict[str, np.ndarray]:
        """The cameras' inputs: every camera's image(s), uint8 of its shape; ValueError naming one that is not."""
        feed = {}
        for camera in self.cameras:
            image = None if images is None else images.get(camera.name)
            if image is None:
                raise ValueError(f"the policy reads camera {camera.name!r}, and no image of it was given")
            image = np.asarray(image)
            shape = image.shape[1:] if batched else image.shape
            if image.dtype != np.uint8 or tuple(shape) != camera.shape:
                raise ValueError(f"camera {camera.name!r}: got {image.dtype} {tuple(shape)}, the policy reads uint8 "
                                 f"{camera.shape}")
            feed[camera.name] = image if batched else image[None]
        return feed
