"""The worker's inbox: messages kept in order, PUBACKs owed once taken and sent when settled,
none for QoS 0, and none for a lost connection's messages."""

from __future__ import annotations

import paho.mqtt.client as mqtt

from adaptedge.cloud.transport.mqtt_inbox import Inbox


def message(topic: bytes, mid: int, qos: int = 1) -> mqtt.MQTTMessage:
    m = mqtt.MQTTMessage(mid=mid, topic=topic)
    m.payload, m.qos = b"p%d" % mid, qos
    return m


def test_puback_ids_are_owed_once_taken_and_sent_once_settled() -> None:
    inbox, acks = Inbox(), []
    for mid, qos in ((7, 1), (8, 0), (9, 1)):
        inbox.put(None, None, message(b"a/v1/d/req", mid, qos))  # type: ignore[arg-type]
    inbox.put(None, None, message(b"\xff/req", 10))  # type: ignore[arg-type]
    assert len(inbox) == 4 and not inbox.owes
    first, second = inbox.take(), inbox.take()
    assert (first.topic, first.payload, first.mid) == ("a/v1/d/req", b"p7", 7)
    assert second.mid == 0  # QoS 0: nothing to acknowledge
    inbox.settle(lambda mid, qos: acks.append((mid, qos)))
    assert acks == [(7, 1)] and not inbox.owes
    inbox.reconnected()  # 9 and 10 came on the lost connection: no PUBACK on the new one
    assert inbox.take().mid == 0 and inbox.take().topic is None  # not UTF-8
    inbox.settle(lambda mid, qos: acks.append((mid, qos)))
    assert acks == [(7, 1)] and len(inbox) == 0
