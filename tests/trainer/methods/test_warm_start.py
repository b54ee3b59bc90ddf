"""Warm-start sensor sets for ADAPT-GBRT: prefixes of the greedy sensor order."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.datasets import Dataset
from adaptedge.trainer.methods import warm_start
from adaptedge.trainer.methods.warm_start import warm_start_sets


def _dataset(n: int = 3000) -> tuple[Dataset, SimpleNamespace]:
    """Six unit-cost sensors: label = (s2 > 0) xor (s4 > 0.5) on 90% of rows; the rest noise."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = ((X[:, 2] > 0) ^ (X[:, 4] > 0.5)).astype(np.int64)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    a, b = int(0.6 * n), int(0.8 * n)
    d = Dataset(
        name="warm", X_train=X[:a], y_train=y[:a], X_val=X[a:b], y_val=y[a:b],
        X_test=X[b:], y_test=y[b:], classes=("0", "1"),
        feature_names=tuple(f"f{i}" for i in range(6)),
        sensors=tuple(SensorSpec(f"s{i}", (i,)) for i in range(6)),
        cost_weights=CostWeights(energy_mj=0.0, uniform=1.0), link=LinkSpec(),
        description="warm-start test problem",
    )
    hpc = SimpleNamespace(oof_proba_train=np.eye(2)[y[:a]], sensors=None)  # train rows only
    return d, hpc


def test_prefixes_start_with_the_informative_sensors() -> None:
    d, hpc = _dataset()
    sets = warm_start_sets(d, hpc, (0.5, 0.95))
    assert sets, "expected at least one warm-start set"
    assert all(0 < len(s) < 6 for s in sets)
    assert sets[-1][:2] in ((2, 4), (4, 2))  # the two label sensors come first
    assert len(sets) == len(set(sets))
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(sets))  # nested


def test_bad_fraction_is_named() -> None:
    d, hpc = _dataset(300)
    with pytest.raises(ValueError, match="fractions"):
        warm_start_sets(d, hpc, (0.0,))


def test_the_order_is_ranked_once_per_content(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = warm_start.greedy_order

    def counted(*args: object, **kwargs: object) -> list[int]:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(warm_start, "greedy_order", counted)
    monkeypatch.setattr(warm_start, "_ORDERS", OrderedDict())
    d, hpc = _dataset(900)
    first = warm_start_sets(d, hpc, (0.5, 0.95))
    again = warm_start_sets(replace(d), SimpleNamespace(**vars(hpc)), (0.95,))
    assert len(calls) == 1 and again[-1] == first[-1]  # equal content: ranked once
    y = d.y_train.copy()
    y[:50] = 1 - y[:50]
    warm_start_sets(replace(d, y_train=y), hpc, (0.95,))
    warm_start_sets(d, hpc, (0.95,), seed=1)
    assert len(calls) == 3  # other labels, another seed: ranked again
    assert len(warm_start._ORDERS) == warm_start.KEPT_ORDERS
