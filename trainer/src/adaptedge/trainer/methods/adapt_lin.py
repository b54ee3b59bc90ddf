"""ADAPT-LIN (Nan & Saligrama, NIPS 2017, Algorithm 1): linear gate g and LPC f1.

Alternates the closed-form q-step (``trainer.methods.gating.q_step``) with a proximal-gradient
(FISTA) solve of

    mean_i [(1−q_i)(CE(W_f x_i + b_f, y_i) + softplus(g_i)) + q_i softplus(−g_i)]
        + γ Σ_s c_s ‖[W_f rows of s; w_g rows of s]‖₂,      g_i = w_g·x_i + b_g,

an L2,1 group penalty over sensors (features of one sensor, in f1 and g together, form one
group, weighted by the sensor's cost): a sensor is bought when its group is non-zero, and a
sensor bought by g is free for f1 and vice versa. Features are standardised inside; the
exported weights act on raw features.

The alternation has local optima. On Synthetic-2, started from zeros it keeps x1 (the
L1 baseline's sensor, cost 1.75 at full accuracy) or both sensors, while the x2-only system
(cost 1.5) has a lower objective (e.g. P_full = 0.5, γ = 0.01). So ``fit`` runs several starts and keeps the one with the lowest value of
the paper's objective (OPT) — ``mean[(1−q)A + qB − H(q)]`` at the optimal q, plus the
penalties, on training data only: zeros, ``n_init − 1`` random starts and, when there are at
most ``sensor_starts`` sensors, two warm starts per sensor s whose gate begins as a half-space
along s (escalating one end of its range, then the other) with only s's group free during
the continuation ramp, all groups free after it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval

from adaptedge.trainer.methods.adapt_gbrt import _check_inputs, _sensor_layout
from adaptedge.trainer.methods.gating import (
    CostModel,
    hpc_loss,
    log_proba,
    n_logits,
    parallel_map,
    proba_class1,
    q_step,
    sigmoid_pair,
    softplus,
)
from adaptedge.trainer.methods.hpc_oof import HPC_CONSTRAINT, hpc_proba_for
from adaptedge.trainer.methods.labels import class_indices
from adaptedge.trainer.methods.linear_gate import LinearGateMixin
from adaptedge.trainer.methods.registry import MethodOptions, register
from adaptedge.trainer.policy.frontier import pareto_frontier
from adaptedge.trainer.policy.graph import Graph
from adaptedge.trainer.policy.one_node import one_node_graph, validated

FloatArray = NDArray[np.float64]
GATE_INIT_SCALE = 3.0
"""Gate weight of a sensor warm start: a logit slope of 3 per standard deviation."""


class AdaptLinClassifier(LinearGateMixin, ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Linear gate + LPC with sensor-group sparsity; ``fit(X, y, hpc_proba=P)``.

    ``n_init``: starts on all sensors (zeros, then random); ``sensor_starts``: the most
    sensors for which the two per-sensor warm starts are added (2·S more solves; 0 turns
    them off). ``objective_`` is the chosen start's (OPT) value, ``starts_`` lists every
    start as (label, objective, sensors used).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "p_full": [Interval(Real, 0, 1, closed="both")],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "l2": [Interval(Real, 0, None, closed="left")],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "sensor_starts": [Interval(Integral, 0, None, closed="left")],
        "gate_threshold": [Interval(Real, None, None, closed="neither")],
        "feature_sensor": ["array-like", None],
        "sensor_costs": ["array-like", None],
        "random_state": ["random_state"],
        "hpc": HPC_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        p_full: float = 0.3,
        gamma: float = 0.01,
        l2: float = 1e-4,
        n_rounds: int = 10,
        n_steps: int = 300,
        n_init: int = 1,
        sensor_starts: int = 3,
        gate_threshold: float = 0.0,
        feature_sensor: Sequence[int] | None = None,
        sensor_costs: Sequence[float] | None = None,
        random_state: int | None = None,
        hpc: Any = "auto",
    ) -> None:
        self.p_full = p_full
        self.gamma = gamma
        self.l2 = l2
        self.n_rounds = n_rounds
        self.n_steps = n_steps
        self.n_init = n_init
        self.sensor_starts = sensor_starts
        self.gate_threshold = gate_threshold
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        self.random_state = random_state
        self.hpc = hpc

    def fit(self, X: NDArray[np.floating], y: NDArray[np.integer],
            hpc_proba: NDArray[np.floating] | None = None) -> AdaptLinClassifier:
        """``hpc_proba``: see ``trainer.methods.hpc_oof.hpc_proba_for``."""
        self._validate_params()
        classes, yi = class_indices(y, hpc_proba)
        X32, yi, P = _check_inputs(X, yi, hpc_proba_for(self, X, yi, hpc_proba))
        n, d = X32.shape
        n_classes = P.shape[1]
        feature_sensor, sensor_costs = _sensor_layout(self.feature_sensor, self.sensor_costs, d)
        mean = X32.mean(axis=0, dtype=np.float64)
        std = X32.std(axis=0, dtype=np.float64)
        std[std == 0] = 1.0
        Z = np.hstack([(X32 - mean) / std, np.ones((n, 1))])  # last column: intercepts
        solver = _Solver(self, Z, yi, n_classes, hpc_loss(P, yi), feature_sensor, sensor_costs)
        # starts: zeros on all sensors, random restarts (``n_init``) and, with at most
        # ``sensor_starts`` sensors, two warm starts per sensor; the alternation has local
        # optima (Synthetic-2), so the training objective (OPT) picks the start
        best: dict[tuple[int, ...], tuple[float, FloatArray]] = {}
        self.starts_: list[tuple[str, float, tuple[int, ...]]] = []
        for label, theta0, only, locked in solver.starts(
                np.random.default_rng(self.random_state)):
            theta = solver.alternate(theta0, only, locked)
            value = solver.objective(theta)
            used = tuple(s for s in range(sensor_costs.size)
                         if np.any(np.abs(theta[:-1][feature_sensor == s]) > 1e-9))
            self.starts_.append((label, value, used))
            if used not in best or value < best[used][0]:
                best[used] = (value, theta)
        by_value = sorted(best.items(), key=lambda item: item[1][0])
        self.objective_, theta = by_value[0][1]
        self.q_train_ = solver.q_of(theta)
        self._set_weights(theta, feature_sensor, sensor_costs.size, mean, std)
        # per sensor set read, the lowest-objective solution (``alternatives``)
        self._solutions = [(value, th) for _, (value, th) in by_value]
        self._layout = (feature_sensor, sensor_costs.size, mean, std)
        self.n_classes_ = n_classes
        self.classes_ = classes
        self.n_features_in_ = d
        return self

    def alternatives(self) -> list[AdaptLinClassifier]:
        """One fitted model per sensor set some start ended on, each the lowest (OPT) value
        among the starts that read that set, lowest first (the first is this model)."""
        out = []
        for value, theta in self._solutions:
            other = copy.copy(self)
            other.objective_ = value
            other._set_weights(theta, *self._layout)
            out.append(other)
        return out

    def _set_weights(self, theta: FloatArray, feature_sensor: NDArray[np.intp], n_sensors: int,
                     mean: FloatArray, std: FloatArray) -> None:
        W = theta[:-1]
        bought = np.zeros(n_sensors, dtype=bool)
        for s in range(n_sensors):
            rows = np.flatnonzero(feature_sensor == s)
            bought[s] = rows.size > 0 and bool(np.any(np.abs(W[rows]) > 1e-9))
        columns = np.flatnonzero(bought[feature_sensor])
        self.coef_ = W[columns] / std[columns][:, None]
        self.intercept_ = theta[-1] - (mean[columns] / std[columns]) @ W[columns]
        self.columns_ = tuple(int(c) for c in columns)
        self.sensors_bought_ = bought

    def _bias(self) -> FloatArray:
        b: FloatArray = self.intercept_.copy()
        b[-1] -= self.gate_threshold
        return b

    def with_threshold(self, threshold: float) -> AdaptLinClassifier:
        other = copy.copy(self)
        other.gate_threshold = threshold
        return other


class _Solver:
    """Algorithm 1 on standardised features ``Z`` (last column: ones), for one estimator.

    ``theta`` [d+1, k+1]: columns 0..k-1 = f1, column k = g; last row = intercepts.
    """

    def __init__(self, est: AdaptLinClassifier, Z: FloatArray, y: NDArray[np.int64],
                 n_classes: int, loss_hpc: FloatArray, feature_sensor: NDArray[np.intp],
                 sensor_costs: FloatArray) -> None:
        self.est = est
        self.Z = Z
        self.y = y
        self.n, self.d = Z.shape[0], Z.shape[1] - 1
        self.n_classes = n_classes
        self.k = n_logits(n_classes)
        self.target = (y == 1).astype(np.float64)  # a binary LPC's class-1 indicator
        self.rows = np.arange(self.n)
        # the multi-class step's buffers, reused on every FISTA step (``_residual``)
        self._buffers = ((np.empty((self.n, self.k + 1)), np.empty((self.n, self.k)),
                          np.empty((self.n, self.k))) if self.k > 1 else None)
        self.loss_hpc = loss_hpc
        self.feature_sensor = feature_sensor
        self.sensor_costs = sensor_costs
        # each sensor's feature rows, once: ``prox`` runs on every FISTA step
        self.groups = [(s, rows) for s in range(sensor_costs.size)
                       if (rows := np.flatnonzero(feature_sensor == s)).size]
        lipschitz = 0.5 * float(np.linalg.norm(Z, 2) ** 2) / self.n + est.l2
        self.step = 1.0 / lipschitz
        self.group_weight = np.zeros_like(sensor_costs)
        self.ramp = max(1, est.n_rounds // 2)
        self.p_full = float(est.p_full)

    def forward(self, th: FloatArray) -> tuple[FloatArray, FloatArray]:
        out = self.Z @ th
        return out[:, :self.k], out[:, self.k]

    def gradient(self, th: FloatArray, q: FloatArray) -> FloatArray:
        keep = 1 - q
        residual = self._residual(th, keep)  # [r_f, gate logit]
        s_up, s_down = sigmoid_pair(residual[:, -1])
        residual[:, -1] = keep * s_up - q * s_down
        grad: FloatArray = self.Z.T @ residual / self.n
        grad[:-1] += self.est.l2 * th[:-1]
        return grad

    def _residual(self, th: FloatArray, keep: FloatArray) -> FloatArray:
        """[n, k+1]: f1's residual ``keep · (p − onehot)`` and, last, the gate's logit.

        Multi-class, it is computed in the solver's buffers, in place: the same operations on
        arrays of the same layout as ``keep[:, None] * (proba(logits) - onehot)``, so the
        same bits, without the step's temporaries (about 2.5 MB each on letter's 12,000 rows
        and 26 classes). ``p - 0`` is ``p``, so only each row's own class is subtracted."""
        if self._buffers is None:
            logits, gate = self.forward(th)
            residual = np.empty((self.n, 2))
            residual[:, 0] = keep * (proba_class1(logits) - self.target)
            residual[:, 1] = gate
            return residual
        out, shifted, exp = self._buffers
        np.matmul(self.Z, th, out=out)
        logits = out[:, :self.k]
        np.subtract(logits, logits.max(axis=1, keepdims=True), out=shifted)
        # log_proba, then proba: exp(shifted − log Σ exp(shifted)), as ``gating.proba``
        shifted -= np.log(np.exp(shifted, out=exp).sum(axis=1, keepdims=True))
        p = np.exp(shifted, out=shifted)
        p[self.rows, self.y] -= 1.0
        p *= keep[:, None]
        logits[...] = p
        return out

    def prox(self, th: FloatArray, t: float) -> FloatArray:
        out = th.copy()
        for s, rows in self.groups:
            flat = out[rows].ravel()
            norm = math.sqrt(float(flat.dot(flat)))  # ``np.linalg.norm``'s own sum, bit for bit
            shrink = max(0.0, 1.0 - t * self.group_weight[s] / norm) if norm > 0 else 0.0
            out[rows] *= shrink
        return out

    def excess(self, th: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Per example: A_i (LPC loss + gate KL side) and A_i − B_i (the q-step input)."""
        logits, gate = self.forward(th)
        lpc_side = -log_proba(logits, self.n_classes)[self.rows, self.y] + softplus(gate)
        return lpc_side, lpc_side - self.loss_hpc - softplus(-gate)

    def q_of(self, th: FloatArray) -> FloatArray:
        if self.p_full <= 0:
            return np.zeros(self.n)
        return q_step(self.excess(th)[1], self.p_full)[0]

    def objective(self, th: FloatArray) -> float:
        """(OPT) at ``th`` with the optimal q: mean[(1−q)A + qB − H(q)] + penalties."""
        lpc_side, diff = self.excess(th)
        q = self.q_of(th)
        qc = np.clip(q, 1e-300, 1.0)
        rc = np.clip(1 - q, 1e-300, 1.0)
        neg_entropy = q * np.log(qc) + (1 - q) * np.log(rc)
        value = float(np.mean(lpc_side - q * diff + neg_entropy))
        value += 0.5 * self.est.l2 * float(np.sum(th[:-1] ** 2))
        for s in range(self.sensor_costs.size):
            group = th[:-1][self.feature_sensor == s]
            value += float(self.est.gamma * self.sensor_costs[s] * np.linalg.norm(group))
        return value

    def alternate(self, theta: FloatArray, only: int | None, locked: bool = False
                  ) -> FloatArray:
        """Algorithm 1 from ``theta``; ``only``: a sensor whose group alone may be non-zero
        during the continuation ramp (a warm start), released afterwards unless ``locked``
        (Algorithm 1 on that sensor's features alone)."""
        est = self.est
        for round_ in range(est.n_rounds):
            # continuation: the group penalty ramps up from 0, so f1 and g first find what
            # they need on all sensors and then drop the sensors they can do without
            self.group_weight = est.gamma * self.sensor_costs * min(1.0, round_ / self.ramp)
            mask = None
            if only is not None and (locked or round_ < self.ramp):
                mask = (self.feature_sensor == only).astype(np.float64)
                theta = theta.copy()
                theta[:-1] *= mask[:, None]
            q = self.q_of(theta)
            momentum, previous, t_k = theta.copy(), theta.copy(), 1.0
            for _step in range(est.n_steps):
                current = self.prox(momentum - self.step * self.gradient(momentum, q), self.step)
                if mask is not None:
                    current[:-1] *= mask[:, None]
                t_next = (1 + math.sqrt(1 + 4 * t_k * t_k)) / 2
                momentum = current + ((t_k - 1) / t_next) * (current - previous)
                previous, t_k = current, t_next
            theta = previous
        return theta

    def starts(self, rng: np.random.Generator
               ) -> list[tuple[str, FloatArray, int | None, bool]]:
        """(label, theta0, only, locked) of every start: zeros, ``n_init - 1`` random, and
        four per sensor when there are at most ``sensor_starts`` of them (two gate
        directions, released after the ramp or locked to the sensor)."""
        d, k, est = self.d, self.k, self.est
        starts: list[tuple[str, FloatArray, int | None, bool]] = [
            ("zeros", np.zeros((d + 1, k + 1)), None, False)]
        for restart in range(1, est.n_init):
            theta0 = np.zeros((d + 1, k + 1))
            theta0[:-1] = rng.normal(0.0, 1.0, size=(d, k + 1))
            starts.append((f"random {restart}", theta0, None, False))
        present = np.unique(self.feature_sensor)
        if 1 < present.size <= est.sensor_starts and est.gamma > 0 and self.p_full > 0:
            for s in present:
                rows = np.flatnonzero(self.feature_sensor == s)
                # the gate starts as a half-space along the sensor's leading direction (its
                # one feature, or its first principal axis): the q-step then escalates one end
                # of that sensor's range and f1 fits the other end; both ends are tried
                direction = np.linalg.svd(self.Z[:, rows], full_matrices=False)[2][0]
                for sign in (1.0, -1.0):
                    theta0 = np.zeros((d + 1, k + 1))
                    theta0[rows, k] = sign * GATE_INIT_SCALE * direction
                    starts.append((f"sensor {s} gate {sign:+g}", theta0, int(s), False))
                    starts.append((f"sensor {s} only gate {sign:+g}", theta0, int(s), True))
        return starts


def _fit(job: tuple[dict[str, Any], Any, Any, Any]) -> AdaptLinClassifier:
    params, X, y, P = job
    return AdaptLinClassifier(**params).fit(X, y, P)


@register("adapt-lin")
def adapt_lin_method(dataset: Any, hpc: Any, options: MethodOptions) -> list[Graph]:
    """Sweep (P_full, γ) and the gate threshold (the trained one and quantiles of the gate
    scores); return the validation-Pareto graphs."""
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, hpc.sensors)
    # P_full up to 0.9: when the optimal system escalates more than the largest P_full, the
    # LPC is trained on rows it should escalate and lowering the gate threshold cannot fix
    # it (the 0.7 layout of ``trainer.data.synthetic_layouts`` missed by 10% with 0.6)
    p_fulls = (0.2, 0.5, 0.8) if options.quick else (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8,
                                                       0.9)
    gammas = (0.003, 0.03) if options.quick else (0.001, 0.003, 0.01, 0.03, 0.1)
    extra = {"n_rounds": 5, "n_steps": 150} if options.quick else {}
    layout = {"feature_sensor": cm.feature_sensor.tolist(),
              "sensor_costs": cm.sensor_costs.tolist(), "random_state": options.seed}
    jobs = [({**layout, **extra, "p_full": p, "gamma": g}, dataset.X_train, dataset.y_train,
             hpc.oof_proba_train) for p in p_fulls for g in gammas]
    models = parallel_map(_fit, jobs, options.n_jobs, options.progress, "adapt-lin")
    candidates: list[Graph] = []
    # per fit, the lowest-objective solution of every sensor set its starts reached: the
    # objective compares solutions reading the same sensors, validation the rest
    for rank, model in ((r, alt) for fitted in models
                        for r, alt in enumerate(fitted.alternatives())):
        if not model.sensors_bought_.any():
            continue
        proba_val = model.predict_proba(dataset.X_val)
        raw = model.gate_score(dataset.X_val) + model.gate_threshold
        # the trained gate (its own threshold) and 41 quantiles of its scores on validation
        # (escalation in steps of 2.5%: 5% steps cost up to 0.05, 3.8% of a 1.3 optimum)
        taus = set(np.quantile(raw, np.linspace(0.0, 1.0, 41)).round(4)) | {
            float(model.gate_threshold)}
        for tau in sorted(taus):
            variant = model.with_threshold(float(tau))
            params: dict[str, float | str] = {"p_full": float(variant.p_full),
                                              "gamma": float(variant.gamma),
                                              "gate_threshold": float(variant.gate_threshold)}
            name = (f"adapt-lin-p{variant.p_full:g}-g{variant.gamma:g}"
                    f"{f'-a{rank}' if rank else ''}-t{variant.gate_threshold:+.4f}")
            graph = one_node_graph(name, "adapt-lin", cm, variant, True, params)
            candidates.append(validated(graph, dataset, hpc, cm, proba_val,
                                        variant.gate_score(dataset.X_val)))
    return pareto_frontier(candidates)
