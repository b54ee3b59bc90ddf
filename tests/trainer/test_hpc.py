"""The HPC: out-of-fold training probabilities, ONNX parity, the cache, an ONNX-given HPC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from adaptedge.trainer.data.cache import cache_root
from adaptedge.trainer.data.datasets import Dataset, load_dataset
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.hpc import HpcError, HpcModel, fit_hpc


@pytest.fixture(autouse=True, scope="module")
def _one_openmp_thread() -> Iterator[None]:
    import sklearn.ensemble  # noqa: F401  (load OpenMP before limiting it)

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@pytest.fixture(scope="module")
def heart() -> Dataset:
    return load_dataset("heart")


@pytest.fixture(scope="module")
def heart_hpc(heart: Dataset) -> HpcModel:
    return fit_hpc(heart, kind="auto", seed=0, cache=False)


@pytest.mark.slow
def test_probabilities_shapes_and_accuracy(heart: Dataset, heart_hpc: HpcModel) -> None:
    h = heart_hpc
    assert h.sensors == tuple(s.name for s in heart.sensors) and h.n_classes == 2
    for proba, y in ((h.oof_proba_train, heart.y_train), (h.proba_val, heart.y_val),
                     (h.proba_test, heart.y_test)):
        assert proba.shape == (len(y), 2)
        assert np.allclose(proba.sum(axis=1), 1.0)
    assert h.val_accuracy == pytest.approx(float(np.mean(h.proba_val.argmax(1) == heart.y_val)))
    assert h.val_accuracy > 0.7
    assert "out-of-fold" in h.description


@pytest.mark.slow
def test_out_of_fold_is_less_confident_than_in_sample(heart: Dataset,
                                                      heart_hpc: HpcModel) -> None:
    in_sample = heart_hpc.predict_proba(heart.X_train)
    assert not np.allclose(in_sample, heart_hpc.oof_proba_train)
    assert in_sample.max(axis=1).mean() > heart_hpc.oof_proba_train.max(axis=1).mean()


@pytest.mark.slow
def test_onnx_parity_on_the_test_split(heart: Dataset, heart_hpc: HpcModel) -> None:
    got = run_onnx(heart_hpc.onnx_bytes(), heart.X_test, "probabilities")
    assert np.abs(got - heart_hpc.proba_test).max() < 1e-5
    top2 = np.sort(heart_hpc.proba_test, axis=1)
    clear = top2[:, -1] - top2[:, -2] > 1e-5
    assert np.array_equal(got.argmax(1)[clear], heart_hpc.proba_test.argmax(1)[clear])


def test_any_sklearn_classifier_and_seeded_refit(heart: Dataset) -> None:
    a = fit_hpc(heart, kind=make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
                seed=1, cache=False)
    b = fit_hpc(heart, kind=make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
                seed=1, cache=False)
    assert np.array_equal(a.oof_proba_train, b.oof_proba_train)
    assert "Pipeline" in a.description
    got = run_onnx(a.onnx_bytes(), heart.X_val, "probabilities")
    assert np.abs(got - a.proba_val).max() < 1e-5


@pytest.mark.slow
def test_cache_returns_the_stored_model(heart: Dataset, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path))
    first = fit_hpc(heart, kind="hgb", seed=0)
    stored = list((tmp_path / "hpc").glob("heart-hgb-0-*.pkl"))
    assert len(stored) == 1
    again = fit_hpc(heart, kind="hgb", seed=0)
    assert np.array_equal(first.proba_test, again.proba_test)
    assert again.onnx_model is not None  # the ONNX conversion is cached too
    other = fit_hpc(heart, kind="hgb", seed=1)
    assert len(list((tmp_path / "hpc").glob("*.pkl"))) == 2
    assert not np.array_equal(first.oof_proba_train, other.oof_proba_train)


def test_cache_root_prefers_adaptedge_then_xdg_then_home(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("ADAPTEDGE_CACHE_DIR")
    assert cache_root() == tmp_path / "xdg" / "adaptedge"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "adaptedge"


@pytest.mark.slow
def test_onnx_given_hpc(heart: Dataset, heart_hpc: HpcModel, tmp_path: Path) -> None:
    path = tmp_path / "legacy.onnx"
    path.write_bytes(heart_hpc.onnx_bytes())
    legacy = fit_hpc(heart, onnx_path=path)
    assert "IN-SAMPLE" in legacy.description and legacy.estimator is None
    assert np.abs(legacy.proba_test - heart_hpc.proba_test).max() < 1e-5
    assert legacy.onnx_bytes() == path.read_bytes()
    assert np.abs(legacy.predict_proba(heart.X_val) - heart_hpc.proba_val).max() < 1e-5


@pytest.mark.slow
def test_onnx_given_hpc_of_the_wrong_shape(heart_hpc: HpcModel, tmp_path: Path) -> None:
    path = tmp_path / "other.onnx"
    path.write_bytes(heart_hpc.onnx_bytes())
    with pytest.raises(HpcError, match="running it on 16 features failed"):
        fit_hpc(load_dataset("letter-binary"), onnx_path=path)
    with pytest.raises(HpcError, match="not found"):
        fit_hpc(load_dataset("heart"), onnx_path=tmp_path / "missing.onnx")


def test_unknown_kind(heart: Dataset) -> None:
    with pytest.raises(HpcError, match="unknown HPC kind 'svm'"):
        fit_hpc(heart, kind="svm", cache=False)


class _BlasThreadsSeen(LogisticRegression):  # type: ignore[misc]
    """Records how many BLAS threads each fit may use."""

    seen: list[int] = []  # noqa: RUF012  (a class-level record across clones)

    def fit(self, X: object, y: object, sample_weight: object = None) -> _BlasThreadsSeen:
        from threadpoolctl import threadpool_info

        pools = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        _BlasThreadsSeen.seen.append(max(pools, default=1))
        super().fit(X, y, sample_weight)
        return self


def test_a_custom_kind_fits_with_one_blas_thread(heart: Dataset) -> None:
    # A BLAS-threaded HPC on a busy 2-core machine ran 33 s on gas instead of 0.7 s.
    from threadpoolctl import threadpool_info

    if max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"),
           default=1) < 2:
        pytest.skip("BLAS runs one thread here anyway: nothing to limit")
    _BlasThreadsSeen.seen.clear()
    fit_hpc(heart, kind=make_pipeline(StandardScaler(), _BlasThreadsSeen()), cache=False)
    assert _BlasThreadsSeen.seen and set(_BlasThreadsSeen.seen) == {1}


def test_out_of_fold_folds_in_processes_give_the_same_probabilities(heart: Dataset) -> None:
    """The folds run on ``n_jobs`` processes; a forest's folds (its own ``n_jobs`` set to 2)
    give the same out-of-fold probabilities, bit for bit, as one process."""
    from sklearn.ensemble import ExtraTreesClassifier

    from adaptedge.trainer.hpc import oof_proba

    forest = ExtraTreesClassifier(n_estimators=30, n_jobs=2, random_state=3)
    one = oof_proba(forest, heart.X_train, heart.y_train, heart.n_classes, 0, n_jobs=1)
    two = oof_proba(forest, heart.X_train, heart.y_train, heart.n_classes, 0, n_jobs=2)
    assert np.array_equal(one, two)
    assert not np.array_equal(one, oof_proba(forest, heart.X_train, heart.y_train,
                                             heart.n_classes, 1, n_jobs=2))  # the seed counts
