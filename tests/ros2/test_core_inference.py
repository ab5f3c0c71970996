"""The numpy executor of exported ONNX graphs against ONNX Runtime, and the policy's choice between them."""

import json
import shutil

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from robo_rl_ros.core.bundle import load_bundle
from robo_rl_ros.core.inference import OnnxPolicy
from robo_rl_ros.core.onnx_numpy import NumpyGraph, UnsupportedGraph
from tests.ros2.conftest import HOVER_BUNDLE

# the committed policies on state vectors (a policy on camera images runs in ONNX Runtime: test_core_images.py)
BUNDLES = sorted(path.name for path in HOVER_BUNDLE.parent.iterdir()
                 if (path / "policy.onnx").exists() and not (path / "recorded_images.npz").exists())


def _onnxruntime(path, x):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", BUNDLES)
def test_committed_bundles_tick_in_numpy_and_agree_with_onnxruntime(name):
    bundle = load_bundle(HOVER_BUNDLE.parent / name)
    policy = OnnxPolicy(bundle)
    assert policy.engine == "numpy"
    rng = np.random.default_rng(1)
    observations = np.concatenate([bundle.recorded_observations,
                                   rng.normal(size=(64, bundle.observation_size)).astype(np.float32)])
    single = np.array([policy(obs) for obs in observations])
    assert single.dtype == np.float64 and single.shape == (len(observations), bundle.action_size)
    np.testing.assert_allclose(single, policy.batch(observations), atol=1e-5, rtol=0)
    np.testing.assert_allclose(single[:len(bundle.recorded_actions)], bundle.recorded_actions, atol=1e-5, rtol=0)


def test_freshly_exported_bundle_ticks_in_numpy(exported_bundle):
    bundle = load_bundle(exported_bundle)
    policy = OnnxPolicy(bundle)
    assert policy.engine == "numpy"
    np.testing.assert_allclose([policy(obs) for obs in bundle.recorded_observations], bundle.recorded_actions,
                               atol=1e-5, rtol=0)


def _model(nodes, initializers, n_in, n_out, inputs=("x",)):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, n_in]) for name in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n_out])],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_every_supported_operator_and_the_folded_normalization_match_onnxruntime(tmp_path):
    rng = np.random.default_rng(0)
    n, h, m = 6, 5, 3
    weights = {
        "mean": rng.normal(size=n), "std": rng.uniform(0.5, 2.0, size=n), "gain": rng.uniform(0.5, 2, n),
        "offset": rng.normal(size=n), "w1": rng.normal(size=(n, h)), "b1": rng.normal(size=h),
        "ln_scale": rng.uniform(0.5, 2, h), "ln_bias": rng.normal(size=h), "w2": rng.normal(size=(m, h)),
        "b2": rng.normal(size=m), "scale": [0.5, 1.0, 2.0], "low": [0.1, 0.2, 0.3], "high": [0.6, 0.8, 0.9],
    }
    nodes = [
        helper.make_node("Identity", ["scale"], ["scale_copy"]),  # on constants alone: computed at load
        helper.make_node("Mul", ["x", "gain"], ["a"]), helper.make_node("Add", ["a", "offset"], ["b"]),
        helper.make_node("Sub", ["b", "mean"], ["c"]), helper.make_node("Div", ["c", "std"], ["d"]),
        helper.make_node("Gemm", ["d", "w1", "b1"], ["e"], alpha=0.5, beta=2.0),
        helper.make_node("LayerNormalization", ["e", "ln_scale", "ln_bias"], ["f"], axis=-1, epsilon=1e-5),
        helper.make_node("Relu", ["f"], ["g"]), helper.make_node("Tanh", ["g"], ["i"]),
        helper.make_node("Gemm", ["i", "w2", "b2"], ["j"], transB=1), helper.make_node("Sigmoid", ["j"], ["k"]),
        helper.make_node("Mul", ["k", "scale_copy"], ["l"]), helper.make_node("Max", ["l", "low"], ["o"]),
        helper.make_node("Min", ["o", "high"], ["y"]),
    ]
    path = tmp_path / "all.onnx"
    onnx.save(_model(nodes, weights, n, m), path)
    graph = NumpyGraph(path)
    x = rng.normal(size=(200, n)).astype(np.float32)
    np.testing.assert_allclose(graph(x), _onnxruntime(path, x), atol=1e-5, rtol=0)
    np.testing.assert_allclose(graph(x[0]), _onnxruntime(path, x[:1])[0], atol=1e-5, rtol=0)
    assert len(graph._chain) == 9  # Mul, Add, Sub, Div folded into the first Gemm; the Identity computed


@pytest.mark.parametrize("nodes, inputs, why", [
    ([helper.make_node("Gemm", ["x", "w"], ["h"]), helper.make_node("LeakyRelu", ["h"], ["y"], alpha=0.1)],
     ("x",), "operator LeakyRelu"),
    ([helper.make_node("Add", ["x", "x2"], ["h"]), helper.make_node("Gemm", ["h", "w"], ["y"])],
     ("x", "x2"), "one input"),
    ([helper.make_node("Gemm", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "h"], ["y"])],
     ("x",), "not on a chain"),
])
def test_graphs_it_cannot_run_are_refused_and_the_policy_keeps_onnxruntime(tmp_path, nodes, inputs, why):
    model = _model(nodes, {"w": np.ones((50, 4))}, 50, 4, inputs)
    onnx.save(model, tmp_path / "g.onnx")
    with pytest.raises(UnsupportedGraph, match=why):
        NumpyGraph(tmp_path / "g.onnx")
    if inputs != ("x",):
        return
    bundle_dir = tmp_path / "bundle"
    shutil.copytree(HOVER_BUNDLE, bundle_dir)
    for value, name in ((model.graph.input[0], "observation"), (model.graph.output[0], "action")):
        old = value.name
        value.name = name
        for node in model.graph.node:
            node.input[:] = [name if i == old else i for i in node.input]
            node.output[:] = [name if o == old else o for o in node.output]
    onnx.save(model, bundle_dir / "policy.onnx")
    # the bundle's recorded pairs and action bounds made to match this network (the node refuses a network
    # that does not reproduce them)
    manifest = json.loads((bundle_dir / "policy.json").read_text())
    observations = np.array([p["observation"] for p in manifest["recorded_pairs"]], dtype=np.float32)
    for pair, action in zip(manifest["recorded_pairs"], _onnxruntime(bundle_dir / "policy.onnx", observations)):
        pair["action"] = action.tolist()
    manifest["action"].update(low=[-1e6] * 4, high=[1e6] * 4, safe_action=[0.0] * 4)
    (bundle_dir / "policy.json").write_text(json.dumps(manifest))
    policy = OnnxPolicy(load_bundle(bundle_dir))
    assert policy.engine.startswith("onnxruntime (numpy cannot run the graph")
    obs = np.random.default_rng(0).normal(size=(3, 50)).astype(np.float32)
    np.testing.assert_allclose([policy(o) for o in obs], policy.batch(obs), atol=1e-6, rtol=0)
