from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from adaptedge.edge import EdgeRuntime, MqttUplink
from adaptedge.edge.device import DeviceOptions, ReplayRows, start_runtime
from adaptedge.edge.errors import DeviceError
from adaptedge.protocol import Manifest

Letter = tuple[Path, Manifest, ReplayRows]


def test_offline_the_runtime_runs_the_asked_point(letter: Letter) -> None:
    bundle, manifest, rows = letter
    point = manifest.operating_points[-1].name
    rt = start_runtime(DeviceOptions(bundle, device="d1", operating_point=point), None, rows,
                       print)
    try:
        assert isinstance(rt, EdgeRuntime)
        assert rt.operating_point == point and rt.device_id == "d1"
    finally:
        rt.close()


def test_rows_of_another_dataset_are_refused(letter: Letter) -> None:
    bundle, _, _ = letter
    other = ReplayRows(np.zeros((1, 3), np.float32), ["x"], ("a", "b", "c"), source="other")
    with pytest.raises(DeviceError, match="do not match dataset 'other'"):
        start_runtime(DeviceOptions(bundle), None, other, print)


def test_following_updates_needs_a_broker_and_a_key(letter: Letter) -> None:
    bundle, _, rows = letter
    with pytest.raises(DeviceError, match="--follow-updates needs --broker"):
        start_runtime(DeviceOptions(bundle, follow_updates=True), None, rows, print)


def test_a_broker_that_does_not_answer_is_a_warning(letter: Letter) -> None:
    bundle, _, rows = letter
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uplink = MqttUplink(f"mqtt://127.0.0.1:{port}", "d1")
    said: list[str] = []
    rt = start_runtime(DeviceOptions(bundle, device="d1", connect_timeout_s=0.3), uplink, rows,
                       said.append)
    try:
        assert len(said) == 1 and said[0].startswith("warning: not connected to the broker")
        assert f"127.0.0.1:{port}" in said[0]
    finally:
        uplink.close()
        rt.close()
