from __future__ import annotations

import math
from pathlib import Path

import pytest

from adaptedge.edge.device import DeviceOptions
from adaptedge.edge.errors import DeviceError, EdgeError


@pytest.mark.parametrize("rate", [0.0, -1.0, math.inf, math.nan])
def test_a_rate_must_be_a_positive_number(rate: float) -> None:
    with pytest.raises(DeviceError, match="--rate must be a positive number") as caught:
        DeviceOptions(Path("b"), rate_hz=rate)
    assert isinstance(caught.value, EdgeError)


def test_defaults_and_derived_settings() -> None:
    options = DeviceOptions(Path("b"), device="dev3", rate_hz=20.0)
    assert options.sensor_timeouts_ms is None
    assert options.slots_dir == Path("adaptedge-updates") / "dev3"
    assert DeviceOptions(Path("b"), sensor_timeout_ms=250.0).sensor_timeouts_ms == {"*": 250.0}
    assert DeviceOptions(Path("b"), updates_dir=Path("u")).slots_dir == Path("u")
