"""Helpers of ``edge.mqtt_uplink``: broker URL lists, paho socket and publish details."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode

from adaptedge.edge.errors import UplinkConfigError
from adaptedge.protocol.broker_url import split_broker_url


def parse_broker_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)`` of a broker URL (``protocol.broker_url``)."""
    try:
        return split_broker_url(url)
    except ValueError as exc:
        raise UplinkConfigError(str(exc)) from None


def parse_broker_urls(urls: str | Sequence[str]) -> list[tuple[str, int, bool]]:
    """Every broker of a comma-separated list (or a sequence); all TLS or all plain."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    brokers = [parse_broker_url(u.strip()) for u in items if u.strip()]
    if not brokers:
        raise UplinkConfigError("no broker URL given: mqtt://HOST:PORT[,mqtt://HOST:PORT...]")
    if len({tls for _, _, tls in brokers}) > 1:
        raise UplinkConfigError("the broker list mixes TLS and plain URLs: use one scheme")
    return brokers


def acknowledged(info: mqtt.MQTTMessageInfo | None) -> bool:
    """The broker acknowledged this publish (QoS 1) or it was written out (QoS 0); paho
    raises on ``is_published`` for a publish that failed."""
    if info is None or info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
        return False
    try:
        return bool(info.is_published())
    except (RuntimeError, ValueError):  # the connection was lost meanwhile
        return False


def close_sockets_of(exc: BaseException) -> None:
    """Close sockets a failed connect left open (paho does not close a socket whose TLS
    handshake failed; it would linger until garbage collection)."""
    tb = exc.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, socket.socket) and value.fileno() != -1:
                with contextlib.suppress(OSError):
                    value.close()
        tb = tb.tb_next


def set_nodelay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not TCP (unix/websocket transports)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def write_queued(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """paho's ``on_socket_register_write``: nothing to do. Its presence makes a publish queue
    the packet for the network loop (woken through paho's socketpair) instead of writing it
    from the publishing thread."""
