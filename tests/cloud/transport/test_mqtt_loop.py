"""The worker's hand-driven paho loop: ``BufferedSocket`` over real sockets, ``LoopDriver``
against a real mosquitto (bursts, no socketpair, reconnection re-wraps the new socket)."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from adaptedge.cloud.transport.connection import connect, make_client, parse_broker_url
from adaptedge.cloud.transport.mqtt_framing import packet_end, puback, read_publish
from adaptedge.cloud.transport.mqtt_loop import LoopDriver
from adaptedge.cloud.transport.mqtt_socket import BufferedSocket
from adaptedge.simulator.brokers import MosquittoBroker
from tests.support.mqtt_bytes import remaining_length


@pytest.fixture()
def pair() -> Iterator[tuple[BufferedSocket, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.settimeout(5.0)
    yield BufferedSocket(ours), peer
    ours.close()
    peer.close()


def test_packet_pieces_come_from_one_read(pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    with pytest.raises(BlockingIOError):
        sock.recv(1)  # nothing sent yet: paho sees "try again"
    peer.sendall(b"\x30\x03abc\x40\x02\x00\x07")  # two packets in one segment
    time.sleep(0.05)
    assert sock.recv(1) == b"\x30"
    assert sock.pending() == 8  # the rest was read with the first byte
    assert sock.recv(1) == b"\x03"
    assert sock.recv(3) == b"abc"
    assert sock.recv(1) + sock.recv(1) + sock.recv(9) == b"\x40\x02\x00\x07"  # short read: rest
    assert sock.pending() == 0
    peer.close()
    time.sleep(0.05)
    assert sock.recv(1) == b""  # end of stream, as from the socket itself


def test_writes_leave_in_one_flush(pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    assert sock.send(b"reply-1|") == 8
    assert sock.send(bytearray(b"puback|")) == 7
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(100)  # buffered, not sent
    assert sock.unsent == 15
    assert sock.flush() == 0
    peer.settimeout(5.0)
    assert peer.recv(100) == b"reply-1|puback|"


def test_a_full_socket_keeps_the_rest_and_pushes_back(
        pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    block = b"x" * 65_536
    sent = 0
    with pytest.raises(BlockingIOError):
        for _ in range(1000):  # the peer reads nothing: kernel buffers fill, then ours
            sent += sock.send(block)
            sock.flush()
    assert sock.unsent >= 1 << 20  # paho keeps the packet that did not fit queued
    assert sent >= sock.unsent
    received = 0
    deadline = time.monotonic() + 10
    while sock.flush() and time.monotonic() < deadline:
        received += len(peer.recv(1 << 20))
    while received < sent:
        received += len(peer.recv(1 << 20))
    assert received == sent  # nothing lost, nothing doubled


def test_a_failed_flush_surfaces_on_the_next_read(
        pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.close()
    sock.send(b"reply")
    sock.flush()
    assert sock.pending() == 1  # paho must come and read, and learn the connection is gone
    with pytest.raises(OSError):
        sock.recv(1)
    with pytest.raises(OSError):
        sock.send(b"more")


def test_close_sends_what_is_buffered(pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    sock.send(b"\xe0\x00")  # paho closes right after handing over its DISCONNECT
    sock.close()
    assert peer.recv(10) == b"\xe0\x00"
    assert peer.recv(10) == b""


# -- the driver on a real broker -----------------------------------------------------------------
def _driven(url: str, name: str, inbox: list[bytes]) -> tuple[mqtt.Client, LoopDriver]:
    client = make_client(name)
    driver = LoopDriver(client)

    def on_message(c: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        inbox.append(message.payload)
        c.publish("loop/echo", message.payload, qos=1)  # queued inside the callback

    client.on_message = on_message
    connect(client, parse_broker_url(url), loop=driver.step)
    client.subscribe("loop/in", qos=1)
    return client, driver


def _run(driver: LoopDriver, until: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        assert driver.step(0.02) == mqtt.MQTT_ERR_SUCCESS
    return bool(until())


@pytest.mark.broker
def test_a_burst_is_received_and_answered_without_a_socketpair() -> None:
    inbox: list[bytes] = []
    echoed: list[bytes] = []
    with MosquittoBroker() as broker:
        client, driver = _driven(broker.url, "driven", inbox)
        peer = make_client("peer")
        peer.on_message = lambda c, u, m: echoed.append(m.payload)
        connect(peer, parse_broker_url(broker.url))
        peer.subscribe("loop/echo", qos=1)
        peer.loop(0.2)
        _run(driver, lambda: False, 0.2)  # the SUBACK
        sent = [f"m{i}".encode() for i in range(300)]
        for payload in sent:
            peer.publish("loop/in", payload, qos=1)
        deadline = time.monotonic() + 15
        while len(echoed) < len(sent) and time.monotonic() < deadline:
            peer.loop(0.01)
            driver.step(0.01)
        assert isinstance(client.socket(), BufferedSocket)
        assert client._sockpairW is None  # no wake-up byte written per publish
        assert inbox == sent and sorted(echoed) == sorted(sent)
        assert driver.readable() is False  # nothing left waiting
        client.disconnect()
        _run(driver, lambda: client.socket() is None, 2.0)
        peer.disconnect()


@pytest.mark.broker
def test_a_new_connection_gets_a_new_buffered_socket() -> None:
    inbox: list[bytes] = []
    with MosquittoBroker() as broker:
        client, driver = _driven(broker.url, "driven", inbox)
        _run(driver, lambda: False, 0.2)
        first = client.socket()
        assert isinstance(first, BufferedSocket)
        broker.restart()
        deadline = time.monotonic() + 10
        while driver.step(0.02) == mqtt.MQTT_ERR_SUCCESS and time.monotonic() < deadline:
            pass  # until the loop notices the broker went away
        connect(client, parse_broker_url(broker.url), loop=driver.step)
        client.subscribe("loop/in", qos=1)
        _run(driver, lambda: False, 0.2)
        assert isinstance(client.socket(), BufferedSocket) and client.socket() is not first
        publisher = make_client("publisher")
        connect(publisher, parse_broker_url(broker.url))
        publisher.publish("loop/in", b"after", qos=1)
        publisher.loop(0.1)
        assert _run(driver, lambda: inbox == [b"after"])
        publisher.disconnect()


# -- whole packets only, and the fast path -------------------------------------------------------
PUBLISH_Q1 = b"\x32\x0a\x00\x03a/b\x00\x05pay"  # topic a/b, message id 5, payload "pay"
PUBLISH_Q0 = b"\x30\x06\x00\x01tpay"


def test_paho_is_only_given_whole_packets(pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.sendall(PUBLISH_Q1[:5])
    time.sleep(0.05)
    with pytest.raises(BlockingIOError):
        sock.recv(1)  # read, but not whole yet: paho hears "try again"
    assert sock.pending() == 0
    peer.sendall(PUBLISH_Q1[5:] + b"\x40")  # the rest, and the first byte of a PUBACK
    time.sleep(0.05)
    assert sock.recv(1) + sock.recv(1) + sock.recv(100) == PUBLISH_Q1
    with pytest.raises(BlockingIOError):
        sock.recv(1)
    peer.sendall(b"\x02\x00\x05")
    time.sleep(0.05)
    assert sock.recv(1) + sock.recv(1) + sock.recv(2) == b"\x40\x02\x00\x05"


def test_a_large_packet_arriving_in_pieces_is_whole_once(
        pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    payload = bytes(range(256)) * 4096  # 1 MiB: a four-byte remaining length, many reads
    packet = bytes([0x30]) + remaining_length(3 + len(payload)) + b"\x00\x01t" + payload
    sender = threading.Thread(target=peer.sendall, args=(packet,), daemon=True)
    sender.start()
    waiting = select.poll()
    waiting.register(sock, select.POLLIN)
    handed: list[bytes] = []
    deadline = time.monotonic() + 10
    while not handed and time.monotonic() < deadline:
        waiting.poll(100)  # as the driver does: wait, then let paho read
        try:
            handed.append(sock.recv(len(packet)))
        except BlockingIOError:
            continue  # read, but not whole yet
    sender.join(5)
    assert handed == [packet]  # handed over once, whole


def test_take_takes_publishes_and_leaves_the_rest_to_paho(
        pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    assert sock.take(read_publish) is None and sock.drained  # nothing there
    peer.sendall(PUBLISH_Q1 + b"\x40\x02\x00\x09" + PUBLISH_Q0)
    time.sleep(0.05)
    first = sock.take(read_publish)
    assert first is not None and (first.topic, first.payload, first.qos, first.mid) == \
        (b"a/b", b"pay", 1, 5)
    assert sock.take(read_publish) is None and not sock.drained  # a PUBACK: paho's
    assert sock.recv(1) + sock.recv(1) + sock.recv(2) == b"\x40\x02\x00\x09"
    second = sock.take(read_publish, read=False)
    assert second is not None and (second.topic, second.qos, second.retain) == (b"t", 0, False)
    assert sock.take(read_publish, read=False) is None and sock.drained


def test_end_of_stream_inside_a_packet_reaches_paho(
        pair: tuple[BufferedSocket, socket.socket]) -> None:
    sock, peer = pair
    peer.sendall(PUBLISH_Q1[:4])
    peer.close()
    time.sleep(0.05)
    assert sock.take(read_publish) is None and sock.drained  # read, not whole
    assert sock.take(read_publish) is None and not sock.drained  # the end: for paho to see
    assert sock.recv(1) == b""  # paho sees the connection end


def test_replies_leave_before_the_pubacks_they_answer() -> None:
    """The fast path over a socketpair standing in for the broker: a request's PUBACK follows
    its reply, and is held while the worker still owes answers."""
    ours, broker = socket.socketpair()
    ours.setblocking(False)
    broker.settimeout(5.0)
    client = make_client("fast")
    client._sock = ours  # a connection paho believes in, to a peer this test plays
    owed = [True]
    driver = LoopDriver(client, acks_due=lambda: not owed[0])
    received: list[tuple[bytes, int]] = []

    def deliver(packet: Any, at: float) -> None:
        received.append((packet.payload, packet.mid))
        client.publish("reply", packet.payload, qos=1)

    driver.deliver = deliver
    try:
        broker.sendall(PUBLISH_Q1)
        assert driver.step(1.0) == mqtt.MQTT_ERR_SUCCESS
        assert received == [(b"pay", 5)]
        out = broker.recv(1000)
        assert out[0] == 0x32 and out.endswith(b"pay")  # the reply; its PUBACK is held
        owed[0] = False
        driver.step(0.0)
        assert broker.recv(1000) == b"\x40\x02\x00\x05"
        # The broker's PUBACK of our reply (paho's to handle) between two requests: paho gets
        # it alone, and the request behind it still takes the fast path.
        acked: list[int] = []
        client.on_publish = lambda c, u, mid, reason, props: acked.append(mid)
        reply_mid = out[2 + 2 + len(b"reply"):][:2]
        second = PUBLISH_Q1.replace(b"\x00\x05pay", b"\x00\x06two")
        broker.sendall(PUBLISH_Q1.replace(b"\x00\x05", b"\x00\x07") + b"\x40\x02" + reply_mid
                       + second)
        time.sleep(0.05)
        driver.step(1.0)
        assert received[1:] == [(b"pay", 7), (b"two", 6)]
        assert acked == [int.from_bytes(reply_mid, "big")]
        out = broker.recv(1000)
        assert out.endswith(b"\x40\x02\x00\x07\x40\x02\x00\x06")  # after both replies
        assert out.count(b"reply") == 2
    finally:
        ours.close()
        broker.close()


@pytest.mark.broker
def test_the_fast_path_acknowledges_what_it_took() -> None:
    """On a real broker with a persistent session: PUBACKs held back mean the broker sends the
    messages again on reconnection; once sent, it does not."""
    with MosquittoBroker() as broker:
        address = parse_broker_url(broker.url)
        publisher = make_client("publisher")
        connect(publisher, address)
        taken: list[bytes] = []

        def session(acks_due: bool, seconds: float, expect: int) -> None:
            client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="persistent",
                                 protocol=mqtt.MQTTv311, clean_session=False)
            driver = LoopDriver(client, acks_due=lambda: acks_due)
            # Queued messages follow the CONNACK at once: deliver from the start.
            driver.deliver = lambda packet, at: taken.append(packet.payload)
            connect(client, address, loop=driver.step)
            client.subscribe("loop/in", qos=1)
            assert _run(driver, lambda: len(taken) >= expect, seconds)
            _run(driver, lambda: False, 0.2)  # let the PUBACKs (if due) leave
            client.socket().raw.close()  # gone without a DISCONNECT

        session(True, 1.0, 0)  # the session exists, subscribed
        for i in range(20):
            publisher.publish("loop/in", f"m{i}".encode(), qos=1)
        publisher.loop(0.2)
        session(False, 10.0, 20)  # taken, but the PUBACKs were owed
        assert len(taken) == 20
        session(True, 10.0, 40)  # all again: the broker never heard the PUBACKs
        assert taken[20:] == taken[:20]
        session(True, 1.0, 40)
        assert len(taken) == 40  # acknowledged last time: nothing again
        publisher.disconnect()


def test_the_outbox_replies_and_takes_its_own_acks() -> None:
    """``publish`` on the fast path: ids from paho's counter, PUBACKs taken off the buffer
    (paho never sees them), the unacknowledged sent again as DUP on a new connection, and the
    end of the stream still reaches paho."""
    ours, broker = socket.socketpair()
    ours.setblocking(False)
    broker.settimeout(5.0)
    client = make_client("outbox")
    client._sock = ours
    driver = LoopDriver(client)
    driver.deliver = lambda packet, at: driver.publish("reply", packet.payload)
    paho_acks: list[int] = []
    client.on_publish = lambda c, u, mid, reason, props: paho_acks.append(mid)
    new_ours, new_broker = socket.socketpair()
    try:
        broker.sendall(PUBLISH_Q1)
        driver.step(1.0)
        out = broker.recv(1000)
        reply = read_publish(out, 0, packet_end(out, 0))
        assert reply is not None and (reply.topic, reply.payload, reply.qos) == \
            (b"reply", b"pay", 1)
        assert out[packet_end(out, 0):] == b"\x40\x02\x00\x05"  # then the request's PUBACK
        assert client.subscribe("other", qos=1)[1] == reply.mid + 1  # one id counter
        broker.sendall(puback(reply.mid))
        time.sleep(0.05)
        driver.step(1.0)
        assert len(driver.outbox) == 0 and driver.outbox.acked == 1 and paho_acks == []
        # Unacknowledged when the connection goes: sent again, as a duplicate, on the next.
        broker.sendall(PUBLISH_Q1)
        driver.step(1.0)
        broker.recv(1000)
        new_ours.setblocking(False)
        new_broker.settimeout(5.0)
        client._sock = new_ours  # what paho's reconnect does
        driver.step(0.0)
        again = new_broker.recv(1000)
        assert again[0] == 0x3A and read_publish(again, 0, len(again)) is not None  # DUP
        new_broker.close()
        deadline = time.monotonic() + 5
        while driver.step(0.05) == mqtt.MQTT_ERR_SUCCESS and time.monotonic() < deadline:
            pass
        assert client.socket() is None  # the end of the stream reached paho
    finally:
        for s in (ours, broker, new_ours, new_broker):
            s.close()


@pytest.mark.broker
def test_a_burst_on_the_fast_path_is_answered_and_acknowledged() -> None:
    echoed: list[bytes] = []
    with MosquittoBroker() as broker:
        client = make_client("fast")
        driver = LoopDriver(client)
        connect(client, parse_broker_url(broker.url), loop=driver.step)
        client.subscribe("loop/in", qos=1)
        _run(driver, lambda: False, 0.2)  # the SUBACK
        driver.deliver = lambda packet, at: driver.publish("loop/echo", packet.payload)
        peer = make_client("peer")
        peer.on_message = lambda c, u, m: echoed.append(m.payload)
        connect(peer, parse_broker_url(broker.url))
        peer.subscribe("loop/echo", qos=1)
        peer.loop(0.2)
        sent = [f"m{i}".encode() for i in range(300)]
        for payload in sent:
            peer.publish("loop/in", payload, qos=1)
        deadline = time.monotonic() + 15
        while (len(echoed) < len(sent) or len(driver.outbox)) and time.monotonic() < deadline:
            peer.loop(0.01)
            driver.step(0.01)
        assert sorted(echoed) == sorted(sent)
        assert len(driver.outbox) == 0 and driver.outbox.acked == len(sent)
        client.disconnect()
        _run(driver, lambda: client.socket() is None, 2.0)
        peer.disconnect()


@pytest.mark.broker
def test_the_fast_path_keeps_the_connection_alive_past_its_keepalive() -> None:
    """paho sees none of the traffic the fast path takes; its PINGREQs and the PINGRESPs it is
    handed keep a busy connection alive past several keepalive periods."""
    taken: list[bytes] = []
    with MosquittoBroker() as broker:
        address = parse_broker_url(broker.url)
        client = make_client("keepalive")
        driver = LoopDriver(client)
        connect(client, address, keepalive=1, loop=driver.step)
        client.subscribe("loop/in", qos=1)
        _run(driver, lambda: False, 0.2)
        driver.deliver = lambda packet, at: (taken.append(packet.payload),
                                             driver.publish("loop/echo", packet.payload))
        peer = make_client("peer")
        connect(peer, address)
        started, sent = time.monotonic(), 0
        while time.monotonic() - started < 3.5:
            peer.publish("loop/in", b"%d" % sent, qos=1)
            sent += 1
            peer.loop(0.005)
            assert driver.step(0.02) == mqtt.MQTT_ERR_SUCCESS
        assert _run(driver, lambda: len(taken) == sent and not len(driver.outbox), 5.0)
        assert client.is_connected()
        assert "exceeded timeout" not in broker.log()
        client.disconnect()
        _run(driver, lambda: client.socket() is None, 2.0)
        peer.disconnect()


def test_a_malformed_packet_on_the_fast_path_ends_the_connection() -> None:
    """A remaining length of more than four bytes: paho is handed it and refuses it, as it
    would alone (the fast path must not hold it back and spin)."""
    ours, broker = socket.socketpair()
    ours.setblocking(False)
    client = make_client("malformed")
    client._sock = ours
    driver = LoopDriver(client)
    taken: list[bytes] = []
    driver.deliver = lambda packet, at: taken.append(packet.payload)
    try:
        broker.sendall(PUBLISH_Q1 + b"\x30\xff\xff\xff\xff\x01")
        rcs = [driver.step(1.0) for _ in range(3)]
        assert taken == [b"pay"]  # the well-formed one before it was served
        assert rcs[0] != mqtt.MQTT_ERR_SUCCESS and client.socket() is None
    finally:
        ours.close()
        broker.close()
