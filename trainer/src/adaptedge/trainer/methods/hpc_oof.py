"""The HPC probabilities an ADAPT estimator needs, when ``fit(X, y)`` is called without them.

scikit-learn's ``fit(X, y)`` convention (``Pipeline``, ``cross_val_score``, ``GridSearchCV``)
has no room for a third array. An estimator's ``hpc`` parameter names the HPC instead
(``"auto"``: a histogram gradient-boosting classifier, or any classifier with
``predict_proba``), and ``fit`` computes its out-of-fold class probabilities on the rows it is
given, as the trainer does (``trainer.hpc``): each row's probability comes from a model that
did not see it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.utils._param_validation import HasMethods, StrOptions

HPC_CONSTRAINT: list[Any] = [StrOptions({"auto"}), HasMethods(["fit", "predict_proba"])]
"""``_parameter_constraints["hpc"]`` of the estimators that take one."""


def oof_hpc_proba(hpc: Any, X: Any, y: Any, random_state: int | None) -> NDArray[np.float64]:
    """Out-of-fold ``predict_proba`` of ``hpc`` on (X, y), one column per class of ``y``
    (``trainer.hpc.oof_proba``, the trainer's own out-of-fold fit)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from adaptedge.trainer.hpc import oof_proba

    model = HistGradientBoostingClassifier(random_state=random_state) if hpc == "auto" else hpc
    labels = np.asarray(y, dtype=np.int64)
    return oof_proba(model, np.asarray(X), labels, int(labels.max()) + 1, random_state)


def hpc_proba_for(estimator: Any, X: Any, y: Any, given: Any) -> Any:
    """``given`` (the caller's HPC probabilities) when there are some, else the out-of-fold
    probabilities of ``estimator.hpc``."""
    if given is not None:
        return given
    return oof_hpc_proba(estimator.hpc, X, y, estimator.random_state)
