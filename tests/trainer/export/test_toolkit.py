"""The ONNX toolkit (``trainer.export``) is the one place models are built, at the versions of
``protocol.onnx_contract``, and its tree emitter keeps every base value."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from adaptedge.protocol.onnx_contract import IR_VERSION, OPSETS
from adaptedge.trainer.export.models import (
    linear_node_model,
    linear_to_onnx,
    mlp_to_onnx,
    node_model,
    ranked_policy_model,
    tree_ensemble_to_onnx,
)
from adaptedge.trainer.export.run import run_node, run_onnx
from adaptedge.trainer.export.trees import TreeArrays, tree_core
from adaptedge.trainer.methods.cart import Tree

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "trainer", "edge", "cloud", "simulator", "cli")


def _folder(package: str) -> Path:
    """Where ``adaptedge.<package>`` is imported from (the repository's, or an installed copy)."""
    return Path(importlib.import_module(f"adaptedge.{package}").__file__ or "").resolve().parent


# benchmarks/ is in the repository, not in the trainer's sdist
PRODUCT = [_folder(p) for p in PACKAGES] + [p for p in [REPO / "benchmarks"] if p.is_dir()]
TOOLKIT = _folder("trainer") / "export"
BUILDERS = {"make_graph", "make_model"}


def _builder_calls(path: Path) -> list[int]:
    """Lines of ``make_graph``/``make_model`` calls (any alias of ``onnx.helper``) and
    imports."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        name = None
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        elif isinstance(node, ast.ImportFrom):
            name = next((a.name for a in node.names if a.name in BUILDERS), None)
        if name in BUILDERS:
            lines.append(node.lineno)
    return lines


@pytest.mark.slow
def test_only_the_toolkit_builds_onnx_graphs() -> None:
    files = [p for folder in PRODUCT for p in sorted(folder.rglob("*.py"))]
    assert len(files) > 50
    outside = [f"{p}:{line}" for p in files
               if TOOLKIT not in p.resolve().parents for line in _builder_calls(p)]
    assert outside == [], f"make_graph/make_model outside trainer/export/: {outside}"
    assert any(_builder_calls(p) for p in TOOLKIT.glob("*.py")), "the toolkit's own calls"


@pytest.mark.parametrize("source", [
    "from onnx import helper as h\nm = h.make_model(None)\n",
    "from onnx.helper import make_graph\n",
    "import onnx\ng = onnx.helper.make_graph([], 'g', [], [])\n",
])
def test_the_check_sees_every_spelling(source: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert len(_builder_calls(probe)) == 1


def test_the_contract_module_does_not_import_onnx() -> None:
    code = ("import sys, adaptedge.protocol.onnx_contract\n"
            "print(','.join(m for m in sys.modules if m.split('.')[0] == 'onnx'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == ""


def _stump(feature: int, threshold: float, left: list[float], right: list[float]) -> Tree:
    return Tree(np.array([feature, -1, -1]), np.array([threshold, 0, 0], np.float32),
                np.array([1, -1, -1]), np.array([2, -1, -1]),
                np.array([[0.0] * len(left), left, right]))


def test_a_gate_without_trees_keeps_its_base_value() -> None:
    """onnxruntime drops the base value of a target no reached leaf names: the gate column
    of an ensemble whose trees all write the logit column must still hold g's base."""
    lpc = _stump(7, 0.5, [-0.25], [0.25])
    core = tree_core([(lpc, 0)], np.array([0.0, 0.5]), {7: 0})
    model = node_model(core, [], 1, 2, "gate")
    out = run_node(model, np.array([[0.0], [1.0]], np.float32))
    assert out["action_scores"].tolist() == [[-0.5, 0.5], [-0.5, 0.5]]  # g = 0.5 escalates
    assert np.allclose(out["probabilities"][:, 1], 1 / (1 + np.exp([0.25, -0.25])))


def test_a_row_reaching_only_zero_leaves_keeps_the_base_value() -> None:
    tree = TreeArrays(np.array([0, -1, -1]), np.array([0.5, 0, 0]), np.array([1, -1, -1]),
                      np.array([2, -1, -1]), np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]))
    model = tree_ensemble_to_onnx([tree], 1, 2, base_values=[3.0, 5.0])
    got = run_onnx(model, np.array([[0.0], [1.0]], np.float32), "variable")
    assert got.tolist() == [[3.0, 5.0], [4.0, 5.0]]


def test_an_ensemble_of_zero_leaves_and_zero_base_exports() -> None:
    """A boosted model fitted on a few balanced rows (no split, every leaf 0, base 0) left the
    tree node with no target entries, which onnx refuses ("target_ids ... empty iterator")."""
    tree = TreeArrays(np.array([-1]), np.zeros(1), np.array([-1]), np.array([-1]),
                      np.zeros((1, 1)))
    model = tree_ensemble_to_onnx([tree, tree], 1, 1, base_values=[0.0])
    got = run_onnx(model, np.array([[0.0], [1.0]], np.float32), "variable")
    assert got.tolist() == [[0.0], [0.0]]


def test_ranked_policy_head_picks_the_first_action_in_the_tie_band() -> None:
    classifier = linear_to_onnx(np.zeros((2, 2)), [0.0, 0.0], output="probabilities",
                                transform="softmax")
    # features [x0, x1, p0, p1, top1, margin]; action 0 scores x0, action 1 scores x1
    W = np.zeros((6, 2))
    W[0, 0], W[1, 1] = 1.0, 1.0
    model = ranked_policy_model(classifier, W, np.zeros(2), 2, tie_band=0.1)
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.05]], np.float32)
    scores = run_node(model, X)["action_scores"]
    assert scores.argmax(axis=1).tolist() == [0, 1, 0]


def _every_kind() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    lpc = _stump(1, 0.0, [-1.0, 0.5, 0.5], [1.0, -0.5, -0.5])
    return {
        "tree-gate": node_model(tree_core([(lpc, 0)], np.zeros(4), {0: 0, 1: 1}), [], 2, 3,
                                "gate", margin_weight=0.5),
        "tree-confidence": node_model(tree_core([(lpc, 0)], np.zeros(3), {1: 0}), [], 1, 3,
                                      "confidence", 0.6),
        "linear-node": linear_node_model(rng.normal(size=(3, 2)), np.zeros(2),
                                         rng.normal(size=(3, 2)), np.zeros(2)),
        "mlp": mlp_to_onnx([(rng.normal(size=(3, 4)), np.zeros(4)),
                            (rng.normal(size=(4, 2)), np.zeros(2))]).SerializeToString(),
    }


@pytest.mark.parametrize("kind", sorted(_every_kind()))
def test_models_use_the_contract_versions(kind: str) -> None:
    model = onnx.load_from_string(_every_kind()[kind])
    assert model.ir_version == IR_VERSION
    versions = {op.domain: op.version for op in model.opset_import}
    assert versions[""] == OPSETS[""]
    assert all(OPSETS[d] == v for d, v in versions.items())
    assert [i.name for i in model.graph.input] == ["x"]
    run_node(model.SerializeToString(), np.zeros((2, model.graph.input[0].type.tensor_type
                                                  .shape.dim[1].dim_value), np.float32))
