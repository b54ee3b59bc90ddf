from __future__ import annotations

from pathlib import Path

from adaptedge.edge import EdgeRuntime, MqttUplink, Outbox
from adaptedge.edge.device import DeviceOptions, ReplayRows
from adaptedge.edge.device.background_drain import device_counters, finish_drain, start_drain
from adaptedge.protocol import Manifest

Letter = tuple[Path, Manifest, ReplayRows]


def test_no_drain_without_an_outbox_an_uplink_or_when_off(letter: Letter,
                                                          tmp_path: Path) -> None:
    bundle, _, _ = letter
    uplink = MqttUplink("mqtt://127.0.0.1:1", "edge")  # never started: nothing is sent
    with EdgeRuntime.load(bundle) as bare, \
            EdgeRuntime.load(bundle, outbox=Outbox(tmp_path / "outbox")) as kept:
        assert start_drain(bare, uplink, DeviceOptions(bundle)) is None  # no outbox
        assert start_drain(kept, None, DeviceOptions(bundle)) is None  # offline
        assert start_drain(kept, uplink, DeviceOptions(bundle, drain=False)) is None
        read = device_counters(kept, None)
        assert read() == kept.counters
        finish_drain(None, DeviceOptions(bundle), interrupted=False)  # nothing to finish
