"""The default sweep includes ``--quick``'s: its validation front never loses to quick's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.trainer.methods.registry import MethodOptions
from adaptedge.trainer.methods.with_quick import default_and_quick, includes_quick, renamed
from adaptedge.trainer.policy.frontier import Front, pareto_frontier
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode, Metrics
from adaptedge.trainer.policy.onnx_node import OnnxNodeModel

NODE = GraphNode(sensors=(), inputs=(), actions=(GraphAction("escalate"),),
                 model=OnnxNodeModel(b""))


def graph(name: str, accuracy: float, cost: float) -> Graph:
    return Graph(name, "n0", {"n0": NODE}, Metrics(accuracy, cost))


def test_default_and_quick_keeps_both_sweeps_and_renames_repeated_names(
        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[bool] = []

    def sweep(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
        seen.append(options.quick)
        if options.quick:  # cheaper at the low end: the default sweep lacks it
            return [graph("p", 0.80, 1.0), graph("q", 0.95, 5.0)]
        return Front([graph("p", 0.90, 3.0), graph("q", 0.95, 5.0)], swept=40)

    both = default_and_quick(sweep, None, None, MethodOptions(extra={"k": 1}))
    assert seen == [False, True]
    assert "the --quick sweep too" in capsys.readouterr().err
    assert [(g.name, g.validation.accuracy) for g in both] == [
        ("p", 0.90), ("q", 0.95), ("p-quick", 0.80), ("q-quick", 0.95)]
    assert both.swept == 42
    front = pareto_frontier(both)  # of the two equal points, the default's is kept
    assert [g.name for g in front] == ["p-quick", "p", "q"]


def test_renamed_tags_every_repeat_once_and_leaves_new_names() -> None:
    out = renamed([graph("a", 0.5, 1), graph("a", 0.6, 2), graph("b", 0.7, 3)], {"a", "a-quick"})
    assert [g.name for g in out] == ["a-quick2", "a-quick3", "b"]


def test_only_default_sweeps_of_plain_methods_add_the_quick_sweep() -> None:
    assert includes_quick("adapt-gbrt", quick=False)
    assert not includes_quick("adapt-gbrt", quick=True)
    assert not includes_quick("polydom", quick=False)  # ships one lattice's every model
    assert not includes_quick("auto", quick=False)  # runs the other methods itself


def validation_points(manifest: Any) -> list[tuple[float, float]]:
    return [(float(p.accuracy), float(p.cost)) for p in manifest.operating_points]


@pytest.mark.slow
def test_a_trained_default_front_dominates_or_equals_the_quick_front(tmp_path: Path) -> None:
    from adaptedge.trainer.api import train_bundle

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=600) > 0, "yes", "no")
    runs = {quick: train_bundle((X, y), "cascade", tmp_path / f"b{quick}", quick=quick,
                                progress=False)
            for quick in (True, False)}
    default, quick = (validation_points(runs[q]) for q in (False, True))  # cascade alone: fails
    assert all(any(a >= qa and c <= qc for a, c in default) for qa, qc in quick)
    assert runs[False].metadata["n_candidates"] > runs[True].metadata["n_candidates"]
