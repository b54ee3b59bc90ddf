"""What every linear gate + LPC estimator shares (ADAPT-LIN, the L1 baseline).

The fitted model is one linear map ``[x] @ coef_ + bias`` whose last column is the gate score
and whose other columns are the LPC's logits; both are computed in float32 weights and inputs,
as the exported ONNX does. A subclass supplies ``_bias()`` (its intercepts with the gate
threshold folded in) and ``with_threshold``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.utils.validation import check_is_fitted

from adaptedge.trainer.export.linear import linear_core
from adaptedge.trainer.export.models import node_model
from adaptedge.trainer.methods.gating import proba
from adaptedge.trainer.methods.labels import predicted_labels

FloatArray = NDArray[np.float64]

class LinearGateMixin:
    """``predict_proba``, ``predict``, ``gate_score``, ``escalate`` and ``to_onnx``."""

    coef_: FloatArray
    columns_: tuple[int, ...]
    n_classes_: int
    classes_: NDArray[Any]

    def _bias(self) -> FloatArray:
        raise NotImplementedError

    def _core(self, X: NDArray[np.floating]) -> FloatArray:
        check_is_fitted(self)
        X32 = np.asarray(X, dtype=np.float32)[:, list(self.columns_)].astype(np.float64)
        W = self.coef_.astype(np.float32).astype(np.float64)
        out: FloatArray = X32 @ W + self._bias().astype(np.float32).astype(np.float64)
        return out

    def predict_proba(self, X: NDArray[np.floating]) -> FloatArray:
        return proba(self._core(X)[:, :-1], self.n_classes_)

    def predict(self, X: NDArray[np.floating]) -> NDArray[Any]:
        return predicted_labels(self.classes_, self.predict_proba(X))

    def gate_score(self, X: NDArray[np.floating]) -> FloatArray:
        """The gate's score minus its threshold; positive means escalate to the HPC."""
        out: FloatArray = self._core(X)[:, -1]
        return out

    def escalate(self, X: NDArray[np.floating]) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.gate_score(X) > 0
        return out

    def to_onnx(self) -> bytes:
        check_is_fitted(self)
        nodes, inits = linear_core(self.coef_, self._bias())
        return node_model(nodes, inits, len(self.columns_), self.n_classes_, "gate")
