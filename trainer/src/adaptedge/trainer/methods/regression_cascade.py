"""The regression confidence cascade (``--method confidence --task regression``, issue 33): a
cheap forest on the k sensors the HPC ranks first, and a learnt deferral: a gate that predicts
how far the cheap answer lies from the HPC's; rows the gate scores above a threshold escalate to
the HPC, the others stop with the cheap value.

The gate reads the cheap sensors' features, the cheap forest's value and its SPREAD (the
standard deviation of its trees' values: where the trees disagree the forest has seen few
similar rows) and is fitted on TRAINING rows only, to ``|cheap_oof - hpc_oof|``: out-of-fold
values of the cheap forest (and its spread) and of the HPC (5 folds), so no model scores a row
it has seen. The cheap forest grows full trees (leaves of one row: its MAE on gas-concentration
is ~35% lower than with leaves of >= 5 rows). k and the threshold are swept; the thresholds are
quantiles of the gate's validation scores (escalating at most 0% to 50% of validation rows:
tied scores stay local), each set midway between two distinct scores and every (k, threshold) is one candidate, measured and chosen on
VALIDATION by the paired error rule (``protocol.error_rule``) like every regression point.

One ONNX node: the cheap forest as a ``TreeEnsembleRegressor`` with one target per tree, its
mean (``value``) and spread, ``Concat(x, value, spread)``, the gate's ensemble on that, and
``action_scores`` = ``[t - g, g - t]`` (stop when the gate score ``g`` <= ``t``: the first of
tied actions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, MODEL_INPUT, VALUE_OUTPUT
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
TREES = {"full": (30, 40), "quick": (10, 10)}
"""(cheap, gate) extra-trees sizes. The cheap trees are grown full; the gate's leaves hold
>= 20 rows. 30 full cheap trees are ~44k nodes on gas-concentration (k = 2)."""
GATE_LEAF = 20
N_FOLDS = 5
FloatArray = NDArray[np.float64]


def _trees(estimator: Any, per_tree: bool) -> list[tuple[TreeArrays, int]]:
    """The forest's trees for ``tree_ensemble``: each to its own target (``per_tree``, leaf
    values as they are) or all to target 0 (leaf values / number of trees: the mean)."""
    members = estimator.estimators_
    scale = 1.0 if per_tree else float(len(members))
    return [(TreeArrays(feature=np.asarray(m.tree_.feature, np.int64),
                        threshold=np.asarray(m.tree_.threshold, np.float64),
                        left=np.asarray(m.tree_.children_left, np.int64),
                        right=np.asarray(m.tree_.children_right, np.int64),
                        value=np.asarray(m.tree_.value[:, 0, :], np.float64) / scale),
             i if per_tree else 0) for i, m in enumerate(members)]


def value_and_spread(cheap: Any, X: NDArray[np.floating]) -> tuple[FloatArray, FloatArray]:
    """The forest's mean value and the standard deviation of its trees' values, per row."""
    rows = np.asarray(X, np.float32)
    each = np.stack([np.asarray(m.predict(rows), np.float64) for m in cheap.estimators_])
    mean = each.mean(axis=0)
    return mean, np.sqrt(((each - mean) ** 2).mean(axis=0))


def gate_inputs(X: NDArray[np.floating], value: FloatArray, spread: FloatArray) -> FloatArray:
    """What the gate reads: the cheap sensors' features, the cheap value and its spread."""
    return np.column_stack([np.asarray(X, np.float64), value, spread])


@dataclass(frozen=True)
class CascadeNode:
    """The cascade's one node on its input columns: cheap forest, gate, threshold."""

    cheap: Any
    gate: Any
    threshold: float | None
    """None: never escalate (one action)."""

    def value(self, X: NDArray[np.floating]) -> FloatArray:
        return value_and_spread(self.cheap, X)[0]

    def proba(self, X: NDArray[np.floating]) -> FloatArray:
        return np.zeros((len(X), 0))

    def gate_score(self, X: NDArray[np.floating]) -> FloatArray:
        """The gate's predicted distance of the cheap value from the HPC's, per row."""
        value, spread = value_and_spread(self.cheap, X)
        G = gate_inputs(X, value, spread).astype(np.float32)
        return np.asarray(self.gate.predict(G), np.float64)

    def action_scores(self, X: NDArray[np.floating]) -> FloatArray | None:
        if self.threshold is None:
            return None
        g = self.gate_score(X)
        return np.column_stack([self.threshold - g, g - self.threshold])

    def to_onnx(self) -> bytes:
        n_in, n_trees = int(self.cheap.n_features_in_), len(self.cheap.estimators_)
        b = GraphBuilder(n_in)
        if self.threshold is None:
            tree_ensemble(b, _trees(self.cheap, per_tree=False), 1, output=VALUE_OUTPUT)
            b.output(VALUE_OUTPUT, 1)
            return b.to_bytes()
        tree_ensemble(b, _trees(self.cheap, per_tree=True), n_trees, output="each")
        mean = np.full((n_trees, 1), 1.0 / n_trees)
        linear(b, mean, [0.0], source="each", output=VALUE_OUTPUT, name="v_")
        b.add("Sub", ["each", VALUE_OUTPUT], ["dev"])
        b.add("Mul", ["dev", "dev"], ["dev2"])
        linear(b, mean, [0.0], source="dev2", output="var", name="s_")
        b.add("Sqrt", ["var"], ["spread"])
        b.add("Concat", [MODEL_INPUT, VALUE_OUTPUT, "spread"], ["gx"], axis=1)
        gate = GraphBuilder(n_in + 2)
        tree_ensemble(gate, _trees(self.gate, per_tree=False), 1, output="g")
        for node in gate.nodes:  # the gate's ensemble reads gx, not the model input
            node.input[0] = "gx"
            b.nodes.append(node)
        t = self.threshold
        linear(b, [[-1.0, 1.0]], [t, -t], source="g", output=ACTION_OUTPUT, name="a_")
        b.output(VALUE_OUTPUT, 1)
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


