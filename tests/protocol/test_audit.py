"""The audit choice is seeded, input-independent, and hits its fraction."""

from __future__ import annotations

import numpy as np
import pytest

from adaptedge.protocol.audit import AuditPolicy


def test_fraction_is_met_and_choice_is_repeatable() -> None:
    policy = AuditPolicy(fraction=0.05, seed=7)
    picks = policy.selected_many("dev1", np.arange(20_000))
    assert 0.045 < picks.mean() < 0.055
    again = [policy.selected("dev1", i) for i in range(200)]
    assert again == list(picks[:200])


def test_seed_and_device_change_the_choice() -> None:
    a = AuditPolicy(fraction=0.5, seed=0).selected_many("dev1", np.arange(256))
    b = AuditPolicy(fraction=0.5, seed=1).selected_many("dev1", np.arange(256))
    c = AuditPolicy(fraction=0.5, seed=0).selected_many("dev2", np.arange(256))
    assert (a != b).any() and (a != c).any()


def test_per_point_override_and_zero() -> None:
    policy = AuditPolicy(fraction=0.0, per_point={2: 1.0})
    assert not policy.selected("d", 3)
    assert policy.selected("d", 3, point=2)
    assert not policy.selected_many("d", np.arange(10), point=0).any()


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_fraction_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        AuditPolicy(fraction=bad)
