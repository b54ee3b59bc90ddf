"""``--method auto``: the plan under a time budget, one merged validation front, and a bundle
that records which method each operating point came from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.errors import ParamError
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.auto import DEFAULT, merge, plan, run_methods
from adaptedge.trainer.methods.registry import MethodOptions
from adaptedge.trainer.policy.graph import Metrics

DATA = synthetic_2(n=600)
TWO = "confidence,greedy-miser"


def test_the_plan_keeps_what_fits_the_budget_in_order_and_says_why_not() -> None:
    everything = plan(DATA, quick=True, budget=1e6)
    ran = [m for m, _ in everything.run]
    assert ran == [m for m in DEFAULT if m in ran]  # the documented order
    assert {"confidence", "adapt-gbrt", "dag"} <= set(ran)
    assert "adapt-lin" not in ran  # only when named
    tight = plan(DATA, quick=True, budget=0.5)
    assert len(tight.run) < len(everything.run)
    reasons = dict(tight.skipped)
    assert all("time budget" in reasons[m] for m in ran if m not in dict(tight.run))
    named = plan(DATA, quick=True, budget=1e6, methods=["adapt-lin", "l1"])
    assert [m for m, _ in named.run] == ["adapt-lin", "l1"]
    one_sensor = DATA.__class__(**{**DATA.__dict__, "sensors": DATA.sensors[:1]})
    assert "one sensor" in dict(plan(one_sensor, quick=True, budget=1e6).skipped)["dag"]


def test_merge_keeps_each_points_method_and_one_front() -> None:
    from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode
    from adaptedge.trainer.policy.onnx_node import OnnxNodeModel

    node = GraphNode(sensors=(), inputs=(), actions=(GraphAction("escalate"),),
                     model=OnnxNodeModel(b""))

    def g(name: str, method: str, acc: float, cost: float) -> Graph:
        return Graph(name, "n0", {"n0": node}, Metrics(acc, cost), method=method)

    front = merge({"a": [g("a-1", "a", 0.8, 1.0), g("p", "a", 0.9, 3.0)],
                   "b": [g("b-1", "b", 0.85, 1.0), g("p", "b", 0.95, 4.0)]})
    assert [(p.name, p.method) for p in front] == [("b-1", "b"), ("a-p", "a"), ("b-p", "b")]
    assert front.swept == 4


@pytest.mark.slow
def test_auto_runs_the_named_methods_on_one_hpc_with_progress_lines(
        capsys: pytest.CaptureFixture[str]) -> None:
    hpc = fit_hpc(DATA, kind="hgb", cache=False)
    done = run_methods(DATA, hpc, MethodOptions(quick=True, extra={"methods": TWO}))
    assert list(done.candidates) == ["confidence", "greedy-miser"]
    err = capsys.readouterr().err
    assert "auto: method 1/2 confidence" in err and "ETA" in err
    assert "auto: greedy-miser done:" in err
    with pytest.raises(ParamError, match="auto cannot sweep"):
        run_methods(DATA, hpc, MethodOptions(quick=True, extra={"methods": "static"}))


@pytest.mark.slow
def test_the_bundle_records_the_method_of_every_point(tmp_path: Path) -> None:
    from adaptedge.cli.inspect_cmd import point_table
    from adaptedge.protocol.bundle import verify
    from adaptedge.simulator.report import merged_methods
    from adaptedge.trainer.api import train_bundle

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4)).astype(np.float32)
    y = np.where(X[:, 0] + 0.3 * X[:, 1] + 0.3 * rng.normal(size=500) > 0, "yes", "no")
    manifest = train_bundle((X, y), "auto", tmp_path / "b", quick=True, progress=False,
                            extra={"methods": TWO})
    methods = {p.method for p in manifest.operating_points}
    assert methods <= {"confidence", "greedy-miser"} and None not in methods
    assert manifest.metadata["method"] == "auto"
    assert manifest.metadata["auto"]["ran"] == ["confidence", "greedy-miser"]
    again = verify(tmp_path / "b")  # written and read back
    assert [p.method for p in again.operating_points] == [
        p.method for p in manifest.operating_points]
    table = point_table(again)
    assert "method" in table[0] and all(p.method in table[1 + i] for i, p in
                                        enumerate(again.operating_points))
    assert merged_methods(again) == (len(methods) > 1)
