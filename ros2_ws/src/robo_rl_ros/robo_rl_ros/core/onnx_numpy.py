"""A numpy executor for the small ONNX graphs robo-rl exports (MLP policies), read from the file itself.

Why beside ONNX Runtime: a control tick at 100 Hz finds the caches cold after 10 ms of sleep, and there
one ONNX Runtime call costs about 200 us (20 us when hot), the largest single part of the tick. The same
graph as a dozen numpy calls costs about half of that. The node checks this executor against ONNX Runtime
before trusting it (robo_rl_ros.core.inference), and graphs with other operators stay on ONNX Runtime.

The file is read with onnx's own loader; the executor takes from it only what these graphs need: the nodes
with their attributes, float32 initializers, and the graph's input and output names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper


class UnsupportedGraph(ValueError):
    """The ONNX file holds something this executor does not run (ONNX Runtime still can)."""


Array = np.ndarray


class NumpyGraph:
    """Runs an ONNX graph of one input and one output with numpy (float32).

    The graph must be a chain: every node takes the previous node's output and constants (an MLP's
    Gemm, activations, normalization and scaling). Elementwise scaling and shifts right before a Gemm
    (the observation normalization) are folded into its weights; `__call__` then applies one numpy
    function per remaining node.
    """

    def __init__(self, path: str | Path):
        graph = _load(path).graph
        constants = dict(_tensor(t) for t in graph.initializer)
        inputs = [v.name for v in graph.input if v.name not in constants]
        outputs = [v.name for v in graph.output]
        if len(inputs) != 1 or len(outputs) != 1:
            raise UnsupportedGraph(f"needs one input and one output, has {inputs} -> {outputs}")
        steps, value = [], inputs[0]
        for node in graph.node:
            step, value = _chain_step(node, value, constants)
            if step is not None:
                steps.append(step)
        if value != outputs[0]:
            raise UnsupportedGraph(f"the chain of nodes ends at {value!r}, not at the output {outputs[0]!r}")
        self._chain = [_lower(step) for step in _fold_into_gemm(steps)]

    def __call__(self, x: Array) -> Array:
        """The graph's output for input `x` (float32; one vector or a batch of rows)."""
        x = np.asarray(x, dtype=np.float32)
        for function in self._chain:
            x = function(x)
        return x


def float_initializers(path: str | Path) -> dict[str, Array]:
    """The graph's float32 initializers (the network's weights) by name; others are left out.
    UnsupportedGraph if onnx cannot load the file."""
    weights = {}
    for tensor in _load(path).graph.initializer:
        try:
            name, values = _tensor(tensor)
        except UnsupportedGraph:  # not float32 in the file (an int shape, external data): not a weight here
            continue
        weights[name] = values
    return weights


Step = tuple  # (operator, *float64 constants): "Gemm" (weight (in, out), bias), "Sub" (c), "Relu" (), ...
_UNARY = {"Relu", "Tanh", "Sigmoid"}
_WITH_CONSTANT = {"Add", "Sub", "Mul", "Div", "Max", "Min"}
_CONSTANT_OPS: dict[str, Callable[..., Array]] = {
    "Identity": lambda x: x, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
    "Max": np.maximum, "Min": np.minimum,
}


def _chain_step(node: onnx.NodeProto, value: str, constants: dict[str, Array]) -> tuple[Step | None, str]:
    """The step of one node on the chain's current `value`, and the chain's next value. A node on
    constants alone is computed here, adds its output to `constants` and is no step (None)."""
    op, domain = node.op_type, node.domain
    inputs, outputs = list(node.input), list(node.output)
    attributes = dict(_attribute(a) for a in node.attribute)
    if domain not in ("", "ai.onnx") or len(outputs) != 1:
        raise UnsupportedGraph(f"operator {domain}.{op} with {len(outputs)} outputs")
    if all(name in constants for name in inputs) and op in _CONSTANT_OPS and not attributes:
        constants[outputs[0]] = _CONSTANT_OPS[op](*[constants[name] for name in inputs])
        return None, value
    if not inputs or inputs[0] != value or any(name not in constants for name in inputs[1:]):
        raise UnsupportedGraph(f"{op} node {inputs} -> {outputs} is not on a chain from {value!r}")
    operands = [constants[name].astype(np.float64) for name in inputs[1:]]
    if op == "Gemm" and len(operands) in (1, 2) and not attributes.get("transA", 0):
        weight = operands[0] * attributes.get("alpha", 1.0)
        weight = weight.T if attributes.get("transB", 0) else weight
        bias = operands[1] * attributes.get("beta", 1.0) if len(operands) == 2 else np.zeros(weight.shape[1])
        return ("Gemm", weight, np.broadcast_to(bias, (weight.shape[1],))), outputs[0]
    if op == "LayerNormalization" and len(operands) == 2 and attributes.get("axis", -1) == -1:
        return ("LayerNormalization", *operands, attributes.get("epsilon", 1e-5)), outputs[0]
    if (op in _UNARY and not operands or op in _WITH_CONSTANT and len(operands) == 1
            or op == "Identity" and not operands) and not attributes:
        return (op, *operands), outputs[0]
    raise UnsupportedGraph(f"operator {op} with {len(operands)} constant inputs and attributes {sorted(attributes)}")


