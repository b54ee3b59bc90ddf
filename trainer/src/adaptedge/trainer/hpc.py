"""The high-cost model (HPC) f0: a strong classifier on all sensors, or a given ONNX model.

``fit_hpc`` returns an ``HpcModel`` with what every method needs: out-of-fold probabilities
on the training set (the ADAPT q-step; in-sample ensemble probabilities are overconfident),
validation/test probabilities and the ONNX export the cloud runs. Fitted models are cached
under ``$ADAPTEDGE_CACHE_DIR`` (default ``~/.cache/adaptedge``) keyed by everything that shapes
the fit or its manifest entry (``_cache_key``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.data.cache import cache_root, hash_arrays
from adaptedge.trainer.data.datasets import Dataset
from adaptedge.trainer.errors import HpcError as HpcError
from adaptedge.trainer.parallel import parallel_map

N_FOLDS = 5
KINDS = ("auto", "hgb", "random-forest", "extra-trees", "logistic")
AUTO_KINDS = ("logistic", "extra-trees", "hgb")
"""What ``--hpc auto`` tries, in this order (a tie on validation keeps the earlier, simpler one)."""
MISSING_KINDS = ("hgb",)
"""The kinds that learn missing cells (NaN) and export their routing to ONNX: ``auto`` tries
only these when the training split has one."""
AUTO_BUDGET_S = 120.0
"""``--hpc auto`` starts no further family once its fits have taken this long (seconds)."""
_CACHE_VERSION = 3


@dataclass
class HpcModel:
    description: str
    sensors: tuple[str, ...]
    n_classes: int
    oof_proba_train: npt.NDArray[np.float64]
    proba_val: npt.NDArray[np.float64]
    proba_test: npt.NDArray[np.float64]
    val_accuracy: float
    n_features: int = 0
    estimator: Any = field(default=None, repr=False)
    """The fitted scikit-learn classifier (None for an ONNX-given HPC)."""
    onnx_model: bytes | None = field(default=None, repr=False)
    """The ONNX model: given as the HPC, or the fitted one's export once made (cached)."""

    def predict_proba(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Class probabilities [N, n_classes] for full feature rows."""
        x = np.asarray(X, dtype=np.float32)
        if self.estimator is not None:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1):
                return np.asarray(self.estimator.predict_proba(x), dtype=np.float64)
        from adaptedge.trainer.export.run import run_onnx

        assert self.onnx_model is not None
        return run_onnx(self.onnx_model, x, PROBA_OUTPUT).astype(np.float64)

    def onnx_bytes(self) -> bytes:
        """ONNX: input ``x`` float32 [N, n_features], output ``probabilities`` float32 [N, C]."""
        if self.onnx_model is None:
            self.onnx_model = _onnx_bytes(self.estimator, self.n_features)
        return self.onnx_model


def _candidate(kind: str, seed: int, n_jobs: int, n_classes: int = 2) -> Any:
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )

    if kind == "logistic":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    if kind == "hgb":
        # one tree per class per round: fewer rounds for many classes keeps the fit ~1 minute
        return HistGradientBoostingClassifier(max_iter=300 if n_classes <= 3 else 100,
                                              learning_rate=0.1, max_leaf_nodes=63,
                                              l2_regularization=1.0, early_stopping=False,
                                              random_state=seed)
    if kind == "random-forest":
        return RandomForestClassifier(n_estimators=300, n_jobs=n_jobs, random_state=seed)
    if kind == "extra-trees":
        return ExtraTreesClassifier(n_estimators=200, n_jobs=n_jobs, random_state=seed)
    raise HpcError(f"unknown HPC kind {kind!r}; choose one of {list(KINDS)} or pass a "
                   "scikit-learn classifier")


def _accuracy(proba: npt.NDArray[np.float64], y: npt.NDArray[np.int64]) -> float:
    return float(np.mean(np.argmax(proba, axis=1) == y))


def _full_proba(estimator: Any, X: npt.NDArray[np.float32], n_classes: int
                ) -> npt.NDArray[np.float64]:
    """predict_proba with a column for every class (a fold may miss a rare class)."""
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
    out = np.zeros((len(X), n_classes))
    out[:, np.asarray(estimator.classes_, dtype=np.int64)] = proba
    return out


def oof_proba(template: Any, X: Any, y: npt.NDArray[np.int64], n_classes: int,
              seed: int | None, progress: bool = False, n_jobs: int = 1
              ) -> npt.NDArray[np.float64]:
    """Out-of-fold class probabilities of ``template`` on (X, y): each row's from a clone fitted
    without it (stratified folds, at most ``N_FOLDS``, fewer when a class is rarer). The folds
    are fitted on ``n_jobs`` processes (``trainer.parallel``; one thread each): every fold's
    clone carries the template's seed, so the probabilities are the same for any ``n_jobs``."""
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold

    counts = np.bincount(y)
    n_splits = max(2, min(N_FOLDS, int(counts[counts > 0].min())))
    folds = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    oof = np.zeros((len(y), n_classes))
    jobs = [(clone(template), X, y, train_idx, held_idx, n_classes)
            for train_idx, held_idx in folds.split(X, y)]
    for held_idx, proba in parallel_map(_fit_fold, jobs, n_jobs, progress, "HPC out-of-fold"):
        oof[held_idx] = proba
    return oof


def _fit_fold(job: tuple[Any, Any, Any, Any, Any, int]) -> tuple[Any, npt.NDArray[np.float64]]:
    """Fit one fold; its held-out rows and their class probabilities. One thread per native
    pool (OpenMP, BLAS), as in ``fit_hpc`` (a Dask worker does not inherit that limit)."""
    from threadpoolctl import threadpool_limits

    model, X, y, train_idx, held_idx, n_classes = job
    if model.get_params(deep=False).get("n_jobs") not in (None, 1):
        model.set_params(n_jobs=1)  # the folds are the parallel unit; a forest's trees are
        # the same for any n_jobs (each tree's seed comes from random_state). None is left
        # alone: scikit-learn refuses some n_jobs set explicitly (LogisticRegression's)
    with threadpool_limits(limits=1):  # predicting too: OpenMP threads spin on a busy machine
        model.fit(X[train_idx], y[train_idx])
        return held_idx, _full_proba(model, X[held_idx], n_classes)


def _bar(items: list[Any], progress: bool, desc: str) -> Any:
    from adaptedge.trainer.progress import track

    return track(items, desc, len(items), progress)


def _cache_key(d: Dataset, kind: str, seed: int) -> str:
    """SHA-256 of everything that shapes the fit or the manifest entry made from it: every
    split's data and labels, class and feature names, the sensor grouping, the kind, seed
    and fold count, the fitting code itself and the library versions that run it."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    hash_arrays(digest, (d.X_train, d.y_train, d.X_val, d.y_val, d.X_test, d.y_test))
    fields = {
        "classes": list(d.classes), "features": list(d.feature_names),
        "sensors": [[s.name, list(s.features)] for s in d.sensors],
        "kind": kind, "seed": seed, "folds": N_FOLDS, "cache": _CACHE_VERSION,
        "versions": [version(d) for d in ("scikit-learn", "skl2onnx", "onnx", "numpy")],
        "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    digest.update(json.dumps(fields, sort_keys=True).encode())
    return digest.hexdigest()


def _cache_path(d: Dataset, kind: str, seed: int) -> Path:
    return cache_root() / "hpc" / f"{d.name}-{kind}-{seed}-{_cache_key(d, kind, seed)[:24]}.pkl"


def _load_cached(path: Path, d: Dataset) -> HpcModel | None:
    try:
        with path.open("rb") as fh:
            cached = pickle.load(fh)
    except Exception:  # a stale or broken cache entry is refitted
        return None
    ok = (isinstance(cached, HpcModel) and cached.n_classes == d.n_classes
          and cached.n_features == d.n_features
          and cached.sensors == tuple(s.name for s in d.sensors))
    return cached if ok else None


def fit_hpc(dataset: Dataset, *, kind: Any = "auto", seed: int = 0, n_jobs: int = 1,
            onnx_path: str | Path | None = None, progress: bool = False,
            cache: bool = True) -> HpcModel:
    """Fit (or load) the HPC on ``dataset``'s training split.

    ``kind``: "auto" (the best on validation of ``AUTO_KINDS``, tried in order within
    ``AUTO_BUDGET_S``), "hgb" (histogram gradient boosting, 300 rounds, 100 beyond 3
    classes), "random-forest" (300 trees), "extra-trees" (200 trees), "logistic" (standardised
    logistic regression), or any unfitted scikit-learn classifier. ``onnx_path``: use an existing ONNX classifier (input
    ``x`` [N, n_features], output ``probabilities``) as the HPC — the paper's legacy system;
    its training-set probabilities are then in-sample, not out-of-fold (said in
    ``description``). ``cache``: reuse a fitted HPC from disk for a string ``kind``.
    """
    sensors = tuple(s.name for s in dataset.sensors)
    if onnx_path is not None:
        return _from_onnx(dataset, Path(onnx_path), sensors)
    if isinstance(kind, str) and kind not in KINDS:
        raise HpcError(f"unknown HPC kind {kind!r}; choose one of {list(KINDS)} or pass a "
                       "scikit-learn classifier")
    path = _cache_path(dataset, kind, seed) if cache and isinstance(kind, str) else None
    if path is not None and path.is_file() and (cached := _load_cached(path, dataset)):
        return cached
    import sklearn.ensemble  # noqa: F401  (load OpenMP first so the limit below applies)
    from threadpoolctl import threadpool_limits

    # One thread per native pool: OpenMP (HistGradientBoosting) slows ~20x on a busy 2-core
    # machine, BLAS (a custom linear or MLP kind) ~50x (gas: 33 s instead of 0.7 s).
    with threadpool_limits(limits=1):  # the ONNX export is cached with the model
        model = _fit(dataset, kind, seed, n_jobs, progress, sensors, export=path is not None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(model, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
    return model


def _fit(d: Dataset, kind: Any, seed: int, n_jobs: int, progress: bool,
         sensors: tuple[str, ...], export: bool = False) -> HpcModel:
    """The best candidate, its out-of-fold probabilities and, with ``export``, its ONNX,
    converted on a thread of this process while the folds fit (on ``n_jobs`` processes)."""
    from concurrent.futures import ThreadPoolExecutor

    from sklearn.base import clone, is_classifier

    if isinstance(kind, str):
        names = _kinds(kind, bool(np.isnan(d.X_train).any()))
        templates = [_candidate(k, seed, n_jobs, d.n_classes) for k in names]
    else:
        if not is_classifier(kind):
            raise HpcError(f"HPC must be a scikit-learn classifier, got {type(kind).__name__}")
        names, templates = [type(kind).__name__], [kind]
    best: tuple[float, str, Any, npt.NDArray[np.float64]] | None = None
    started, tried_names = time.perf_counter(), []
    for name, template in _bar(list(zip(names, templates, strict=True)), progress,
                               "HPC candidates"):
        if best is not None and time.perf_counter() - started > AUTO_BUDGET_S:
            continue  # out of time: keep the best so far
        tried_names.append(name)
        fitted = clone(template).fit(d.X_train, d.y_train)
        proba_val = _full_proba(fitted, d.X_val, d.n_classes)
        acc = _accuracy(proba_val, d.y_val)
        if best is None or acc > best[0]:
            best = (acc, name, fitted, proba_val)
    assert best is not None
    acc, name, fitted, proba_val = best
    with ThreadPoolExecutor(max_workers=1) as pool:
        onnx_job = pool.submit(_onnx_bytes, fitted, d.n_features) if export else None
        oof = oof_proba(clone(fitted), d.X_train, d.y_train, d.n_classes, seed, progress,
                        n_jobs)
        onnx_model = onnx_job.result() if onnx_job is not None else None
    tried = f" (best on validation of {', '.join(tried_names)})" if len(names) > 1 else ""
    if getattr(fitted, "n_jobs", None) is not None:
        fitted.set_params(n_jobs=1)  # predicting (cloud, evaluation) is single-process
    return HpcModel(
        description=f"{_label(name, fitted)}{tried} on all {len(sensors)} sensors; "
                    f"validation accuracy {acc:.4f}; training probabilities out-of-fold "
                    f"({N_FOLDS}-fold, seed {seed})",
        sensors=sensors, n_classes=d.n_classes, oof_proba_train=oof, proba_val=proba_val,
        proba_test=_full_proba(fitted, d.X_test, d.n_classes), val_accuracy=acc,
        n_features=d.n_features, estimator=fitted, onnx_model=onnx_model)


def _onnx_bytes(estimator: Any, n_features: int) -> bytes:
    from adaptedge.trainer.export.sklearn import sklearn_to_onnx

    data: bytes = sklearn_to_onnx(estimator, n_features).SerializeToString()
    return data


def _kinds(kind: str, missing: bool) -> list[str]:
    """The kinds ``kind`` tries: with missing cells in the training split, only those that
    learn them (``MISSING_KINDS``)."""
    if not missing:
        return list(AUTO_KINDS) if kind == "auto" else [kind]
    if kind == "auto":
        return list(MISSING_KINDS)
    if kind not in MISSING_KINDS:
        raise HpcError(f"HPC kind {kind!r} cannot learn from missing values (the training "
                       f"split has NaN cells): use --hpc {' or '.join(MISSING_KINDS)} (or auto), "
                       "or train with --impute median")
    return [kind]


def _label(name: str, fitted: Any) -> str:
    """``logistic (Pipeline)``: the kind and the scikit-learn class it fitted."""
    cls = type(fitted).__name__
    return cls if name == cls else f"{name} ({cls})"


def _from_onnx(d: Dataset, path: Path, sensors: tuple[str, ...]) -> HpcModel:
    import onnxruntime as ort

    from adaptedge.trainer.export.run import run_onnx

    if not path.is_file():
        raise HpcError(f"HPC ONNX file {path} not found")
    data = path.read_bytes()
    try:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise HpcError(f"{path}: onnxruntime cannot load it ({exc})") from exc
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    if inputs != [MODEL_INPUT] or PROBA_OUTPUT not in outputs:
        raise HpcError(f"{path}: an HPC model needs input [{MODEL_INPUT!r}] and an output "
                       f"{PROBA_OUTPUT!r}; it has inputs {inputs} and outputs {outputs}")

    def proba(X: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        try:
            p = run_onnx(data, X, PROBA_OUTPUT).astype(np.float64)
        except Exception as exc:
            raise HpcError(f"{path}: running it on {X.shape[1]} features failed ({exc})") from exc
        if p.shape != (len(X), d.n_classes):
            raise HpcError(f"{path}: gives probabilities of shape {p.shape[1:]}, the dataset "
                           f"has {d.n_classes} classes")
        return p

    proba_val = proba(d.X_val)
    acc = _accuracy(proba_val, d.y_val)
    return HpcModel(
        description=f"ONNX model {path.name} (given, not fitted); validation accuracy "
                    f"{acc:.4f}; training probabilities are IN-SAMPLE (out-of-fold is "
                    "impossible for a given model)",
        sensors=sensors, n_classes=d.n_classes, oof_proba_train=proba(d.X_train),
        proba_val=proba_val, proba_test=proba(d.X_test), val_accuracy=acc,
        n_features=d.n_features, onnx_model=data)
