"""Broker URLs, one reading for devices and the cloud: ``mqtt://HOST[:PORT]`` (also ``tcp://``),
``mqtts://HOST[:PORT]`` (also ``ssl://``, TLS) or a bare ``HOST:PORT``; the port defaults by
scheme (1883 plain, 8883 TLS)."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ssl": 8883}


def split_broker_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)``; ``ValueError`` saying what is wrong (each boundary wraps it in its
    own error family)."""
    parts = urlsplit(url if "://" in url else f"mqtt://{url}")
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"broker URL {url!r} is not mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError as exc:
        raise ValueError(f"broker URL {url!r} has an invalid port") from exc
    return parts.hostname, port, parts.scheme in ("mqtts", "ssl")
