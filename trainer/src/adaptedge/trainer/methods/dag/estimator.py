"""The DAG policy (Wang, Trapeznikov & Saligrama, NIPS 2015) as a scikit-learn classifier.

``DagClassifier().fit(X, y)`` holds out ``validation_fraction`` of the rows (stratified, seeded)
for what the DAG method chooses on validation (node classifier kind, reduction, pruning), fits
the HPC's out-of-fold probabilities (``hpc``, as the ADAPT estimators do) and trains one graph by
Graph-Reduce at the sensor price ``lam`` (``trainer.methods.dag``). ``predict`` walks it: each
row reads only the sensors its path asks for and answers with the node where it stops; a row
the graph escalates answers with its local probabilities here (``escalate(X)`` says which; the
bundle's walk asks the HPC instead). NaN cells are unmeasured sensors: the boosted node
classifiers learn them and the walk treats them as failed reads, as a device does.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.methods.adapt_gbrt import _sensor_layout
from adaptedge.trainer.methods.hpc_oof import HPC_CONSTRAINT, hpc_proba_for
from adaptedge.trainer.methods.labels import class_indices, predicted_labels
from adaptedge.trainer.policy.graph import Graph, Metrics
from adaptedge.trainer.policy.walk import WalkResult, walk

if TYPE_CHECKING:
    from adaptedge.trainer.methods.dag.reduce import Reduction
    from adaptedge.trainer.methods.dag.sweep import ClassifierChoice, DagSettings

FloatArray = NDArray[np.float64]


class DagClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """A policy graph over sensor subsets that reads sensors one at a time, as needed.

    Cost accounting: ``decision_cost(X)`` (each row's training scalar: sensors read, plus the
    HPC's sensors and ``link_cost`` when escalated), ``sensors_used_`` (the sensors some node
    reads) and ``validation_`` (accuracy, mean cost, escalation rate and sensors read on the
    held-out rows; escalated rows count the HPC's out-of-fold answer there).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "lam": [Interval(Real, 0, None, closed="left")],
        "escalation_price": [Interval(Real, 0, None, closed="left"), None],
        "classifier": [StrOptions({"auto", "per-subset", "masked", "hgb", "hgb-wide", "lr"})],
        "reduction": [StrOptions({"ridge", "lr", "paper"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "quick": ["boolean"],
        "feature_sensor": ["array-like", None],
        "sensor_costs": ["array-like", None],
        "link_cost": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "hpc": HPC_CONSTRAINT,
    }

    def __init__(self, *, lam: float = 0.1, escalation_price: float | None = None,
                 classifier: str = "auto", reduction: str = "ridge",
                 validation_fraction: float = 0.25, quick: bool = False,
                 feature_sensor: Sequence[int] | None = None,
                 sensor_costs: Sequence[float] | None = None, link_cost: float = 0.0,
                 random_state: int | None = None, hpc: Any = "auto") -> None:
        self.lam = lam
        self.escalation_price = escalation_price
        self.classifier = classifier
        self.reduction = reduction
        self.validation_fraction = validation_fraction
        self.quick = quick
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        self.link_cost = link_cost
        self.random_state = random_state
        self.hpc = hpc

    def fit(self, X: NDArray[np.floating], y: NDArray[Any],
            hpc_proba: NDArray[np.floating] | None = None) -> DagClassifier:
        """Train the graph; ``hpc_proba``: the HPC's out-of-fold probabilities on these rows
        (else fitted from ``hpc``)."""
        from adaptedge.trainer.methods.dag.problem import make_problem
        from adaptedge.trainer.methods.dag.sweep import sweep_dag

        self._validate_params()
        X32 = _rows(X)
        classes, yi = class_indices(y, hpc_proba)
        if len(yi) != len(X32):
            raise ValueError(f"X has {len(X32)} rows but y has {len(yi)} labels")
        P = np.asarray(hpc_proba_for(self, X32, yi, hpc_proba), dtype=np.float64)
        fs, costs = _sensor_layout(self.feature_sensor, self.sensor_costs, X32.shape[1])
        sensors = tuple(SensorSpec(f"s{s}", tuple(int(j) for j in np.flatnonzero(fs == s)),
                                   energy_mj=float(costs[s])) for s in range(costs.size))
        if any(not s.features for s in sensors):
            raise ValueError("feature_sensor must give every sensor index below its largest "
                             "at least one feature")
        fit_rows, val_rows = self._split(yi)
        seed = _seed(self.random_state)
        problem = make_problem(
            sensors=sensors, weights=CostWeights(energy_mj=1.0), link=_link(self.link_cost),
            n_classes=P.shape[1],
            data={"train": (X32[fit_rows], yi[fit_rows], P[fit_rows]),
                  "val": (X32[val_rows], yi[val_rows], P[val_rows]),
                  "test": (X32[val_rows], yi[val_rows], P[val_rows])})
        sweep = sweep_dag(problem, self._settings(seed))
        self.graph_: Graph = sweep.points[0]
        self.problem_ = problem
        self.classes_ = classes
        self.n_classes_ = P.shape[1]
        self.n_features_in_ = X32.shape[1]
        self.validation_: Metrics = self.graph_.validation
        names = {n for node in self.graph_.nodes.values() for n in node.sensors}
        self.sensors_used_ = np.array([s.name in names for s in sensors])
        return self

    def _split(self, yi: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        from adaptedge.trainer.data.splits import stratified_split

        share = float(self.validation_fraction)
        fit_rows, val_rows = stratified_split(yi, (1 - share, share), _seed(self.random_state))
        if not len(fit_rows) or not len(val_rows):
            raise ValueError(f"validation_fraction={share:g} leaves no rows to fit or to "
                             f"validate on ({len(yi)} rows)")
        return fit_rows, val_rows

    def _settings(self, seed: int) -> DagSettings:
        from dataclasses import replace

        from adaptedge.trainer.methods.dag.sweep import DagSettings

        base = DagSettings.quick() if self.quick else DagSettings()
        price = None if self.escalation_price is None else float(self.escalation_price)
        return replace(base, lambdas=(float(self.lam),), escalation_prices=(price,),
                       reductions=(cast("Reduction", self.reduction),),
                       classifier=cast("ClassifierChoice", self.classifier), seed=seed)

    def _walk(self, X: NDArray[np.floating]) -> WalkResult:
        check_is_fitted(self)
        X32 = _rows(X)
        if X32.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X32.shape[1]} features; this DagClassifier was fitted "
                             f"on {self.n_features_in_}")
        unknown = np.full((len(X32), self.n_classes_), 1.0 / self.n_classes_)
        return walk(self.graph_, X32, unknown, self.problem_.cost_table())

    def predict_proba(self, X: NDArray[np.floating]) -> FloatArray:
        """The probabilities of the node each row's walk ends at (its local answer)."""
        local = self._walk(X).local
        assert local is not None
        return local

    def predict(self, X: NDArray[np.floating]) -> NDArray[Any]:
        return predicted_labels(self.classes_, self.predict_proba(X))

    def escalate(self, X: NDArray[np.floating]) -> NDArray[np.bool_]:
        """Which rows the graph sends to the HPC."""
        return self._walk(X).escalated

    def decision_cost(self, X: NDArray[np.floating]) -> FloatArray:
        """Each row's training scalar cost: the sensors its walk read (HPC's and link too when
        escalated)."""
        return self._walk(X).cost


def _rows(X: Any) -> NDArray[np.float32]:
    X32 = np.asarray(X, dtype=np.float32)
    if X32.ndim != 2 or not len(X32):
        raise ValueError(f"X must be a non-empty 2-D array, got shape {X32.shape}")
    if np.isinf(X32).any():
        raise ValueError("X contains infinite values; give finite numbers, or NaN for a "
                         "sensor not measured on a row")
    return X32


def _seed(random_state: Any) -> int:
    if random_state is None:
        return 0
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(np.random.RandomState(random_state).randint(2**31 - 1))


def _link(cost: float) -> LinkSpec:
    """A link whose scalar cost under ``CostWeights(energy_mj=1)`` is ``cost``."""
    return LinkSpec(request_bytes=1, reply_bytes=0, tx_energy_mj_per_byte=float(cost))
