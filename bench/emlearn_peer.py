"""Peer for bench/mcu.py: emlearn's C for a given ReLU MLP (run inside bench/.venv-emlearn).

    bench/.venv-emlearn/bin/python bench/emlearn_peer.py --weights net.npz --out DIR

net.npz holds w0, b0, w1, b1, ... in PyTorch's layout (weight (out, in)), plus `obs` and `mean` (the
PyTorch pre-squash outputs for `obs`). The layers go into a scikit-learn `MLPRegressor` (ReLU hidden
layers, identity output) by setting `coefs_`/`intercepts_` by hand, which `emlearn.convert(model,
method="loadable", return_type="regressor")` turns into DIR/emlearn_model.h: the weights, a static
`EmlNet` and `<name>_regress` (-> `eml_net_regress`, float outputs). "loadable" is emlearn's path for
regressors ("inline" raises NotImplementedError for them, and in emlearn 0.23.2 its float code generator
fails on MLPs: `constant_declare` formats the activation enum as an int). The emlearn headers it includes
are copied next to it. emlearn writes every weight as "%.6f" (6 decimals), so its C does not hold the
exact float32 weights. Prints JSON: versions, the C names, and scikit-learn's own float64 prediction
error vs PyTorch's pre-squash output (a check that the weights went in the right way round).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HEADERS = ("eml_net.h", "eml_net_common.h", "eml_common.h", "eml_log.h")
NAME = "emlnet"


def sklearn_mlp(weights: list[np.ndarray], biases: list[np.ndarray]) -> Any:
    """An MLPRegressor (ReLU hidden, identity output) holding exactly these float32 layers."""
    from sklearn.neural_network import MLPRegressor

    hidden = tuple(w.shape[0] for w in weights[:-1])
    model = MLPRegressor(hidden_layer_sizes=hidden, activation="relu", max_iter=1, random_state=0)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():  # one iteration to create the fitted attributes, then overwritten
        warnings.simplefilter("ignore")
        model.fit(rng.standard_normal((8, weights[0].shape[1])), rng.standard_normal((8, weights[-1].shape[0])))
    model.coefs_ = [np.ascontiguousarray(w.T, dtype=np.float32) for w in weights]  # sklearn: (in, out)
    model.intercepts_ = [np.asarray(b, dtype=np.float32) for b in biases]
    return model


def convert(model: Any, out: Path) -> str:
    """Write emlearn's C for `model` into `out`; its file name."""
    import emlearn

    file = "emlearn_model.h"
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # emlearn test-compiles the model on the host in ./tmp
        try:
            emlearn.convert(model, method="loadable", return_type="regressor").save(file=str(out / file), name=NAME)
        finally:
            os.chdir(cwd)
    for header in HEADERS:
        shutil.copy(Path(emlearn.includedir) / header, out / header)
    return file


def main() -> None:
    """Convert, check scikit-learn's forward pass against PyTorch's, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    data = np.load(args.weights)
    n = len([k for k in data.files if k.startswith("w")])
    weights = [data[f"w{i}"] for i in range(n)]
    biases = [data[f"b{i}"] for i in range(n)]
    model = sklearn_mlp(weights, biases)
    sklearn_error = float(np.abs(model.predict(data["obs"].astype(np.float64)) - data["mean"]).max())
    args.out.mkdir(parents=True, exist_ok=True)
    file = convert(model, args.out.resolve())
    print(json.dumps({"emlearn_version": metadata.version("emlearn"),
                      "sklearn_version": metadata.version("scikit-learn"),
                      "name": NAME, "file": file, "headers": list(HEADERS),
                      "sklearn_vs_torch_max_abs_error": sklearn_error}))


if __name__ == "__main__":
    main()
