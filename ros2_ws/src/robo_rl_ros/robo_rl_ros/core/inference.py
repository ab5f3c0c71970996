"""ONNX Runtime inference of a bundle's policy: one observation in, one action out."""

from __future__ import annotations

import numpy as np
import onnxruntime

from robo_rl_ros.core.bundle import BundleError, PolicyBundle


class OnnxPolicy:
    """The bundle's deterministic policy in ONNX Runtime (CPU, one thread: the robot's other work keeps
    the remaining cores)."""

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

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        """The action (float64) for one observation vector."""
        self._feed[0] = observation
        return self._session.run(["action"], {"observation": self._feed})[0][0].astype(np.float64)

    def batch(self, observations: np.ndarray) -> np.ndarray:
        """Actions (n, act) for observations (n, obs)."""
        return self._session.run(["action"], {"observation": np.asarray(observations, dtype=np.float32)})[0]