def _fold_into_gemm(steps: list[Step]) -> list[Step]:
    """`steps` with runs of Add/Sub/Mul/Div by constants right before a Gemm folded into its weights:
    ((x * s + t) @ W + b = x @ (s W) + (t @ W + b))."""
    folded: list[Step] = []
    for step in steps:
        if step[0] != "Gemm":
            folded.append(step)
            continue
        _, weight, bias = step
        # the Gemm's input as u * scale + shift of the input u of the earliest step folded so far
        scale, shift = np.ones(weight.shape[0]), np.zeros(weight.shape[0])
        while folded and folded[-1][0] in ("Add", "Sub", "Mul", "Div") and folded[-1][1].size in (1, weight.shape[0]):
            op, c = folded.pop()
            c = c.reshape(-1)
            if op == "Add":
                shift = shift + c * scale
            elif op == "Sub":
                shift = shift - c * scale
            elif op == "Mul":
                scale = scale * c
            else:
                scale = scale / c
        folded.append(("Gemm", scale[:, None] * weight, shift @ weight + bias))
    return folded


def _lower(step: Step) -> Callable[[Array], Array]:
    """One numpy function (float32 in, float32 out) for a step."""
    op, *operands = step
    c = [np.ascontiguousarray(x, dtype=np.float32) if isinstance(x, np.ndarray) else x for x in operands]
    if op == "Gemm":
        weight, bias = c
        return lambda x: x @ weight + bias
    if op == "LayerNormalization":
        return _layer_norm(*c)
    if op in _WITH_CONSTANT:
        function, constant = _CONSTANT_OPS[op], c[0]
        return lambda x: function(x, constant)
    return {"Relu": lambda x: np.maximum(x, np.float32(0.0)), "Tanh": np.tanh, "Identity": lambda x: x,
            "Sigmoid": lambda x: np.float32(1.0) / (np.float32(1.0) + np.exp(-x))}[op]


def _layer_norm(scale: Array, bias: Array, epsilon: float) -> Callable[[Array], Array]:
    eps = np.float32(epsilon)

    def layer_norm(x: Array) -> Array:
        centered = x - x.mean(axis=-1, keepdims=True)
        return centered / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps) * scale + bias
    return layer_norm


def _load(path: str | Path) -> onnx.ModelProto:
    """The ONNX model in `path` (weights in the file itself); UnsupportedGraph if onnx cannot load it."""
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and onnx's own errors for a corrupt file
        raise UnsupportedGraph(f"onnx cannot load {path}: {error}") from error


def _tensor(tensor: onnx.TensorProto) -> tuple[str, Array]:
    """(name, values) of an initializer holding float32 values in the file."""
    if tensor.data_type != onnx.TensorProto.FLOAT or tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise UnsupportedGraph(f"initializer {tensor.name!r} is not float32 stored in the file")
    try:
        return tensor.name, numpy_helper.to_array(tensor).astype(np.float32)
    except Exception as error:  # values that do not fill the declared dims
        raise UnsupportedGraph(f"initializer {tensor.name!r}: {error}") from error


def _attribute(attribute: onnx.AttributeProto) -> tuple[str, Any]:
    """(name, value) of a float or int attribute."""
    if attribute.type not in (onnx.AttributeProto.FLOAT, onnx.AttributeProto.INT):
        raise UnsupportedGraph(f"attribute {attribute.name!r} is neither a float nor an int")
    return attribute.name, helper.get_attribute_value(attribute)
