"""Action heads in the manifest (``protocol.action_head``): read, written, refused.

A head is read and written back unchanged; manifests without heads keep their schema and bytes
(the stored ones are re-written byte for byte by ``test_manifest_regression``); a head in an old
schema, a malformed head and a reader that predates heads are refused in one line naming the
field; ``apply_head`` computes in float32 in its documented order, and the walk applies it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.protocol import BundleError, Manifest
from adaptedge.protocol.action_head import ActionHead, apply_head, row_scorer
from adaptedge.protocol.manifest import BUNDLE_SCHEMA_VERSION, HEAD_SCHEMA_VERSION
from adaptedge.protocol.walk import compile_graph, walk_manifest

DATA = Path(__file__).parent / "data"
HEAD = {"weights": [[-1.0, 1.0], [0.5, -0.5]], "bias": [0.25, -0.25]}


@pytest.fixture
def body() -> dict[str, Any]:
    """The stored classification manifest with a head on the gate policy's node, schema 3."""
    raw: dict[str, Any] = json.loads((DATA / "classification_manifest.json").read_text())
    raw["schema_version"] = HEAD_SCHEMA_VERSION
    raw["policies"]["gate"]["nodes"]["ab"]["model"]["action_head"] = copy.deepcopy(HEAD)
    return raw


def _refused(raw: dict[str, Any], match: str, path: str) -> None:
    with pytest.raises(BundleError, match=match) as info:
        Manifest.from_dict(raw)
    assert info.value.path == path
    assert "\n" not in str(info.value)


def test_head_reads_and_writes_back(body: dict[str, Any]) -> None:
    manifest = Manifest.from_dict(body)
    head = manifest.policies["gate"].nodes["ab"].model.action_head
    assert head == ActionHead(weights=((-1.0, 1.0), (0.5, -0.5)), bias=(0.25, -0.25))
    assert manifest.policies["walk"].nodes["ab"].model.action_head is None
    out = manifest.to_dict()
    assert out == body  # the head as read; nodes without one have no field
    assert "action_head" not in json.dumps(out["policies"]["walk"])


def test_head_needs_schema_3(body: dict[str, Any]) -> None:
    body["schema_version"] = BUNDLE_SCHEMA_VERSION
    _refused(body, "needs schema version 3", "policies.gate.nodes.ab.model")


def test_reader_before_heads_refuses_in_one_line(body: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import adaptedge.protocol.manifest as manifest_module

    monkeypatch.setattr(manifest_module, "READABLE_SCHEMA_VERSIONS", (1, 2))
    _refused(body, "bundle schema version 3 is not supported", "schema_version")


@pytest.mark.parametrize(("change", "match", "field"), [
    ({"weights": [[1.0, 2.0, 3.0]], "bias": [0.0, 0.0]}, "has 3 values; the node has 2",
     "weights[0]"),
    ({"weights": [[1.0, 2.0]], "bias": [0.0]}, "has 1 values; the node has 2", "bias"),
    ({"weights": [[1.0, "x"]], "bias": [0.0, 0.0]}, "finite number", "weights[0][1]"),
    ({"weights": [[1.0, 0.1]], "bias": [0.0, 0.0]}, "not a float32 value", "weights[0][1]"),
    ({"weights": [], "bias": [0.0, 0.0]}, "list of 1 to 16 rows", "weights"),
    ({"weights": [[1.0, 1.0]], "bias": [0.0, 0.0], "scale": 2}, "unknown fields", ""),
])
def test_malformed_head_refused(body: dict[str, Any], change: dict[str, Any], match: str,
                                field: str) -> None:
    body["policies"]["gate"]["nodes"]["ab"]["model"]["action_head"] = change
    at = "policies.gate.nodes.ab.model.action_head"
    _refused(body, match, f"{at}.{field}" if field else at)


def test_head_on_a_one_action_node_refused(body: dict[str, Any]) -> None:
    body["policies"]["walk"]["nodes"]["root"]["model"]["action_head"] = copy.deepcopy(HEAD)
    _refused(body, "one action", "policies.walk.nodes.root.model.action_head")


def test_apply_head_is_float32_in_order() -> None:
    head = ActionHead(weights=((-1.0, 1.0), (3.0, -3.0)), bias=(1e-3, -1e-3))
    basis = np.array([[1e8, 1.0], [0.5, 0.25]], dtype=np.float32)
    f = np.float32
    expected = np.array([[(f(1e8) * f(-1) + f(1) * f(3)) + f(1e-3),
                          (f(1e8) * f(1) + f(1) * f(-3)) + f(-1e-3)],
                         [(f(0.5) * f(-1) + f(0.25) * f(3)) + f(1e-3),
                          (f(0.5) * f(1) + f(0.25) * f(-3)) + f(-1e-3)]], dtype=np.float32)
    out = apply_head(head, basis)
    assert out.dtype == np.float32 and np.array_equal(out, expected)
    assert np.array_equal(apply_head(head, basis[1]), expected[1])  # one row
    for row, want in zip(basis, expected, strict=True):
        got = row_scorer(head)(row)
        assert got.dtype == np.float32 and np.array_equal(got, want)


def test_batch_walk_applies_the_head(body: dict[str, Any]) -> None:
    """The model's basis goes through the head: basis [g, m] with g - 0.5 m - 0.25 > 0
    escalates (the stored manifest's file names no real model; ``run`` stands in for it)."""
    manifest = Manifest.from_dict(body)
    x = np.zeros((4, len(manifest.feature_names)), dtype=np.float32)
    basis = np.array([[1.0, 0.0], [0.25, 0.0], [1.0, 1.5], [0.5, 0.5]], dtype=np.float32)
    asked: list[str | None] = []

    def run(file: str, rows: np.ndarray, scores: str | None) -> tuple[np.ndarray, Any]:
        asked.append(scores)
        return np.full((len(rows), 2), 0.5, np.float32), basis[: len(rows)]

    walk = walk_manifest(manifest, "gate", x, run)
    assert asked == ["action_basis"]
    assert walk.escalated.tolist() == [True, False, False, False]  # 0.75, then 0: ties stop
    graph = compile_graph(manifest.policies["gate"], [s.name for s in manifest.sensors],
                          len(manifest.feature_names), lambda _, node: node.model.file)
    assert graph.root.head == manifest.policies["gate"].nodes["ab"].model.action_head
