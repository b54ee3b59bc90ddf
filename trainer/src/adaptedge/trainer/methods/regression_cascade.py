"""The regression confidence cascade (``--method confidence --task regression``, issue 33): a
cheap regressor on the k sensors the HPC ranks first, and a gate on the same sensors that
predicts how far the cheap answer lies from the HPC's; rows the gate scores above a threshold
escalate to the HPC, the others stop with the cheap value.

As the classification cascade (``methods.confidence_cascade``) learns where the cheap model
disagrees with the HPC, the gate is fitted on TRAINING rows only, to ``log1p |cheap_oof -
hpc_oof|``: out-of-fold predictions of both (5 folds), so neither has seen the row it scores.
k and the threshold are swept; the thresholds are quantiles of the gate's validation scores
(escalating at most 0% to 50% of validation rows: tied scores stay local) and every (k, threshold) is one candidate, measured
and chosen on VALIDATION by the paired error rule like every regression point.

One ONNX node: a ``TreeEnsembleRegressor`` with two targets (cheap trees -> 0, gate trees ->
1), ``value`` = target 0, ``action_scores`` = ``[t - g, g - t]`` (stop when the gate score ``g``
<= ``t``: the first of tied actions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, VALUE_OUTPUT
from adaptedge.trainer.data.dataset_core import Dataset
from adaptedge.trainer.export.graph import GraphBuilder
from adaptedge.trainer.export.linear import linear
from adaptedge.trainer.export.trees import TreeArrays, tree_ensemble
from adaptedge.trainer.policy.graph import Graph, GraphAction, GraphNode
from adaptedge.trainer.regression_hpc import RegressionHpc

SIZES = {"full": (1, 2, 3, 4, 6, 8), "quick": (1, 2)}
"""Sensor counts k swept (the HPC's top-k sensors by impurity importance, training split)."""
ESCALATE = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
"""Shares of validation rows to escalate: each gives one threshold (a quantile of the gate)."""
TREES = {"full": (60, 40), "quick": (10, 10)}
"""(cheap, gate) extra-trees sizes; leaves of >= 5 (cheap) and >= 20 (gate) rows keep the
device's ONNX small."""
FloatArray = NDArray[np.float64]


def _trees(estimator: Any) -> list[TreeArrays]:
    members = estimator.estimators_
    return [TreeArrays(feature=np.asarray(m.tree_.feature, np.int64),
                       threshold=np.asarray(m.tree_.threshold, np.float64),
                       left=np.asarray(m.tree_.children_left, np.int64),
                       right=np.asarray(m.tree_.children_right, np.int64),
                       value=np.asarray(m.tree_.value[:, 0, :], np.float64) / len(members))
            for m in members]


@dataclass(frozen=True)
class CascadeNode:
    """The cascade's one node on its input columns: cheap value, gate score, threshold."""

    cheap: Any
    gate: Any
    threshold: float | None
    """None: never escalate (one action)."""

    def value(self, X: NDArray[np.floating]) -> FloatArray:
        return np.asarray(self.cheap.predict(np.asarray(X, np.float32)), np.float64)

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return np.zeros((len(X), 0))

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if self.threshold is None:
            return None
        g = np.asarray(self.gate.predict(np.asarray(X, np.float32)), np.float64)
        return np.column_stack([self.threshold - g, g - self.threshold])

    def to_onnx(self) -> bytes:
        b = GraphBuilder(int(self.cheap.n_features_in_))
        parts = [(t, 0) for t in _trees(self.cheap)]
        if self.threshold is not None:
            parts += [(t, 1) for t in _trees(self.gate)]
        n = 2 if self.threshold is not None else 1
        tree_ensemble(b, parts, n, output="raw")
        linear(b, np.eye(n, 1), [0.0], source="raw", output=VALUE_OUTPUT, name="v_")
        b.output(VALUE_OUTPUT, 1)
        if self.threshold is not None:
            t = self.threshold
            linear(b, [[0.0, 0.0], [-1.0, 1.0]], [t, -t], source="raw", output=ACTION_OUTPUT,
                   name="a_")
            b.output(ACTION_OUTPUT, 2)
        return b.to_bytes()


def ranked_sensors(dataset: Dataset, hpc: RegressionHpc) -> list[int]:
    """Sensors by the HPC's summed impurity importance of their features (training split)."""
    owner = np.zeros(dataset.n_features, dtype=np.int64)
    for s, spec in enumerate(dataset.sensors):
        owner[list(spec.features)] = s
    importance = np.bincount(owner, weights=hpc.estimator.feature_importances_,
                             minlength=len(dataset.sensors))
    return [int(s) for s in np.argsort(-importance, kind="stable")]


def cascade_graphs(dataset: Dataset, hpc: RegressionHpc, *, seed: int, quick: bool
                   ) -> list[Graph]:
    """Every (k, threshold) cascade; ``hpc`` must carry ``oof_train`` (``oof=True``)."""
    from sklearn.base import clone
    from sklearn.ensemble import ExtraTreesRegressor
    from sklearn.model_selection import KFold, cross_val_predict

    if hpc.oof_train is None:
        raise ValueError("the cascade's gate needs the HPC's out-of-fold training values "
                         "(fit_regression_hpc(oof=True))")
    size = "quick" if quick else "full"
    n_cheap, n_gate = TREES[size]
    ranked, names = ranked_sensors(dataset, hpc), [s.name for s in dataset.sensors]
    y = dataset.targets("train")
    graphs = []
    for k in SIZES[size]:
        if k >= len(ranked):
            break
        cols = tuple(sorted(c for s in ranked[:k] for c in dataset.sensors[s].features))
        Xk = dataset.X_train[:, list(cols)]
        cheap = ExtraTreesRegressor(n_cheap, min_samples_leaf=5, random_state=seed, n_jobs=1)
        folds = KFold(5, shuffle=True, random_state=seed)
        oof = cross_val_predict(clone(cheap), Xk, y, cv=folds)
        cheap.fit(Xk, y)
        gate = ExtraTreesRegressor(n_gate, min_samples_leaf=20, random_state=seed, n_jobs=1)
        gate.fit(Xk, np.log1p(np.abs(oof - hpc.oof_train)))
        g_val = gate.predict(dataset.X_val[:, list(cols)].astype(np.float32))
        sensors = tuple(names[s] for s in sorted(ranked[:k]))
        for share in ESCALATE:
            threshold = None if share == 0 else float(np.quantile(g_val, 1 - share))
            actions = (GraphAction("stop"),) + (() if threshold is None
                                                else (GraphAction("escalate"),))
            node = GraphNode(sensors=sensors, inputs=cols, actions=actions,
                             model=CascadeNode(cheap, gate, threshold))
            graphs.append(Graph(f"confidence-k{k}-esc{share:g}", "n0", {"n0": node},
                                params={"k": float(k), "escalate_share": share},
                                method="confidence"))
    return graphs
