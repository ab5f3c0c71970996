"""Inference of a bundle's policy: one observation in, one action out."""

from __future__ import annotations

import numpy as np
import onnxruntime

from robo_rl_ros.core.bundle import BundleError, PolicyBundle
from robo_rl_ros.core.onnx_numpy import NumpyGraph, UnsupportedGraph

AGREEMENT = 1e-5  # largest difference from ONNX Runtime for which a tick may run the graph in numpy


class OnnxPolicy:
    """The bundle's deterministic policy from its ONNX file.

    ONNX Runtime (CPU, one thread: the robot's other work keeps the remaining cores) loads and checks the
    file and runs `batch`. A single observation (`__call__`, once per control tick) runs the same graph in
    numpy (core.onnx_numpy), about twice as fast on the cold cache a tick finds, if that executor supports
    the graph and agrees with ONNX Runtime within `AGREEMENT` on the bundle's recorded observations and
    perturbations of them; otherwise in ONNX Runtime too. `engine` says which.
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
        names = ([i.name for i in inputs], [o.name for o in outputs])
        if names != (["observation"], ["action"]):
            raise BundleError(f"{bundle.onnx_path} must have input 'observation' and output 'action', has {names}")
        obs_dim, act_dim = inputs[0].shape[-1], outputs[0].shape[-1]
        if obs_dim != bundle.observation_size or act_dim != bundle.action_size:
            raise BundleError(f"{bundle.onnx_path} maps {obs_dim} -> {act_dim} entries, policy.json declares "
                              f"{bundle.observation_size} -> {bundle.action_size}")
        self.observation_size = bundle.observation_size
        self._feed = np.zeros((1, bundle.observation_size), dtype=np.float32)
        self._graph, self.engine = self._numpy_graph(bundle)

    def _numpy_graph(self, bundle: PolicyBundle) -> tuple[NumpyGraph | None, str]:
        """The numpy executor and "numpy", or None and why ONNX Runtime runs the ticks."""
        try:
            graph = NumpyGraph(bundle.onnx_path)
        except UnsupportedGraph as reason:
            return None, f"onnxruntime (numpy cannot run the graph: {reason})"
        rng = np.random.default_rng(0)
        observations = bundle.recorded_observations
        if not len(observations):
            observations = np.zeros((1, self.observation_size), dtype=np.float32)
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

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        """The action (float64) for one observation vector."""
        if self._graph is not None:
            return self._graph(observation).astype(np.float64)
        self._feed[0] = observation
        return self._session.run(["action"], {"observation": self._feed})[0][0].astype(np.float64)

    def batch(self, observations: np.ndarray) -> np.ndarray:
        """Actions (n, act) for observations (n, obs)."""
        return self._session.run(["action"], {"observation": np.asarray(observations, dtype=np.float32)})[0]
