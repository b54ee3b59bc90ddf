"""The cloud worker: requests in, micro-batched through the HPC, replies out.

One service core (``cloud/core.py``: decode, dedup, deadlines, shedding, micro-batching, the
HPC call, stats) behind one of two thin transports, chosen by the broker URL:

- ``mqtt://`` / ``mqtts://``: an MQTT broker through paho (``cloud/mqtt_transport.py``),
  workers in one shared-subscription group, one share per bundle served
  (``$share/<group>/<prefix>/v1/+/req/<bundle>``, and the plain ``.../req`` of older devices);
- ``nats://HOST:PORT[,nats://...]``: a NATS cluster through nats-py
  (``cloud/nats_transport.py``), workers in queue groups on ``<prefix>.v1.*.req.<bundle>`` — the
  subjects the devices' MQTT topics map to on a NATS server's MQTT listener.

Before computing, a batch loses what can no longer be answered in time: those requests get
``expired``/``overloaded`` error replies (``cloud/shedding.py``); retained requests are ignored.
Workers are stateless apart from the dedup cache: start any number and the broker spreads the
requests over them.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from typing import Literal

from adaptedge.cloud.errors import CloudError
from adaptedge.cloud.fleet.telemetry import TelemetryInbox
from adaptedge.cloud.service.bundle_pool import BundlePool
from adaptedge.cloud.service.core import ServiceCore
from adaptedge.cloud.service.guard import DEFAULT_RUN_LIMIT_S
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.cloud.transport.connection import MAX_REFUSALS, TlsFiles, parse_broker_url
from adaptedge.cloud.transport.mqtt_transport import MqttTransport
from adaptedge.cloud.transport.nats_transport import NatsTransport
from adaptedge.protocol.topics import DEFAULT_PREFIX, shared

ShareMode = Literal["auto", "on", "off"]


def default_worker_id() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:48] or "host"
    return f"cloud-{host}-{os.getpid()}"


def is_nats_url(broker_url: str) -> bool:
    """A ``nats://`` (or ``tls://``) server list rather than an MQTT broker URL."""
    return broker_url.strip().lower().startswith(("nats://", "tls://"))


class CloudService:
    """A cloud worker for one bundle (or a ``BundlePool`` of several). ``start()`` connects and serves in a background thread;
    ``stop()`` stops taking work, answers what is in flight and disconnects cleanly."""

    def __init__(self, bundle_dir: str | os.PathLike[str] | BundlePool, broker_url: str, *,
                 group: str | None = "adaptedge", max_batch: int = 32, max_wait_ms: float = 2.0,
                 username: str | None = None, password: str | None = None,
                 tls: TlsFiles | None = None, prefix: str = DEFAULT_PREFIX,
                 stats_every_s: float = 10.0, client_id: str | None = None,
                 share: ShareMode = "auto", dedup_capacity: int = 8192,
                 max_queue_ms: float | None = None, max_refusals: int = MAX_REFUSALS,
                 run_limit_s: float = DEFAULT_RUN_LIMIT_S, collect_telemetry: bool = False,
                 logger: logging.Logger | None = None) -> None:
        if share not in ("auto", "on", "off"):
            raise ValueError(f"share must be 'auto', 'on' or 'off', got {share!r}")
        if group is None:
            share = "off"
        if not stats_every_s > 0:
            raise ValueError(f"stats_every_s must be > 0, got {stats_every_s}")
        self.log = logger or logging.getLogger("adaptedge.cloud")
        nats = is_nats_url(broker_url)
        if not nats:
            self.address = parse_broker_url(broker_url)
        self.inference = bundle_dir if isinstance(bundle_dir, BundlePool) else \
            HpcInference.load(bundle_dir, prefix=prefix, run_limit_s=run_limit_s)
        self.worker_id = client_id or default_worker_id()
        self.prefix = prefix
        self.group = group
        self.share_mode: ShareMode = share
        self.stats_every_s = stats_every_s
        if group is not None:
            shared(group, "x")  # validates the group name now
        self.core = ServiceCore(self.inference, self.worker_id, prefix=prefix,
                                max_batch=max_batch, max_wait_ms=max_wait_ms,
                                dedup_capacity=dedup_capacity, max_queue_ms=max_queue_ms,
                                collect_telemetry=collect_telemetry, logger=self.log)
        self.telemetry_topic = self.core.telemetry_topic
        self.telemetry: TelemetryInbox = self.core.telemetry
        self.failure: str | None = None
        """Why the worker stopped on its own (e.g. the broker kept refusing it), else None."""
        self.transport: MqttTransport | NatsTransport
        if nats:
            self.transport = NatsTransport(
                self.core, broker_url, group=group, username=username, password=password,
                tls=tls, stats_every_s=stats_every_s, max_refusals=max_refusals,
                logger=self.log)
        else:
            self.transport = MqttTransport(
                self.core, self.address, group=group, share=share, username=username,
                password=password, tls=tls, stats_every_s=stats_every_s,
                max_refusals=max_refusals, logger=self.log)
        self._stopping = threading.Event()
        self._runner: threading.Thread | None = None
        self._stop_timeout_s = 5.0

    @property
    def shared_subscription(self) -> bool:
        """Whether the broker spreads requests over the group (``$share`` or a queue group)."""
        return self.transport.shared_subscription

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Connect, subscribe, serve in a thread (``CloudError`` if the broker refuses)."""
        if self._runner is not None:
            raise CloudError("this CloudService was already started; create a new one")
        self.transport.open()
        if self.shared_subscription:
            self.log.info("worker %s serving bundle %s on %s", self.worker_id,
                          self.inference.bundle_id, self.transport.description)
        else:
            self.log.info("worker %s serving bundle %s on %s%s", self.worker_id,
                          self.inference.bundle_id, self.transport.description,
                          " (run ONE worker: every worker receives every request)"
                          if self.group is not None else "")
        self.core.started_at = time.monotonic()
        self._runner = threading.Thread(target=self._serve, daemon=True,
                                        name=f"svc[{self.worker_id}].serve_loop")
        self._runner.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop taking work, answer in-flight requests, wait for their acks, disconnect."""
        self._stop_timeout_s = timeout_s
        self._stopping.set()
        if self._runner is not None:
            self._runner.join(timeout_s + 1.0)
            if self._runner.is_alive():
                self.log.warning("worker %s did not stop within %.1f s", self.worker_id, timeout_s)

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the serving thread ends; True if it did."""
        if self._runner is None:
            return True
        self._runner.join(timeout_s)
        return not self._runner.is_alive()

    def stats(self) -> dict[str, float]:
        """Counters now (the percentile window is not reset)."""
        snap = self.core.snapshot(reset_window=False)
        snap.update(self.transport.extra_stats())
        return snap

    def _serve(self) -> None:
        try:
            self.transport.serve(self._stopping, self._stop_timeout_s)
        except CloudError as exc:  # the broker keeps refusing us: stop with one clear line
            self.failure = str(exc)
            self.log.error("worker %s stops: %s", self.worker_id, exc)
            self.transport.close()
        except Exception:
            self.log.exception("worker %s crashed; disconnecting", self.worker_id)
            self.transport.close()
            raise

