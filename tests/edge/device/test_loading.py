from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.edge.device import DeviceOptions, ReplayRows
from adaptedge.edge.device.loading import inner_runtime, load_runtime
from adaptedge.edge.switchable import SwitchableRuntime
from adaptedge.protocol import Manifest
from adaptedge.protocol.errors import BundleError

Letter = tuple[Path, Manifest, ReplayRows]


def test_the_options_reach_the_runtime(letter: Letter) -> None:
    bundle, manifest, _ = letter
    options = DeviceOptions(bundle, device="d9", sensor_timeout_ms=50.0)
    point = manifest.operating_points[0].name
    rt = load_runtime(bundle, options, None, None, operating_point=point)
    try:
        assert (rt.device_id, rt.operating_point, rt.outbox) == ("d9", point, None)
        assert inner_runtime(rt) is rt
        holder = SwitchableRuntime(rt, 1)
        assert inner_runtime(holder) is rt
    finally:
        rt.close()


def test_an_unsigned_bundle_is_refused_when_keys_are_trusted(letter: Letter,
                                                             tmp_path: Path) -> None:
    from adaptedge.protocol.signing import write_keypair

    bundle, _, _ = letter
    _, public = write_keypair(tmp_path / "keys")
    with pytest.raises(BundleError):
        load_runtime(bundle, DeviceOptions(bundle, trust=(public,)), None, None,
                     operating_point=None)
