"""Pieces every gate + LPC method shares: the q-step, logit losses, sensor sets and costs.

Sign convention (the paper's): the gate score ``g(x) > 0`` sends x to the HPC (escalate);
``q_i = q(z=0|x_i)`` is the oracle probability of escalating example i.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from adaptedge.protocol.costs import link_cost, sensor_cost
from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer import parallel as _parallel
from adaptedge.trainer.policy.walk import CostTable

FloatArray = NDArray[np.float64]
T = TypeVar("T")
R = TypeVar("R")


def softplus(x: FloatArray) -> FloatArray:
    """``log(1 + e^x)`` as ``max(x, 0) + log1p(e^−|x|)``: ``np.logaddexp(0, x)``'s own
    formula, on numpy's vectorised ``exp`` and ``log1p`` (about 4x faster; the last bit may
    differ from logaddexp's scalar libm calls)."""
    x = np.asarray(x, dtype=np.float64)
    out: FloatArray = np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    return out


def sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))
    return out


def sigmoid_pair(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(sigmoid(x), sigmoid(-x))`` bit for bit, from one ``tanh`` (tanh is odd)."""
    half_tanh = 0.5 * np.tanh(0.5 * np.asarray(x, dtype=np.float64))
    return 0.5 + half_tanh, 0.5 - half_tanh


def q_step(excess: FloatArray, p_full: float, tol: float = 1e-10) -> tuple[FloatArray, float]:
    """The closed-form I-projection: ``q = σ(A − B − β)`` with the least β >= 0 so that
    ``mean(q) <= p_full``. ``excess = A − B`` (LPC-side loss minus HPC-side loss).

    Returns ``(q, β)``; when the constraint binds, ``mean(q)`` equals ``p_full`` to ``tol``.
    """
    excess = np.asarray(excess, dtype=np.float64)
    if p_full <= 0.0:
        return np.zeros_like(excess), float("inf")
    q = sigmoid(excess)
    if q.mean() <= p_full:
        return q, 0.0
    lo, hi = 0.0, 1.0
    for _ in range(200):
        if sigmoid(excess - hi).mean() <= p_full:
            break
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sigmoid(excess - mid).mean() > p_full:
            lo = mid
        else:
            hi = mid
        if hi - lo < tol:
            break
    return sigmoid(excess - hi), hi


def n_logits(n_classes: int) -> int:
    """One logit for binary problems (class 1 vs 0), one per class otherwise."""
    return 1 if n_classes == 2 else n_classes


def log_proba(logits: FloatArray, n_classes: int) -> FloatArray:
    """Class log-probabilities [N, n_classes] from logits [N, n_logits]."""
    if n_classes == 2:
        z = logits[:, 0]
        return np.stack([-softplus(z), -softplus(-z)], axis=1)
    shifted = logits - logits.max(axis=1, keepdims=True)
    out: FloatArray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return out


def proba(logits: FloatArray, n_classes: int) -> FloatArray:
    return np.exp(log_proba(logits, n_classes))


def proba_class1(logits: FloatArray) -> FloatArray:
    """p(class 1) [N] of a binary problem from its one logit: ``proba(logits, 2)[:, 1]`` bit
    for bit, without the class-0 column."""
    out: FloatArray = np.exp(-softplus(-logits[:, 0]))
    return out


def lpc_gradients(
    logits: FloatArray, y: NDArray[np.int64], n_classes: int, weight: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Negative gradient and diagonal Hessian of ``weight · CE(logits, y)`` w.r.t. the logits."""
    if n_classes == 2:
        target = (y == 1).astype(np.float64)[:, None]
        p1 = proba_class1(logits)[:, None]
        return weight[:, None] * (target - p1), weight[:, None] * p1 * (1 - p1) + 1e-12
    p = proba(logits, n_classes)
    onehot = np.eye(n_classes)[y]
    return weight[:, None] * (onehot - p), weight[:, None] * p * (1 - p) + 1e-12


def cross_entropy(logits: FloatArray, y: NDArray[np.int64], n_classes: int) -> FloatArray:
    return -log_proba(logits, n_classes)[np.arange(y.size), y]


def hpc_loss(hpc_proba: NDArray[np.floating], y: NDArray[np.int64]) -> FloatArray:
    """−log p0(y|x), clipped so that a confidently wrong HPC costs at most ~14 nats."""
    p = np.asarray(hpc_proba, dtype=np.float64)[np.arange(y.size), y]
    out: FloatArray = -np.log(np.clip(p, 1e-6, 1.0))
    return out


# -- sensors and costs ------------------------------------------------------------------------
@dataclass(frozen=True)
class CostModel:
    """Per-sensor scalar costs and what escalating adds, in ``protocol.costs`` semantics."""

    sensors: tuple[SensorSpec, ...]
    sensor_costs: FloatArray
    feature_sensor: NDArray[np.int64]
    hpc_sensors: NDArray[np.bool_]
    link_cost: float
    weights: CostWeights | None = None
    """The scalar's weights, for pricing a node's ``compute`` in the walk."""

    @classmethod
    def build(cls, sensors: Sequence[SensorSpec], weights: CostWeights, link: LinkSpec,
              n_features: int, hpc_sensor_names: Sequence[str] | None = None) -> CostModel:
        from adaptedge.trainer.data.costs import feature_sensor_index

        specs = tuple(sensors)
        costs = np.array([sensor_cost(s, weights).scalar for s in specs], dtype=np.float64)
        names = {s.name for s in specs} if hpc_sensor_names is None else set(hpc_sensor_names)
        return cls(
            sensors=specs,
            sensor_costs=costs,
            feature_sensor=feature_sensor_index(specs, n_features),
            hpc_sensors=np.array([s.name in names for s in specs]),
            link_cost=link_cost(link, weights).scalar,
            weights=weights,
        )

    def node_columns(self, bought: NDArray[np.bool_]) -> tuple[int, ...]:
        """Every feature column of the bought sensors (reading a sensor yields all of them)."""
        return tuple(int(j) for j in np.flatnonzero(bought[self.feature_sensor]))

    def node_sensor_names(self, bought: NDArray[np.bool_]) -> tuple[str, ...]:
        return tuple(s.name for s, b in zip(self.sensors, bought, strict=True) if b)

    def table(self) -> CostTable:
        """The walk's cost table (``trainer.policy.walk``)."""
        return CostTable(tuple(s.name for s in self.sensors), self.sensor_costs,
                         self.link_cost, self.hpc_sensors, weights=self.weights,
                         sensor_columns=tuple(tuple(s.features) for s in self.sensors))


def parallel_map(fn: Callable[[T], R], items: Sequence[T], n_jobs: int, progress: bool,
                 desc: str) -> list[R]:
    """``[fn(i) for i in items]`` locally or on the active Dask cluster (``trainer.parallel``)."""
    return _parallel.parallel_map(fn, items, n_jobs, progress, desc)
