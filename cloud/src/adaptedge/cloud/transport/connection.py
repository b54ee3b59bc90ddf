"""Connecting a paho-mqtt 2 client the way every adaptedge cloud client must: MQTT 3.1.1,
callback API v2, TCP_NODELAY, optional username/password and TLS, refusals as ``CloudError``."""

from __future__ import annotations

import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from adaptedge.cloud.errors import CloudError
from adaptedge.protocol.broker_url import split_broker_url

MAX_INFLIGHT = 1024
"""Unacknowledged QoS 1 publishes paho keeps on the wire (its default of 20 throttles replies)."""
MAX_REFUSALS = 6
"""Refused reconnections in a row after which a worker gives up (about 3 s of back-off)."""


class BrokerRefused(CloudError):
    """The broker answered the CONNECT with a refusal (credentials, authorisation)."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool = False


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """TLS settings: a CA bundle to trust (None: the system store) and an optional client cert."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a TLS client certificate needs both --tls-cert and --tls-key")


def parse_broker_url(url: str) -> BrokerAddress:
    """The broker's address (``protocol.broker_url``: the port defaults by scheme)."""
    try:
        return BrokerAddress(*split_broker_url(url))
    except ValueError as exc:
        raise CloudError(str(exc)) from None


Loop = Callable[[float], MQTTErrorCode]
"""One pass of a client's network loop with a timeout in seconds (``client.loop`` or
``mqtt_step.NetworkLoop.step``)."""


def _nodelay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    # paho leaves Nagle on: 40-90 ms stalls per round trip without this (TOOLCHAIN.md).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def make_client(client_id: str, *, username: str | None = None, password: str | None = None,
                tls: TlsFiles | None = None, use_tls: bool = False) -> mqtt.Client:
    """A configured, unconnected MQTT 3.1.1 client (clean session) with TCP_NODELAY."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv311, clean_session=True)
    client.on_socket_open = _nodelay
    client.max_inflight_messages_set(MAX_INFLIGHT)
    if username is not None:
        client.username_pw_set(username, password)
    if tls is not None or use_tls:
        tls = tls or TlsFiles()
        client.tls_set(ca_certs=tls.ca, certfile=tls.cert, keyfile=tls.key,
                       cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
    return client


def connect(client: mqtt.Client, address: BrokerAddress, *, keepalive: int = 30,
            timeout_s: float = 10.0, loop: Loop | None = None) -> None:
    """Connect and wait for the CONNACK, driving the client's loop in this thread with
    ``loop`` (default ``client.loop``; a worker passes its ``mqtt_step.NetworkLoop.step``).

    Raises ``CloudError`` when the broker is unreachable or refuses (e.g. bad credentials).
    """
    outcome: list[Any] = []
    previous = client.on_connect
    loop = loop or client.loop

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        outcome.append(reason)

    client.on_connect = on_connect
    try:
        try:
            client.connect(address.host, address.port, keepalive=keepalive)
        except (OSError, ssl.SSLError) as exc:
            raise CloudError(f"cannot reach the MQTT broker at {address.host}:{address.port} "
                             f"({exc}): check --broker and that the broker is running") from exc
        deadline = time.monotonic() + timeout_s
        while not outcome and time.monotonic() < deadline:
            rc = loop(0.05)
            if rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS,) and not outcome:
                raise CloudError(f"the broker at {address.host}:{address.port} closed the "
                                 f"connection during the handshake ({mqtt.error_string(rc)}): "
                                 "check credentials, TLS settings and the broker log")
        if not outcome:
            raise CloudError(f"no CONNACK from {address.host}:{address.port} within "
                             f"{timeout_s:g} s")
        reason = outcome[0]
        if reason.is_failure:
            raise BrokerRefused(f"the broker at {address.host}:{address.port} refused the "
                                f"connection: {reason} (check --username/--password-file and "
                                "the broker's password and ACL files)")
    except CloudError:
        _close(client, loop)  # no socket left open behind a failed attempt
        raise
    finally:
        client.on_connect = previous


def _close(client: mqtt.Client, loop: Loop) -> None:
    """Disconnect and let paho write the DISCONNECT and close its socket (bounded)."""
    client.disconnect()
    for _ in range(5):
        if loop(0.01) != MQTTErrorCode.MQTT_ERR_SUCCESS:
            return


class ReconnectPacer:
    """Backs off when connections keep dropping soon after they are made: another client with
    the same client id (two workers given one account under mosquitto's
    ``use_username_as_clientid``, or one ``--client-id``) takes the session over each time,
    and without a pause the two would disconnect each other thousands of times a minute."""

    def __init__(self, *, stable_s: float = 10.0, first_s: float = 0.5,
                 max_delay_s: float = 30.0) -> None:
        self.stable_s, self.first_s, self.max_delay_s = stable_s, first_s, max_delay_s
        self._connected_at: float | None = None
        self.delay_s = 0.0
        self.early_drops = 0

    def connected(self, now: float) -> None:
        self._connected_at = now

    def lost(self, now: float) -> float:
        """Seconds to wait before reconnecting: 0 after a connection that lasted
        ``stable_s``, else doubling from ``first_s`` up to ``max_delay_s``."""
        lasted = None if self._connected_at is None else now - self._connected_at
        self._connected_at = None
        if lasted is None or lasted >= self.stable_s:
            self.delay_s = 0.0
            return 0.0
        self.early_drops += 1
        self.delay_s = min(self.max_delay_s, max(self.first_s, 2 * self.delay_s))
        return random.uniform(0.75, 1.0) * self.delay_s


def reconnect(client: mqtt.Client, address: BrokerAddress, stopping: threading.Event,
              log: logging.Logger, *, max_refusals: int = MAX_REFUSALS, min_delay_s: float = 0.1,
              max_delay_s: float = 5.0, loop: Loop | None = None) -> bool:
    """Reconnect with jittered exponential back-off (one log line per back-off) until
    connected (True) or ``stopping`` is set (False). An unreachable broker is retried for as
    long as it takes; ``max_refusals`` refusals in a row raise ``BrokerRefused``. ``loop``
    as for ``connect``."""
    delay, refusals = min_delay_s, 0
    while not stopping.is_set():
        try:
            connect(client, address, loop=loop)
            return True
        except BrokerRefused as exc:
            refusals += 1
            if refusals >= max_refusals:
                raise BrokerRefused(f"{exc}; gave up after {refusals} refused reconnections "
                                    "in a row") from None
            problem = str(exc)
        except CloudError as exc:
            refusals, problem = 0, str(exc)
        wait = random.uniform(0.5, 1.0) * delay
        log.warning("reconnect failed (%s); retrying in %.2f s", problem, wait)
        stopping.wait(wait)
        delay = min(delay * 2, max_delay_s)
    return False
