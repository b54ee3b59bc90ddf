"""The tuned confidence cascade (``--method confidence``): every knob is swept and chosen on
validation (never on test), and its exported head routes as the walk does."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from adaptedge.trainer.data.synthetic import synthetic_2
from adaptedge.trainer.errors import ParamError
from adaptedge.trainer.export.run import run_node
from adaptedge.trainer.hpc import HpcModel, fit_hpc
from adaptedge.trainer.methods.confidence_cascade import (
    CascadeSettings,
    confidence_model,
    default_ks,
    fit_cheap,
    quantile_thresholds,
    stop_margin,
    swept_knobs,
)
from adaptedge.trainer.methods.registry import MethodOptions, get_method

DATA = synthetic_2(n=600)
SMALL = {"families": "hgb,gbt,lr", "ks": (1, 2), "order": "both", "quantiles": 7,
         "hgb_iter": 10}


@pytest.fixture(scope="module")
def hpc() -> HpcModel:
    return fit_hpc(DATA, kind="hgb", cache=False)


def _sweep(dataset: object, hpc: HpcModel, **extra: object) -> list:  # type: ignore[type-arg]
    options = MethodOptions(progress=False, extra={**SMALL, **extra})
    return list(get_method("confidence")(dataset, hpc, options))


@pytest.mark.slow
def test_every_knob_is_swept_and_the_front_is_chosen_on_validation(hpc: HpcModel) -> None:
    front = _sweep(DATA, hpc)
    knobs = swept_knobs(front)
    assert {"family", "order", "k", "threshold"} <= set(knobs)
    assert all(g.method == "confidence" for g in front)
    costs = [g.validation.cost for g in front]
    accs = [g.validation.accuracy for g in front]
    assert costs == sorted(costs) and accs == sorted(accs)  # a validation front
    # the test split plays no part: scrambling it leaves every point and metric unchanged
    rng = np.random.default_rng(0)
    scrambled = replace(DATA, X_test=rng.normal(size=DATA.X_test.shape).astype(np.float32),
                        y_test=rng.permutation(DATA.y_test))
    again = _sweep(scrambled, hpc)
    assert [(g.name, g.validation) for g in again] == [(g.name, g.validation) for g in front]
    # ...while other validation rows give other thresholds and metrics
    half = len(DATA.y_val) // 2
    fewer = replace(DATA, X_val=DATA.X_val[:half], y_val=DATA.y_val[:half])
    hpc_fewer = replace(hpc, proba_val=hpc.proba_val[:half])
    other = _sweep(fewer, hpc_fewer)
    assert [(g.name, g.validation) for g in other] != [(g.name, g.validation) for g in front]


def test_thresholds_are_validation_quantiles() -> None:
    top = np.linspace(0.5, 1.0, 101, dtype=np.float32)
    ts = quantile_thresholds(top, 5)
    assert ts == sorted(ts) and len(ts) == 5
    assert ts[0] == pytest.approx(0.5) and ts[-1] == pytest.approx(1.0)
    assert ts[2] == pytest.approx(0.75)
    assert len(quantile_thresholds(np.full(10, 0.9, np.float32), 7)) == 1  # distinct only


@pytest.mark.parametrize("family", ["hgb", "gbt", "lr"])
def test_the_exported_head_stops_exactly_when_the_margin_is_not_negative(family: str) -> None:
    X, y = DATA.X_train[:, :1], DATA.y_train  # one feature: an uncertain cheap model
    classifier = fit_cheap((family, X, y, 2, 0, 20))
    proba = run_node(classifier, DATA.X_val[:, :1])["probabilities"]
    ts = quantile_thresholds(proba.max(axis=1), 5)
    t = ts[len(ts) // 2]
    scores = run_node(confidence_model(classifier, t), DATA.X_val[:, :1])["action_scores"]
    s = stop_margin(proba, t)
    assert np.array_equal(scores[:, 0] >= scores[:, 1], s >= 0)
    assert 0 < np.mean(s >= 0) < 1


def test_settings_refuse_an_unknown_family_and_default_ks_grow_with_the_sensors() -> None:
    with pytest.raises(ParamError, match="families must be"):
        CascadeSettings.from_options(MethodOptions(extra={"families": "hgb,svm"}), 4)
    assert default_ks(4) == (1, 2, 3, 4)
    assert default_ks(16) == tuple(range(1, 13))
    assert default_ks(64)[-4:] == (16, 24, 32, 48)
    quick = CascadeSettings.from_options(MethodOptions(quick=True), 3)
    assert quick.ks == (1, 2, 3) and quick.families == ("hgb", "lr")
