"""A TRAINED regression bundle end to end through a real mosquitto (issue #33 acceptance):
``adaptedge train --method confidence --task regression`` (the cascade escalates the rows its
gate scores far from the HPC), ``CloudService`` serving the full bundle, an ``EdgeRuntime`` on
the device bundle: every escalated row's ``Decision.value`` is the HPC's ONNX value on that
row (float32), every local row the point's own value, as ``evaluate`` walks them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main
from adaptedge.edge import EdgeRuntime
from adaptedge.protocol.bundle import verify
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.run import run_onnx
from adaptedge.trainer.policy.oracle import BundleRunner
from tests.cloud.service.conftest import Served
from tests.support.tiny_regression import TINY_COSTS, tiny_regression_csv

pytestmark = pytest.mark.broker

@pytest.mark.slow
def test_trained_escalations_get_the_hpc_value(served: Served, tmp_path: Path) -> None:
    data = tiny_regression_csv(tmp_path / "t.csv")
    (tmp_path / "costs.toml").write_text(TINY_COSTS)
    bundle = tmp_path / "b"
    assert main(["train", "--data", str(data), "--target", "temp", "--task", "regression",
                 "--method", "confidence", "--quick", "--no-progress", "--costs",
                 str(tmp_path / "costs.toml"), "--out", str(bundle)]) == 0
    m = verify(bundle)
    point = max(m.operating_points, key=lambda p: p.escalation_rate)
    assert point.escalation_rate > 0
    d = load_dataset(str(data), target="temp", task="regression",
                     costs=tmp_path / "costs.toml")
    X = d.X_test[:24].astype(np.float32)
    expected = BundleRunner.from_dir(bundle).evaluate(point.policy, X)
    hpc = run_onnx((bundle / "hpc.onnx").read_bytes(), X, "value")[:, 0]
    with served(bundle) as (_, uplink), \
            EdgeRuntime.load(tmp_path / "b-device", uplink=uplink,
                             operating_point=point.name) as rt:
        decisions = [rt.predict_row(row.tolist()) for row in X]
        assert rt.counters["mismatched_replies"] == 0
    escalated = [i for i, dec in enumerate(decisions) if dec.escalated]
    assert escalated and escalated == np.flatnonzero(expected.escalated).tolist()
    for i, dec in enumerate(decisions):
        assert dec.value is not None and dec.label == ""
        if i in escalated:
            assert (dec.source, dec.error) == ("cloud", None)
            assert dec.value == hpc[i]  # the float32 the HPC computed in the cloud
        else:
            assert dec.source == "local"
            assert dec.value == pytest.approx(expected.values[i], rel=1e-6, abs=1e-6)
