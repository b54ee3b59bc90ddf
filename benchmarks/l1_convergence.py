"""How far the L1 baseline's saga fits are from the L1 optimum; prints JSON.

    python -m benchmarks.l1_convergence [--data gas] [--cs 8]

The L1 baseline (``trainer.methods.baselines``) selects its sensors with scikit-learn's saga
along a warm-started path of C (``l1_path``, the ``--quick`` grid: ``--cs`` values from 1e-3
to 1, in the method's two chains). For each C this fits that path as the method does, then
solves the same objective, ``C · Σ log-loss + ‖W‖₁`` (multinomial; the intercept free), with
scipy's L-BFGS-B on the split form W = W⁺ − W⁻, W⁺, W⁻ ≥ 0 (exact for L1; its own warm path),
and reports both objectives, both supports (features with a non-zero weight) and CPU seconds.
A lower objective than saga's means saga stopped (at its ``tol``) short of the optimum. Rows:
the training split, standardised as the method does; the HPC's out-of-fold probabilities
from the cache (fitted once if missing). Seed 0.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def objective(Z: FloatArray, y: NDArray[np.int64], W: FloatArray, b: FloatArray,
              C: float) -> float:
    """``C · Σ log-loss + ‖W‖₁`` of weights W [d, k] and intercepts b [k] (k = 1: binary)."""
    from scipy.special import logsumexp

    z = Z @ W + b
    if W.shape[1] == 1:
        loss = np.logaddexp(0.0, z[:, 0]) - z[:, 0] * y
    else:
        loss = logsumexp(z, axis=1) - z[np.arange(len(y)), y]
    return float(C * loss.sum() + np.abs(W).sum())


def split_lbfgsb(Z: FloatArray, y: NDArray[np.int64], C: float, W0: FloatArray,
                 b0: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The L1 objective's minimiser by L-BFGS-B on W = W⁺ − W⁻ (bounds ≥ 0), from (W0, b0);
    the objective divided by C·n for its scale."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    n, d = Z.shape
    k = W0.shape[1]
    onehot = np.eye(k)[y] if k > 1 else None  # k = 1: binary, no one-hot
    penalty = 1.0 / (C * n)

    def value_and_gradient(v: FloatArray) -> tuple[float, FloatArray]:
        W = v[: d * k].reshape(d, k) - v[d * k: 2 * d * k].reshape(d, k)
        z = Z @ W + v[2 * d * k:]
        if onehot is None:
            loss = np.logaddexp(0.0, z[:, 0]) - z[:, 0] * y
            G = (1.0 / (1.0 + np.exp(-z[:, 0])) - y)[:, None]
        else:
            lse = logsumexp(z, axis=1)
            loss = lse - z[np.arange(n), y]
            G = np.exp(z - lse[:, None]) - onehot
        gW = Z.T @ G / n
        value = loss.sum() / n + penalty * v[: 2 * d * k].sum()
        return value, np.concatenate([(gW + penalty).ravel(), (penalty - gW).ravel(),
                                      G.sum(axis=0) / n])

    start = np.concatenate([np.maximum(W0, 0).ravel(), np.maximum(-W0, 0).ravel(), b0])
    bounds = [(0.0, None)] * (2 * d * k) + [(None, None)] * k
    found = minimize(value_and_gradient, start, jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": 20_000, "maxfun": 40_000, "gtol": 1e-10,
                              "ftol": 1e-14, "maxcor": 20})
    v = found.x
    return v[: d * k].reshape(d, k) - v[d * k: 2 * d * k].reshape(d, k), v[2 * d * k:]


def compare(data: str, n_cs: int) -> dict[str, Any]:
    """Per C of the path: saga's and L-BFGS-B's objective, support size and CPU seconds."""
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.hpc import fit_hpc
    from adaptedge.trainer.methods.baselines import (
        L1_CHAINS,
        L1Baseline,
        _l1_model,
        _L1Rows,
        _layout,
    )

    dataset = load_dataset(data)
    hpc = fit_hpc(dataset, seed=0, n_jobs=1)
    _, layout = _layout(dataset, hpc)
    first = L1Baseline(**layout, C=1e-3, random_state=0)
    rows = _L1Rows.of(first, dataset.X_train, dataset.y_train, hpc.oof_proba_train)
    Z, y = rows.Z, rows.yi
    k = 1 if rows.P.shape[1] == 2 else rows.P.shape[1]
    out: list[dict[str, Any]] = []
    for chain in np.array_split(np.geomspace(1e-3, 1.0, n_cs), L1_CHAINS):
        saga = _l1_model(first, warm_start=True)
        W, b = np.zeros((Z.shape[1], k)), np.zeros(k)
        for C in chain:
            started = time.process_time()
            saga.set_params(C=float(C)).fit(Z, y)
            saga_s = time.process_time() - started
            started = time.process_time()
            W, b = split_lbfgsb(Z, y, float(C), W, b)
            lbfgsb_s = time.process_time() - started
            Ws = saga.coef_.T
            out.append({
                "C": float(C),
                "saga": {"objective": objective(Z, y, Ws, saga.intercept_, float(C)),
                         "features": int((np.abs(Ws).sum(axis=1) > 1e-8).sum()),
                         "epochs": int(np.max(saga.n_iter_)), "cpu_s": round(saga_s, 2)},
                "lbfgsb": {"objective": objective(Z, y, W, b, float(C)),
                           "features": int((np.abs(W).sum(axis=1) > 1e-8).sum()),
                           "cpu_s": round(lbfgsb_s, 2)},
            })
    return {"data": data, "rows": int(Z.shape[0]), "features": int(Z.shape[1]),
            "max_row_sq_norm": float((Z**2).sum(axis=1).max()),
            "mean_row_sq_norm": float((Z**2).sum(axis=1).mean()), "path": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="gas")
    ap.add_argument("--cs", type=int, default=8, help="values of C (8: the --quick grid)")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    result = compare(args.data, args.cs)
    print(json.dumps({**result, "load_before": load_before, "load_after": os.getloadavg()[0]},
                     indent=1))


if __name__ == "__main__":
    main()
