"""A regression walk (issue #33): a stop answers the node's ``value``; the batched walk
(``walk_manifest``, ``BatchWalk.values``) and the per-row walk (``walk_row``) agree row by row
on the toy regression bundle, run with onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT, VALUE_OUTPUT
from adaptedge.protocol.walk import (
    STOP,
    WalkNode,
    compile_graph,
    walk_batch,
    walk_manifest,
    walk_row,
)
from tests.support.toy_regression_bundle import build_toy_regression_bundle, node_value

F32 = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    out = tmp_path_factory.mktemp("regwalk") / "b"
    return out, build_toy_regression_bundle(out)


def _sessions(path: Path, manifest: Manifest) -> dict[str, ort.InferenceSession]:
    return {name: ort.InferenceSession(str(path / name), providers=["CPUExecutionProvider"])
            for name in manifest.files}


@pytest.mark.parametrize("policy", ["gate", "walk"])
def test_batch_and_single_row_walks_agree(bundle: tuple[Path, Manifest], policy: str) -> None:
    path, manifest = bundle
    sessions = _sessions(path, manifest)

    def run_file(file: str, x: F32, scores: str | None) -> tuple[F32, F32 | None]:
        outs = sessions[file].run([VALUE_OUTPUT, *([scores] if scores else [])],
                                  {MODEL_INPUT: x})
        return outs[0], outs[1] if scores else None

    X = np.random.default_rng(3).normal(scale=2.0, size=(300, 3)).astype(np.float32)
    batch = walk_manifest(manifest, policy, X, run_file)
    assert batch.regression and batch.values.dtype == np.float32
    assert batch.values.shape == (300,)
    graph = compile_graph(manifest.policies[policy], [s.name for s in manifest.sensors], 3,
                          lambda node_id, node: node.model.file)
    answers: dict[str, float] = {}

    def run_node(node: WalkNode[str], row: F32) -> F32:
        x = row[node.inputs].reshape(1, -1)
        outs = run_file(node.model, x, None if node.single else ACTION_OUTPUT)
        answers["value"] = float(outs[0][0, 0])
        return outs[1][0] if outs[1] is not None else np.zeros(1, np.float32)

    kinds = set()
    for i, row in enumerate(X):
        node, action, _ = walk_row(graph.root, row, run_node, ("a", "b"))
        assert batch.node_ids[batch.final[i]] == node.id, i
        assert int(batch.kind[i]) == action.kind, i
        assert batch.values[i] == np.float32(answers["value"]), i
        assert batch.values[i] == pytest.approx(node_value(node.model, row[node.inputs]),
                                                rel=1e-6, abs=1e-6)
        kinds.add((node.id, action.kind))
    # stops and escalations at every node (gate: ab; walk: a and ab)
    assert ("ab", STOP) in kinds and len(kinds) == {"gate": 2, "walk": 4}[policy]


def test_classification_walk_has_no_values(bundle: tuple[Path, Manifest]) -> None:
    graph = compile_graph(bundle[1].policies["gate"], ["a", "b"], 3, lambda i, n: n.model.file)

    def run(node: WalkNode[str], rows: npt.NDArray[np.int64]) -> tuple[F32, F32 | None]:
        return np.ones((len(rows), 2), np.float32), np.zeros((len(rows), 2), np.float32)

    walk = walk_batch(graph, 4, 2, run)
    assert not walk.regression
    with pytest.raises(ValueError, match="not values"):
        _ = walk.values
    with pytest.raises(ValueError, match="one value column"):
        walk_batch(graph, 4, 2, run, regression=True)
