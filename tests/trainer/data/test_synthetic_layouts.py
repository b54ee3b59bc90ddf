"""The two-feature layouts of ``trainer.data.synthetic_layouts``: their optimum at 99% accuracy
checked numerically on samples, and ADAPT-LIN reaching it (issue 20 item 7)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.operating_points import cheapest_reaching
from adaptedge.trainer.data.synthetic_layouts import (
    ACCURACY,
    DECOY,
    LAYOUTS,
    MIN_GAP,
    Layout,
    layout_dataset,
    linear_system,
    min_escalation,
    optimum,
    sample,
)
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.gating import CostModel
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.walk import walk

ROWS = 200_000


def _binned_escalation(x: np.ndarray, y: np.ndarray, width: float) -> float:
    """The knapsack of ``min_escalation`` on the sample itself: bins of ``width`` along one
    feature, each answering its majority label (no band structure assumed)."""
    bins = np.floor(x / width).astype(np.int64)
    _, index = np.unique(bins, return_inverse=True)
    mass = np.bincount(index) / len(x)
    ones = np.bincount(index, weights=y) / len(x)
    rate = np.minimum(ones, mass - ones) / mass
    return min_escalation([(0.0, m, r) for m, r in zip(mass, rate, strict=True)])


@pytest.mark.parametrize("lay", [*LAYOUTS, DECOY], ids=lambda x: x.name)
def test_the_optimum_holds_on_samples(lay: Layout) -> None:
    best = optimum(lay)
    assert 0.3 - 1e-9 <= best["escalation"] <= 0.7 + 1e-9
    assert best["best"] == best[("x1", "x2")[lay.key]]
    assert abs(sum(c.share for c in lay.clusters) - 1.0) < 1e-9
    for axis in (0, 1):
        coords = [v for v, _, _ in lay.bands(axis)]
        assert min(np.diff(coords)) >= MIN_GAP - 1e-9
    X, y = sample(lay, ROWS, seed=7)
    # no one-sensor policy does better than the derivation says (bins finer than a band)
    for axis, name in ((0, "x1"), (1, "x2")):
        found = 1.0 + _binned_escalation(X[:, axis], y, width=0.05)
        assert found == pytest.approx(best[name], abs=0.01), name
    # and the linear gate + LPC on the key feature reach it
    escalate, label = linear_system(lay, X[:, lay.key])
    accuracy = np.mean(np.where(escalate, True, label == y))
    assert accuracy >= ACCURACY - 0.002
    assert 1.0 + escalate.mean() == pytest.approx(best["best"], abs=0.005)


def test_layouts_differ() -> None:
    escalations = sorted(round(optimum(x)["escalation"], 2) for x in LAYOUTS)
    assert escalations == [0.3, 0.4, 0.5, 0.6, 0.7]
    assert {x.key for x in LAYOUTS} == {0, 1}
    assert len({len(x.clusters) for x in LAYOUTS}) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bands-x2", "heavy-x2"])
def test_adapt_lin_reaches_the_optimum(name: str) -> None:
    """The extremes (0.3 and 0.7 escalated), ADAPT-LIN's quick sweep, seed 0: the cheapest
    point with validation accuracy >= 0.99 costs within 3% of the optimum on test."""
    d = layout_dataset(name, n=2000, seed=0)
    hpc = fit_hpc(d, kind="extra-trees", seed=0, cache=False)
    cm = CostModel.build(d.sensors, d.cost_weights, d.link, d.n_features, hpc.sensors)
    graphs = get_method("adapt-lin")(d, hpc, MethodOptions(quick=True, n_jobs=1, progress=False))
    val = [walk(g, d.X_val, hpc.proba_val, cm.table()).metrics(d.y_val) for g in graphs]
    i = cheapest_reaching(val, ACCURACY)
    assert i is not None
    test = walk(graphs[i], d.X_test, hpc.proba_test, cm.table()).metrics(d.y_test)
    assert test.accuracy >= ACCURACY - 0.01
    assert test.cost <= 1.03 * optimum(next(x for x in LAYOUTS if x.name == name))["best"]
