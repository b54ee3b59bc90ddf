"""MQTT brokers on 127.0.0.1 for tests, benchmarks, HIL and the demo.

``MosquittoBroker`` launches the ``mosquitto`` binary on a free loopback port with its own
config (optionally a password file and ACL); it can be paused (SIGSTOP), stopped and
restarted on the same port. ``AmqttBroker`` runs the embedded pure-Python broker in a
background thread (MQTT 3.1.1 only; delivers nothing to ``$share`` subscriptions).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from adaptedge.simulator.errors import BrokerError as BrokerError
from adaptedge.simulator.processes import terminate

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise BrokerError(f"nothing is listening on {HOST}:{port} after {timeout_s:g} s")


class Broker(Protocol):
    host: str
    port: int
    supports_shared_subscriptions: bool

    @property
    def url(self) -> str: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


class _Context:
    def __enter__(self) -> Any:
        self.start()  # type: ignore[attr-defined]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()  # type: ignore[attr-defined]


class MosquittoBroker(_Context):
    """A private mosquitto on 127.0.0.1 with TCP_NODELAY, no persistence, its own log file."""

    supports_shared_subscriptions = True

    def __init__(self, port: int | None = None, *, password_file: Path | None = None,
                 acl_file: Path | None = None, binary: str | None = None,
                 max_queued_messages: int = 100_000) -> None:
        found = binary or shutil.which("mosquitto") or (
            "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
        if not found:
            raise BrokerError("mosquitto is not installed: apt-get install -y mosquitto "
                              "(or use the embedded broker: pip install 'adaptedge[broker]')")
        self.binary = found
        self.host = HOST
        self.port = port or free_port()
        self.password_file = password_file
        self.acl_file = acl_file
        self.max_queued_messages = max_queued_messages
        self.workdir = Path(tempfile.mkdtemp(prefix="adaptedge-mosquitto-"))
        self.log_path = self.workdir / "mosquitto.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def config_text(self) -> str:
        lines = [
            f"listener {self.port} {HOST}",
            "set_tcp_nodelay true",
            "persistence false",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            f"max_queued_messages {self.max_queued_messages}",
            "max_inflight_messages 0",
        ]
        if os.geteuid() == 0:
            lines.append("user root")
        if self.password_file is not None:
            lines += ["allow_anonymous false", f"password_file {self.password_file}"]
        else:
            lines.append("allow_anonymous true")
        if self.acl_file is not None:
            lines.append(f"acl_file {self.acl_file}")
        return "\n".join(lines) + "\n"

    def start(self, timeout_s: float = 10.0) -> None:
        if self.running:
            return
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(self.config_text())
        self._proc = subprocess.Popen([self.binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        try:
            wait_for_port(self.port, timeout_s)
        except BrokerError:
            self.stop()
            log = self.log_path.read_text() if self.log_path.exists() else ""
            raise BrokerError(
                f"mosquitto did not start on port {self.port}: {log[-500:]}") from None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open but nothing is answered."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        terminate(proc)
        if proc.stderr is not None:
            proc.stderr.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


class AmqttBroker(_Context):
    """The embedded amqtt broker in a daemon thread with its own event loop (127.0.0.1 only)."""

    supports_shared_subscriptions = False

    def __init__(self, port: int | None = None) -> None:
        self.host = HOST
        self.port = port or free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Any = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        try:
            from amqtt.broker import Broker as _AmqttBroker
        except ImportError as exc:
            raise BrokerError(
                "the embedded broker needs amqtt: pip install 'adaptedge[broker]'") from exc
        import logging

        logging.getLogger("amqtt").setLevel(logging.CRITICAL)  # probes log "No data" errors
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{HOST}:{self.port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                self._broker = _AmqttBroker(config)
                await self._broker.start()

            try:
                loop.run_until_complete(boot())
            except BaseException as exc:  # reported to the starting thread
                self._error = exc
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name="amqtt-broker", daemon=True)
        self._thread.start()
        ready.wait(timeout_s)
        if self._error is not None:
            raise BrokerError(f"embedded broker failed to start: {self._error}") from self._error
        if not ready.is_set():
            raise BrokerError(f"embedded broker did not start within {timeout_s:g} s")
        # No connect probe: amqtt leaves a probe's half-open session unclosed (ResourceWarning);
        # ``Broker.start()`` has returned, so the listener is bound.

    def stop(self) -> None:
        loop, broker = self._loop, self._broker
        if loop is None or broker is None:
            return
        future = asyncio.run_coroutine_threadsafe(broker.shutdown(), loop)
        with contextlib.suppress(Exception):
            future.result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = self._broker = self._thread = None


def best_available_broker(port: int | None = None) -> MosquittoBroker | AmqttBroker:
    """mosquitto when it is installed, else the embedded amqtt broker."""
    if shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists():
        return MosquittoBroker(port)
    return AmqttBroker(port)
