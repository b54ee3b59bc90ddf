"""The worker's hand-driven paho loop: ``BufferedSocket`` over real sockets, ``LoopDriver``
against a real mosquitto (bursts, no socketpair, reconnection re-wraps the new socket)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from adaptedge.cloud.connection import connect, make_client, parse_broker_url
from adaptedge.cloud.mqtt_loop import BufferedSocket, LoopDriver
from adaptedge.simulator.brokers import MosquittoBroker


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
