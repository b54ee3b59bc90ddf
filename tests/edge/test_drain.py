"""``OutboxDrainer`` rules with a scripted link and clock (the real broker runs are in
test_fleet_loop.py): window and rate bounds, resends, acknowledgements, unreadable files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from adaptedge.edge import Outbox
from adaptedge.edge.drain import OutboxDrainer
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.messages import InferenceRequest
from adaptedge.protocol.store_wire import StoreAck, decode_record, encode_ack, record_digest


class Link:
    def __init__(self) -> None:
        self.connected = True
        self.accept = True
        self.sent: list[bytes] = []
        self.on_ack: Callable[[bytes, bool], None] | None = None

    def is_connected(self) -> bool:
        return self.connected

    def add_channel(self, topic: str, on_payload: Callable[[bytes, bool], None]) -> None:
        assert topic == "adaptedge/v1/dev1/stored"
        self.on_ack = on_payload

    def publish(self, topic: str, payload: bytes, *, qos: int = 0, retain: bool = False) -> bool:
        assert topic == "adaptedge/v1/dev1/store" and qos == 1 and not retain
        if self.accept:
            self.sent.append(payload)
        return self.accept

    def ack(self, payload: bytes, status: str = "stored", device: str = "dev1") -> None:
        record, request = decode_record(payload)
        assert self.on_ack is not None
        self.on_ack(encode_ack(StoreAck(device, request.request_id,
                                        record_digest(record.request), status)),  # type: ignore[arg-type]
                    False)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def filled(folder: Path, n: int) -> Outbox:
    outbox = Outbox(folder)
    features, mask = pack_features([1.0, 2.0, 3.0], [True, True, True])
    for rid in range(n):
        outbox.record(InferenceRequest(rid, "dev1", "b", 0.0, 250.0, features, mask), "audit", 1)
    return outbox


def test_window_acks_and_deletes(tmp_path: Path) -> None:
    outbox, link, clock = filled(tmp_path, 10), Link(), Clock()
    drain = OutboxDrainer(outbox, link, "dev1", rate_per_s=1e6, window=4, clock=clock)
    assert drain.step() == 4 and drain.step() == 0  # at most 4 unacknowledged
    link.ack(link.sent[0])
    link.ack(link.sent[1], "duplicate")
    link.ack(link.sent[1])  # a second ack of the same record: nothing left to delete
    assert len(outbox) == 8 and drain.step() == 2
    c = drain.counters
    assert (c["drain_stored"], c["drain_duplicates"], c["drain_unknown_acks"]) == (1, 1, 1)
    assert sorted(decode_record(p)[1].request_id for p in link.sent) == [0, 1, 2, 3, 4, 5]
    link.ack(link.sent[2], device="dev2")  # not ours
    link.ack(link.sent[3], "refused")  # can never be stored: dropped
    assert len(outbox) == 7 and drain.counters["drain_refused"] == 1


def test_rate_is_bounded(tmp_path: Path) -> None:
    outbox, link, clock = filled(tmp_path, 100), Link(), Clock()
    drain = OutboxDrainer(outbox, link, "dev1", rate_per_s=10, window=1000, clock=clock)
    for _ in range(100):  # one second in steps of 10 ms
        drain.step()
        clock.now += 0.01
    assert 10 <= len(link.sent) <= 11


def test_unacknowledged_records_are_sent_again(tmp_path: Path) -> None:
    outbox, link, clock = filled(tmp_path, 2), Link(), Clock()
    drain = OutboxDrainer(outbox, link, "dev1", rate_per_s=1e6, ack_timeout_s=1.0, clock=clock)
    assert drain.step() == 2
    clock.now = 0.5
    assert drain.step() == 0
    clock.now = 1.5  # the acknowledgements were lost: both go again
    assert drain.step() == 2 and drain.counters["drain_resent"] == 2
    link.connected = False
    assert drain.step() == 0
    link.connected = True  # after a reconnect, what was in flight goes at once
    clock.now = 1.6
    assert drain.step() == 2 and link.sent[0] == link.sent[2] == link.sent[4]
    link.accept = False  # a publish refused (queue full): retried on a later step
    clock.now = 3.0
    assert drain.step() == 0
    for payload in link.sent[-2:]:
        link.ack(payload)
    assert drain.idle and len(list(tmp_path.glob("*.msgpack"))) == 0


def test_an_unreadable_file_is_set_aside(tmp_path: Path) -> None:
    outbox = filled(tmp_path, 1)
    (tmp_path / "00000000000000000001-9.msgpack").write_bytes(b"\x93garbage")
    outbox.rescan()
    link = Link()
    drain = OutboxDrainer(outbox, link, "dev1", rate_per_s=1e6)
    drain.step()
    assert drain.counters["drain_unreadable"] == 1 and len(link.sent) == 1
    assert (tmp_path / "00000000000000000001-9.bad").exists() and len(outbox) == 1


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rate_per_s"):
        OutboxDrainer(Outbox(tmp_path), Link(), "dev1", rate_per_s=0)
