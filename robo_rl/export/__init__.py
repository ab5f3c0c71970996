"""Export: from a training run to a policy bundle (ONNX, policy.json, generated C) and its verification."""
