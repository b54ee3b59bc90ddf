"""The regression HPC: a strong regressor on all sensors (extra-trees by default, or histogram
gradient boosting), its validation/test values and error, and its ONNX export (output
``value`` float32 [N, 1], the contract of issue 33).

Tree thresholds go through the trainer's tree emitter (``float32_thresholds``), so the ONNX
routes every row exactly as scikit-learn does; leaf sums differ from scikit-learn's float64
sums only by float32 rounding. ``oof`` adds out-of-fold training values (5 folds) for methods
that learn where a cheap model is as good as the HPC (ADAPT's gate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx

from adaptedge.protocol.onnx_contract import VALUE_OUTPUT
from adaptedge.trainer.data.dataset_core import Dataset
from adaptedge.trainer.errors import HpcError

REGRESSION_KINDS = ("extra-trees", "hgb")
N_FOLDS = 5
Values = npt.NDArray[np.float64]


@dataclass
class RegressionHpc:
    description: str
    sensors: tuple[str, ...]
    n_features: int
    values_val: Values
    values_test: Values
    val_mse: float
    val_mae: float
    oof_train: Values | None = None
    estimator: Any = field(default=None, repr=False)
    onnx_model: bytes | None = field(default=None, repr=False)

    def predict(self, X: npt.ArrayLike) -> Values:
        """Values [N] for full feature rows (the fitted scikit-learn model)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return np.asarray(self.estimator.predict(np.asarray(X, dtype=np.float32)),
                              dtype=np.float64)

    def onnx_bytes(self) -> bytes:
        """ONNX: input ``x`` float32 [N, n_features], output ``value`` float32 [N, 1]."""
        if self.onnx_model is None:
            self.onnx_model = regressor_to_onnx(self.estimator,
                                                self.n_features).SerializeToString()
        return self.onnx_model


def _candidate(kind: str, seed: int, n_jobs: int, trees: int) -> Any:
    from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor

    if kind == "extra-trees":
        return ExtraTreesRegressor(n_estimators=trees, n_jobs=n_jobs, random_state=seed)
    if kind == "hgb":
        return HistGradientBoostingRegressor(max_iter=trees, learning_rate=0.1,
                                             max_leaf_nodes=63, l2_regularization=1.0,
                                             early_stopping=False, random_state=seed)
    raise HpcError(f"unknown regression HPC kind {kind!r}; choose one of "
                   f"{list(REGRESSION_KINDS)}")


def fit_regression_hpc(dataset: Dataset, kind: str = "extra-trees", seed: int = 0, *,
                       n_jobs: int = 1, oof: bool = False, trees: int | None = None
                       ) -> RegressionHpc:
    """Fit the HPC on the training split of a regression dataset (never validation/test);
    ``trees``: extra-trees' trees (default 200) or boosting iterations (default 300)."""
    from sklearn.base import clone
    from sklearn.model_selection import KFold, cross_val_predict

    y = dataset.targets("train")
    template = _candidate(kind, seed, n_jobs, trees or (200 if kind == "extra-trees" else 300))
    estimator = clone(template).fit(dataset.X_train, y)
    oof_train = None
    if oof:
        folds = KFold(N_FOLDS, shuffle=True, random_state=seed)
        oof_train = np.asarray(cross_val_predict(clone(template), dataset.X_train, y,
                                                 cv=folds), dtype=np.float64)
    hpc = RegressionHpc(f"{kind} regressor on all sensors", tuple(s.name for s in dataset.sensors),
                        dataset.n_features, np.zeros(0), np.zeros(0), 0.0, 0.0, oof_train,
                        estimator)
    hpc.values_val, hpc.values_test = hpc.predict(dataset.X_val), hpc.predict(dataset.X_test)
    err = hpc.values_val - dataset.targets("validation")
    hpc.val_mse, hpc.val_mae = float(np.mean(err ** 2)), float(np.mean(np.abs(err)))
    return hpc


def regressor_to_onnx(estimator: Any, n_inputs: int) -> onnx.ModelProto:
    """A fitted extra-trees / random-forest / decision-tree / histogram gradient-boosting
    regressor as ONNX with output ``value`` [N, 1]."""
    from sklearn.ensemble import (
        ExtraTreesRegressor,
        HistGradientBoostingRegressor,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeRegressor

    from adaptedge.trainer.export.models import tree_ensemble_to_onnx
    from adaptedge.trainer.export.trees import TreeArrays

    trees: list[TreeArrays] = []
    base = np.zeros(1)
    if isinstance(estimator, ExtraTreesRegressor | RandomForestRegressor
                  | DecisionTreeRegressor) and getattr(estimator, "n_outputs_", 1) == 1:
        members = getattr(estimator, "estimators_", [estimator])
        for m in members:
            t = m.tree_
            trees.append(TreeArrays(
                feature=np.asarray(t.feature, np.int64),
                threshold=np.asarray(t.threshold, np.float64),
                left=np.asarray(t.children_left, np.int64),
                right=np.asarray(t.children_right, np.int64),
                value=np.asarray(t.value[:, 0, :], np.float64) / len(members)))
    elif isinstance(estimator, HistGradientBoostingRegressor):
        for (predictor,) in estimator._predictors:
            nd = predictor.nodes
            leaf = nd["is_leaf"].astype(bool)
            trees.append(TreeArrays(
                feature=np.where(leaf, -1, nd["feature_idx"]).astype(np.int64),
                threshold=nd["num_threshold"].astype(np.float64),
                left=nd["left"].astype(np.int64), right=nd["right"].astype(np.int64),
                value=np.where(leaf, nd["value"], 0.0)[:, None],
                missing_left=nd["missing_go_to_left"].astype(bool)))
        base = np.asarray(estimator._baseline_prediction, np.float64).ravel()
    else:
        raise HpcError(f"cannot export {type(estimator).__name__} as the regression HPC; use "
                       f"one of {list(REGRESSION_KINDS)}")
    return tree_ensemble_to_onnx(trees, n_inputs, 1, base_values=base, output=VALUE_OUTPUT)
