"""Broker URLs and credentials as MQTT users write them.

``mqtt://HOST:PORT``, ``mqtts://HOST:PORT``, plain ``HOST:PORT`` (mqtt), and credentials in the
URL (``mqtt://user:pass@host:port``, with a warning: the URL shows in ``ps`` and shell history).
Credentials may also come from the environment: ``ADAPTEDGE_MQTT_USERNAME`` and
``ADAPTEDGE_MQTT_PASSWORD_FILE`` (or, less safely, ``ADAPTEDGE_MQTT_PASSWORD``). Precedence:
command-line option, then the URL, then the environment. ``--tls-ca``, ``--tls-cert`` and
``--tls-key`` become the device's ``ssl.SSLContext`` (``tls_context``).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from adaptedge.cli.errors import CommandError

USERNAME_ENV = "ADAPTEDGE_MQTT_USERNAME"
PASSWORD_FILE_ENV = "ADAPTEDGE_MQTT_PASSWORD_FILE"
PASSWORD_ENV = "ADAPTEDGE_MQTT_PASSWORD"


@dataclass(frozen=True)
class BrokerLogin:
    url: str
    """``scheme://host:port`` without credentials."""
    username: str | None
    password: str | None


def read_password_file(path: Path) -> str:
    """The first line of a password file; a missing or empty file is one clear error."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CommandError(f"cannot read the password file {path}: {exc.strerror}") from exc
    if not lines or not lines[0].strip():
        raise CommandError(f"the password file {path} is empty: put the password on its "
                           "first line")
    return lines[0].strip()


def _env_password() -> str | None:
    path = os.environ.get(PASSWORD_FILE_ENV)
    if path:
        return read_password_file(Path(path))
    return os.environ.get(PASSWORD_ENV) or None


def resolve_broker(url: str, *, username: str | None = None,
                   password_file: Path | None = None) -> BrokerLogin:
    """The URL without credentials, and the user name and password to log in with."""
    full = url if "://" in url else f"mqtt://{url}"
    parts = urlsplit(full)
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise CommandError(f"broker URL {url!r} has an invalid port") from exc
    if not host:
        raise CommandError(f"broker URL {url!r} has no host: give mqtt://HOST:PORT or HOST:PORT")
    url_user = unquote(parts.username) if parts.username else None
    url_password = unquote(parts.password) if parts.password is not None else None
    if url_password is not None:
        print("adaptedge: warning: a password in the broker URL shows in ps and the shell "
              "history; --password-file or $ADAPTEDGE_MQTT_PASSWORD_FILE is safer",
              file=sys.stderr)
    netloc = f"[{host}]" if ":" in host else host
    clean = urlunsplit((parts.scheme, netloc + (f":{port}" if port else ""), "", "", ""))
    password = (read_password_file(password_file) if password_file is not None
                else url_password if url_password is not None else _env_password())
    user = username or url_user or os.environ.get(USERNAME_ENV) or None
    if password is not None and user is None:
        raise CommandError("a broker password was given without a user name: add --username, "
                           f"user@ in the URL or ${USERNAME_ENV}")
    return BrokerLogin(clean, user, password)


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context of ``--tls-ca``, ``--tls-cert`` and ``--tls-key`` (None: plain TCP)."""
    if args.tls_ca is None and args.tls_cert is None:
        return None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CommandError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(cafile=str(args.tls_ca) if args.tls_ca else None)
    if args.tls_cert is not None:
        context.load_cert_chain(str(args.tls_cert), str(args.tls_key))
    return context
