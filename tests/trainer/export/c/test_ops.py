"""Node models translated to C compute what onnxruntime computes, bit for bit where the graph
has no exponential: tree ensembles in both split modes on inputs at, just below and just above
every threshold (and NaN), with several targets and base values; linear heads; refusals."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import onnx
import pytest

from adaptedge.protocol.onnx_contract import PROBA_OUTPUT
from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c.ops import c_function, node_function
from adaptedge.trainer.export.c.tree_code import KEY_SOURCE, float_key
from adaptedge.trainer.export.models import tree_ensemble_to_onnx
from adaptedge.trainer.export.trees import TreeArrays
from tests.support.c_policy import CFLAGS, compile_c, gcc_available

pytestmark = pytest.mark.skipif(not gcc_available(), reason="gcc is not installed")


def compiled(model: onnx.ModelProto, n_inputs: int, width: int, tmp_path: Path
             ) -> ctypes.CDLL:
    program = node_function(model, "model", list(range(n_inputs)), width, 1)
    src = tmp_path / "model.c"
    src.write_text("#include <stdint.h>\n#include <math.h>\n" + KEY_SOURCE + c_function(program)
                   + "void run(const float *x, float *p) { float s[1]; model(x, p, s); }\n")
    so = tmp_path / "model.so"
    compile_c(["gcc", *CFLAGS, "-Wno-unused-function", "-shared", "-fPIC", str(src), "-o",
               str(so), "-lm"])
    return ctypes.CDLL(str(so))


def c_outputs(lib: ctypes.CDLL, X: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((len(X), width), np.float32)
    for i, row in enumerate(np.ascontiguousarray(X, np.float32)):
        lib.run(np.ctypeslib.as_ctypes(row), np.ctypeslib.as_ctypes(out[i]))
    return out


def ort_outputs(model: onnx.ModelProto, X: np.ndarray) -> np.ndarray:
    """onnxruntime as the edge runs it: one thread, one row per call (with several threads
    a batch's trees are summed in parts, in another order)."""
    import onnxruntime as ort

    from adaptedge.edge.session import session_options

    session = ort.InferenceSession(model.SerializeToString(), session_options(),
                                   providers=["CPUExecutionProvider"])
    rows = X.astype(np.float32)
    return np.concatenate([session.run([PROBA_OUTPUT], {"x": rows[i:i + 1]})[0]
                           for i in range(len(rows))])


def random_tree(rng: np.random.Generator, n_inputs: int, k: int, depth: int) -> TreeArrays:
    n_inner = 2 ** depth - 1
    n = 2 * n_inner + 1
    feature = np.full(n, -1)
    feature[:n_inner] = rng.integers(0, n_inputs, n_inner)
    left = np.where(np.arange(n) < n_inner, 2 * np.arange(n) + 1, -1)
    right = np.where(np.arange(n) < n_inner, 2 * np.arange(n) + 2, -1)
    value = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.8)  # some zero leaves
    return TreeArrays(feature, rng.normal(size=n), left, right, value,
                      missing_left=rng.random(n) < 0.5)


def edge_inputs(model: onnx.ModelProto, n_inputs: int, rng: np.random.Generator) -> np.ndarray:
    """Rows whose every column sits at a threshold or one float32 step below or above it, or
    is 0.0 or -0.0 (the library's inputs are finite: a non-finite read fails)."""
    tree = next(n for n in model.graph.node if n.op_type == "TreeEnsembleRegressor")
    values = np.asarray(next(a.floats for a in tree.attribute if a.name == "nodes_values"),
                        np.float32)
    picks = rng.choice(values, size=(400, n_inputs))
    step = rng.integers(-1, 2, size=picks.shape)
    X = np.where(step < 0, np.nextafter(picks, np.float32(-np.inf)),
                 np.where(step > 0, np.nextafter(picks, np.float32(np.inf)), picks))
    X[rng.random(X.shape) < 0.05] = 0.0
    X[rng.random(X.shape) < 0.05] = -0.0
    return X.astype(np.float32)


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT"])
@pytest.mark.parametrize("k", [1, 3])
def test_tree_ensemble_is_bit_exact_at_thresholds(mode: str, k: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(k)
    n_inputs = 4
    trees = [random_tree(rng, n_inputs, k, depth=3) for _ in range(12)]
    model = tree_ensemble_to_onnx(trees, n_inputs, k, base_values=rng.normal(size=k),
                                  mode=mode, output=PROBA_OUTPUT)  # type: ignore[arg-type]
    X = edge_inputs(model, n_inputs, rng)
    got = c_outputs(compiled(model, n_inputs, k, tmp_path), X, k)
    want = ort_outputs(model, X)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_softmax_head_within_float32_noise(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    trees = [random_tree(rng, 3, 4, depth=2) for _ in range(5)]
    model = tree_ensemble_to_onnx(trees, 3, 4, output=PROBA_OUTPUT, transform="softmax")
    X = rng.normal(size=(300, 3)).astype(np.float32)
    got = c_outputs(compiled(model, 3, 4, tmp_path), X, 4)
    want = ort_outputs(model, X)
    assert np.allclose(got, want, rtol=0, atol=1e-6)
    assert np.array_equal(got.argmax(axis=1), want.argmax(axis=1))


def test_unsupported_op_is_refused_naming_it() -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Exp", ["x"], [PROBA_OUTPUT])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info(PROBA_OUTPUT, TensorProto.FLOAT, ["N", 2])])
    with pytest.raises(ExportError, match="ONNX op Exp is not expressible") as info:
        node_function(helper.make_model(graph), "m", [0, 1], 2, 1)
    assert "\n" not in str(info.value)


def test_float_keys_order_as_floats() -> None:
    rng = np.random.default_rng(7)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.0, -1.0],
                       np.float32)
    values = np.concatenate([special, rng.normal(size=200).astype(np.float32),
                             (rng.normal(size=100) * 1e-40).astype(np.float32)])
    keys = np.array([float_key(v) for v in values])
    a, b = np.meshgrid(np.arange(len(values)), np.arange(len(values)))
    va, vb = values[a], values[b]
    assert np.array_equal(np.sign(keys[a] - keys[b]), (va > vb).astype(int) - (va < vb))
