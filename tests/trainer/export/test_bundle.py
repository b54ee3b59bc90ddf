"""Bundle export: deterministic, verified by protocol.bundle.verify; frontier and budget picks.

``heart_policies`` builds small real policies (logistic models on heart's sensors exported with
``trainer.export``); other tests import it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from adaptedge.protocol.bundle import verify
from adaptedge.trainer.data.datasets import Dataset, load_dataset
from adaptedge.trainer.export.bundle import evaluate_exports, export_bundle, metrics_of
from adaptedge.trainer.export.fuse import fuse_node_model
from adaptedge.trainer.export.models import linear_to_onnx
from adaptedge.trainer.hpc import HpcModel, fit_hpc
from adaptedge.trainer.policy.frontier import (
    BudgetError,
    pareto_frontier,
    pick_certified,
    pick_within_budget,
)
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode, Metrics
from adaptedge.trainer.policy.onnx_node import OnnxNodeModel


def _columns(d: Dataset, sensors: list[str]) -> tuple[int, ...]:
    return tuple(sorted(c for s in d.sensors if s.name in sensors for c in s.features))


def logistic_node(d: Dataset, sensors: list[str], actions: tuple[GraphAction, ...],
                  threshold: float = 0.8) -> GraphNode:
    """A standardised logistic model on ``sensors``; with >1 action, a confidence rule picks
    stop when max probability >= threshold, else the last action."""
    cols = _columns(d, sensors)
    X = d.X_train[:, list(cols)].astype(np.float64)
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-9
    if cols:
        clf = LogisticRegression(max_iter=1000).fit((X - mean) / std, d.y_train)
        W = clf.coef_.T / std[:, None]
        b = clf.intercept_ - (mean / std) @ clf.coef_.T
        if W.shape[1] == 1:  # binary: logits for both classes
            W, b = np.hstack([-W / 2, W / 2]), np.array([-b[0] / 2, b[0] / 2])
    else:
        prior = np.bincount(d.y_train, minlength=d.n_classes) / len(d.y_train)
        W, b = np.zeros((0, d.n_classes)), np.log(prior)
    proba = linear_to_onnx(W, b, output="probabilities", transform="softmax")
    scores = None
    if len(actions) > 1:
        # score(stop) = |logit gap| - t ; score(other) = 0: stop when confident
        gap = (W[:, 1] - W[:, 0]) if W.shape[1] == 2 else W[:, 0]
        t = float(np.log(threshold / (1 - threshold)))
        A = np.zeros((len(cols), len(actions)))
        c = np.zeros(len(actions))
        A[:, 0], c[0] = gap, (b[1] - b[0] if W.shape[1] == 2 else b[0]) - t
        scores = linear_to_onnx(A, c, output="variable")
    return GraphNode(sensors=tuple(sensors), inputs=cols, actions=actions,
                     model=OnnxNodeModel(fuse_node_model(proba, scores)))


def heart_policies(d: Dataset) -> list[Graph]:
    """A one-node gate (all sensors; stop or escalate) and a walk age -> +thal (stop/escalate)."""
    everything = [s.name for s in d.sensors]
    stop, escalate = GraphAction("stop"), GraphAction("escalate")
    gate = {"all": logistic_node(d, everything, (stop, escalate))}
    walk = {
        "root": logistic_node(d, [], (GraphAction("acquire", next="age", sensor="age"),)),
        "age": logistic_node(d, ["age"],
                             (stop, GraphAction("acquire", next="age+thal", sensor="thal")),
                             threshold=0.75),
        "age+thal": logistic_node(d, ["age", "thal"], (stop, escalate)),
    }
    local = {"all": logistic_node(d, everything, (stop,))}
    policies = [Graph("gate", "all", gate, Metrics(0, 0), {"threshold": 0.8}, "test"),
                Graph("walk", "root", walk, Metrics(0, 0), {"lambda": 0.1}, "test"),
                Graph("local", "all", local, Metrics(0, 0), {}, "test")]
    results = evaluate_exports(d, fit_heart_hpc(d), policies)
    return [p.with_validation(metrics_of(r)) for p, r in zip(policies, results, strict=True)]


_HPC: dict[int, HpcModel] = {}


def fit_heart_hpc(d: Dataset) -> HpcModel:
    if id(d) not in _HPC:
        _HPC[id(d)] = fit_hpc(d, kind=make_pipeline(StandardScaler(),
                                                    LogisticRegression(max_iter=1000)),
                              cache=False)
    return _HPC[id(d)]


@pytest.fixture(scope="module")
def heart() -> Dataset:
    return load_dataset("heart")


@pytest.fixture(scope="module")
def policies(heart: Dataset) -> list[Graph]:
    return heart_policies(heart)


def test_export_verifies_and_is_deterministic(heart: Dataset, policies: list[Graph],
                                              tmp_path: Path) -> None:
    hpc = fit_heart_hpc(heart)
    a = export_bundle(tmp_path / "a", heart, hpc, policies, default="walk",
                      metadata={"method": "test"})
    b = export_bundle(tmp_path / "b", heart, hpc, policies, default="walk",
                      metadata={"method": "test"})
    assert verify(tmp_path / "a") == a
    assert a.bundle_id == b.bundle_id
    for name in a.files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "manifest.json").read_bytes() == \
        (tmp_path / "b" / "manifest.json").read_bytes()
    # the "all" node model of "local" differs from the gate's (no scores); shared files once
    assert len(a.files) == 1 + 3 + 2
    assert a.default_operating_point == "walk" and a.hpc.file == "hpc.onnx"
    point = a.operating_point("walk")
    walk = next(p for p in policies if p.name == "walk")
    assert point.accuracy == walk.validation.accuracy and point.cost == walk.validation.cost
    assert point.params == {"lambda": 0.1, "method": "test"}


def test_export_rejects_duplicates_and_unknown_default(heart: Dataset,
                                                       policies: list[Graph],
                                                       tmp_path: Path) -> None:
    hpc = fit_heart_hpc(heart)
    with pytest.raises(ValueError, match="repeated: \\['gate'\\]"):
        export_bundle(tmp_path / "x", heart, hpc, [policies[0], policies[0]])
    with pytest.raises(ValueError, match="default operating point 'nope'"):
        export_bundle(tmp_path / "x", heart, hpc, policies, default="nope")
    assert not (tmp_path / "x").exists()


def test_validation_metrics_come_from_the_exported_onnx(heart: Dataset,
                                                        policies: list[Graph]) -> None:
    gate, walk, local = policies
    assert local.validation.escalation_rate == 0.0
    assert local.validation.cost == pytest.approx(sum(s.money for s in heart.sensors))
    assert 0.0 < gate.validation.escalation_rate < 1.0
    assert 1.0 <= walk.validation.avg_sensors_read <= 13.0
    assert local.validation.accuracy > 0.7


def _p(name: str, acc: float, cost: float) -> Graph:
    node = GraphNode((), (), (GraphAction("stop"),), OnnxNodeModel(b""))
    return Graph(name, "r", {"r": node}, Metrics(acc, cost))


def test_pareto_frontier_and_picks() -> None:
    pts = [_p("a", 0.80, 1.0), _p("b", 0.85, 2.0), _p("c", 0.84, 3.0), _p("d", 0.90, 3.0),
           _p("e", 0.90, 4.0), _p("f", 0.79, 1.0)]
    assert [p.name for p in pareto_frontier(pts)] == ["a", "b", "d"]
    assert pick_within_budget(pts, 2.5).name == "b"
    assert pick_within_budget(pts, 100).name == "d"
    with pytest.raises(BudgetError, match="the cheapest costs 1"):
        pick_within_budget(pts, 0.5)
    # the paired rule in fixed sequence (most expensive first, stop at the first bound below
    # -0.01): the cheapest certified, else the most accurate
    bounds = [-0.2, -0.009, -0.005, -0.001, 0.0, -0.3]
    assert pick_certified(pts, bounds).name == "b"
    bounds = [-0.2, -0.009, -0.05, -0.001, 0.0, -0.3]  # c (cost 3, before d) stops it
    assert pick_certified(pts, bounds).name == "e"
    assert pick_certified(pts, [-0.2] * 6).name == "d"  # nothing certified: most accurate
    with pytest.raises(BudgetError):
        pick_certified([], [])


def test_compress_pending_gives_compress_model_bytes_in_order() -> None:
    """The threaded xz pass (issue #35) stores what one-by-one compression stores, in the
    slots ``manifest_graph`` reserved, without reordering ``files``."""
    from adaptedge.protocol.model_file import compress_model
    from adaptedge.trainer.export.bundle import compress_pending

    rng = np.random.default_rng(0)
    blobs = {f"m_{i}.onnx.xz": rng.integers(0, 4, size=20_000 + i, dtype=np.uint8).tobytes()
             for i in range(5)}
    files: dict[str, bytes] = {"hpc.onnx": b"hpc"}
    files.update(dict.fromkeys(blobs, b""))
    compress_pending(files, blobs)
    assert list(files) == ["hpc.onnx", *blobs]
    assert files["hpc.onnx"] == b"hpc"
    assert all(files[name] == compress_model(data) for name, data in blobs.items())
