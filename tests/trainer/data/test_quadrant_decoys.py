"""Binary quadrant sets with decoys (trainer.data.quadrant_decoys): the perfect tree is right
at its stated cost, and nothing that skips the quadrant's expert reaches 98%."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from adaptedge.trainer.data.quadrant_decoys import QUADRANTS, VARIANTS, decoy_quadrants


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_perfect_tree_is_right_at_its_cost(variant: str) -> None:
    d = decoy_quadrants(variant, n=20000, seed=3)
    v = VARIANTS[variant]
    X, y = d.X_test, d.y_test
    quadrant = np.where(X[:, 0] > 0, 0, 2) + np.where(X[:, 1] > 0, 0, 1)
    own = X[np.arange(len(y)), 2 + quadrant]
    assert ((own > 0) == (y == 1)).all()
    cost = sum(v.sign_cost) + np.array([v.expert_cost[q] for q in QUADRANTS])[quadrant]
    assert cost.mean() == pytest.approx(v.perfect_cost(), rel=0.03)
    costs = dict(v.sensor_costs())
    assert [s.energy_mj for s in d.sensors] == [costs[name] for name in d.feature_names]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_without_the_experts_no_model_reaches_98_percent(variant: str) -> None:
    d = decoy_quadrants(variant, n=6000, seed=4)
    keep = [i for i, name in enumerate(d.feature_names) if not name.startswith("e_")]
    forest = RandomForestClassifier(n_estimators=100, random_state=0)
    forest.fit(d.X_train[:, keep], d.y_train)
    assert forest.score(d.X_test[:, keep], d.y_test) < 0.95


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown quadrant variant"):
        decoy_quadrants("nope")