def fit_cascade(X: NDArray[np.floating], y: FloatArray, hpc_oof: FloatArray, *, seed: int,
                trees: tuple[int, int]) -> tuple[Any, Any]:
    """The cheap forest (all training rows) and its gate, fitted to ``|cheap - hpc|`` on
    out-of-fold values of both (the cheap forest's value and spread from ``N_FOLDS`` folds)."""
    from sklearn.base import clone
    from sklearn.ensemble import ExtraTreesRegressor
    from sklearn.model_selection import KFold

    cheap = ExtraTreesRegressor(trees[0], min_samples_leaf=1, random_state=seed, n_jobs=1)
    oof_value, oof_spread = np.zeros(len(y)), np.zeros(len(y))
    for fit_rows, held in KFold(N_FOLDS, shuffle=True, random_state=seed).split(X):
        fold = clone(cheap).fit(X[fit_rows], y[fit_rows])
        oof_value[held], oof_spread[held] = value_and_spread(fold, X[held])
    cheap.fit(X, y)
    gate = ExtraTreesRegressor(trees[1], min_samples_leaf=GATE_LEAF, random_state=seed,
                               n_jobs=1)
    gate.fit(gate_inputs(X, oof_value, oof_spread).astype(np.float32),
             np.abs(oof_value - hpc_oof))
    return cheap, gate


def thresholds(scores: FloatArray, shares: tuple[float, ...]) -> list[float | None]:
    """One gate threshold per share (``None`` for 0: never escalate): the rows scored above it
    are those above the score ranked ``floor(share * n)`` from the top (that many rows, fewer
    where scores tie: at most the share escalates), and it lies midway between two distinct
    scores, so float32 rounding on the device moves no row across it."""
    ranked, distinct = np.sort(scores), np.unique(scores)
    out: list[float | None] = []
    for share in shares:
        if share == 0:
            out.append(None)
            continue
        top = min(int(np.floor(share * len(ranked) + 1e-9)), len(ranked) - 1)
        q = float(ranked[len(ranked) - 1 - top])
        i = int(np.searchsorted(distinct, q, side="right"))  # distinct[i - 1] <= q
        out.append(q if i >= len(distinct) else float((distinct[i - 1] + distinct[i]) / 2))
    return out


def cascade_graphs(dataset: Dataset, hpc: RegressionHpc, *, seed: int, quick: bool
                   ) -> list[Graph]:
    """Every (k, threshold) cascade; ``hpc`` must carry ``oof_train`` (``oof=True``)."""
    if hpc.oof_train is None:
        raise ValueError("the cascade's gate needs the HPC's out-of-fold training values "
                         "(fit_regression_hpc(oof=True))")
    size = "quick" if quick else "full"
    ranked, names = ranked_sensors(dataset, hpc), [s.name for s in dataset.sensors]
    y = dataset.targets("train")
    graphs = []
    for k in SIZES[size]:
        if k >= len(ranked):
            break
        cols = tuple(sorted(c for s in ranked[:k] for c in dataset.sensors[s].features))
        cheap, gate = fit_cascade(dataset.X_train[:, list(cols)], y, hpc.oof_train,
                                  seed=seed, trees=TREES[size])
        g_val = CascadeNode(cheap, gate, None).gate_score(dataset.X_val[:, list(cols)])
        sensors = tuple(names[s] for s in sorted(ranked[:k]))
        for share, threshold in zip(ESCALATE, thresholds(g_val, ESCALATE), strict=True):
            actions = (GraphAction("stop"),) + (() if threshold is None
                                                else (GraphAction("escalate"),))
            node = GraphNode(sensors=sensors, inputs=cols, actions=actions,
                             model=CascadeNode(cheap, gate, threshold))
            graphs.append(Graph(f"confidence-k{k}-esc{share:g}", "n0", {"n0": node},
                                params={"k": float(k), "escalate_share": share},
                                method="confidence"))
    return graphs
