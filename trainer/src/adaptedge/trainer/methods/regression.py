"""Which training methods learn a regression (issue 33), and the one-line refusal for the rest.

``cstc`` (``methods.cstc.regressor.CSTCRegressor``: the paper's squared loss) and
``greedy-miser`` (``methods.greedy_miser_regression``: the paper's regression objective) and
``confidence`` (``methods.regression_cascade``: a cheap regressor that escalates the rows its
gate predicts far from the HPC) do;
docs/papers.md says why the others do not yet.
"""

from __future__ import annotations

from adaptedge.trainer.errors import TrainError

REGRESSION_METHODS = ("cstc", "greedy-miser", "confidence")


def check_regression_method(method: str) -> None:
    """Refuse, in one line, a method that cannot learn a regression."""
    if method not in REGRESSION_METHODS:
        raise TrainError(f"method {method!r} does not support --task regression; methods that "
                         f"do: {', '.join(REGRESSION_METHODS)}")
