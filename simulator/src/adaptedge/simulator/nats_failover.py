"""The node-failure run: a three-node NATS cluster, MQTT devices spread over the nodes, two cloud
workers in one queue group on different nodes; one node is killed (SIGKILL) mid-run.

Each device is an ``edge.MqttUplink`` listing every node's MQTT listener (its own first) and
sends requests at a fixed rate, one ``exchange`` at a time, each with a deadline: its final
answer is the cloud's reply, or its own degraded answer at the deadline (no reply, or an error
reply). The run counts, from the devices' side: ``requests``, ``answered_cloud``,
``answered_degraded``, ``lost`` (no final answer at all), ``duplicated`` (a request with more
than one final answer) and the replies the uplinks dropped as duplicate or late; and
``recovery_s``: from the kill until the cloud-answer rate (cloud answers per second over all
devices) is back: every later window of ``WINDOW_S`` has at least ``RECOVERED`` of the
pre-kill rate. Devices use ``qos=0`` by default (see ``edge/mqtt_uplink.py``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptedge.cloud.service.worker import CloudService
from adaptedge.edge.mqtt_uplink import MqttUplink
from adaptedge.protocol.features import pack_features
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import InferenceReply, InferenceRequest
from adaptedge.simulator.nats_cluster import LocalNatsCluster

WINDOW_S = 1.0
RECOVERED = 0.9
DEVICES = ("dev1", "dev2", "dev3")


@dataclass
class DeviceLog:
    """What one device saw: per request, when it was sent (s since the run began) and how it
    was answered ("cloud" or "degraded")."""

    sent_at: list[float] = field(default_factory=list)
    outcome: dict[int, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def rotated(urls: list[str], first: int) -> list[str]:
    return urls[first:] + urls[:first]


def _device_loop(uplink: MqttUplink, manifest: Manifest, log: DeviceLog, *, start: float,
                 rate: float, duration_s: float, deadline_s: float,
                 stop: threading.Event) -> None:
    n = len(manifest.feature_names)
    feats, mask = pack_features(np.linspace(0.1, 1.0, n), np.ones(n))
    rid, due = 0, start
    while (now := time.monotonic()) - start < duration_s and not stop.is_set():
        if due > now:
            time.sleep(due - now)
        due = max(due + 1.0 / rate, time.monotonic())  # a device behind does not burst
        request = InferenceRequest(rid, uplink.device_id, manifest.bundle_id, time.time(),
                                   deadline_s * 1000.0, feats, mask)
        log.sent_at.append(time.monotonic() - start)
        try:
            reply = uplink.exchange(request, time.monotonic() + deadline_s)
            kind = "cloud" if isinstance(reply, InferenceReply) else "degraded"
            log.outcome.setdefault(rid, []).append(kind)
        except Exception as exc:  # counted as lost: no final answer
            log.errors.append(repr(exc))
        rid += 1


def recovery_seconds(logs: list[DeviceLog], kill_at: float, end: float) -> float | None:
    """Seconds after the kill until the cloud-answer rate (cloud answers per second, by send
    time, over all devices) is back: every later window of ``WINDOW_S`` up to ``end`` has at
    least ``RECOVERED`` of the pre-kill rate. None if it never is. Safe while the devices
    still run: a request sent before ``end`` and not yet answered counts as not the cloud's."""
    sent_lists = [list(x.sent_at) for x in logs]  # copies: the devices may be appending
    sent = np.concatenate([np.asarray(s) for s in sent_lists])
    cloud = np.concatenate([np.asarray([x.outcome.get(i, ["lost"])[0] == "cloud"
                                        for i in range(len(s))], dtype=bool)
                            for x, s in zip(logs, sent_lists, strict=True)])
    warm = min(0.5, kill_at / 2)  # the first requests meet a cold start
    baseline = float(np.count_nonzero(cloud & (sent >= warm) & (sent < kill_at))) / \
        max(kill_at - warm, 1e-9)
    edges = np.arange(kill_at, end - WINDOW_S, WINDOW_S)  # the last, partial window is out
    ok = [np.count_nonzero(cloud & (sent >= lo) & (sent < lo + WINDOW_S)) / WINDOW_S
          >= RECOVERED * baseline for lo in edges]
    for k in range(len(ok)):
        if all(ok[k:]):
            return float(edges[k] - kill_at)
    return None


def run_node_failure(bundle: Path, manifest: Manifest, *, rate_per_device: float = 40.0,
                     duration_s: float = 6.0, kill_after_s: float = 2.0,
                     deadline_ms: float = 300.0, kill_node: int = 0,
                     qos: int = 0, settled_s: float | None = None) -> dict[str, Any]:
    """Run it; returns the counts (see the module docstring) and the cluster's setup.
    ``settled_s``: end the run early, once the cloud-answer rate has been back for that long
    (``duration_s`` stays the longest run)."""
    with LocalNatsCluster(3, list(DEVICES), workers=2) as cluster:
        nats_urls = [n.url for n in cluster.nodes]
        mqtt_urls = [n.mqtt_url for n in cluster.nodes]
        workers = [CloudService(bundle, ",".join(rotated(nats_urls, i)), username=w,
                                password=cluster.password(w), client_id=w, stats_every_s=3600)
                   for i, w in enumerate(cluster.workers)]  # worker i starts on node i
        uplinks = [MqttUplink(rotated(mqtt_urls, i), d, username=d, password=cluster.password(d),
                              client_id=d, reconnect_min_s=0.05, reconnect_max_s=0.5,
                              qos=qos)
                   for i, d in enumerate(DEVICES)]  # device i starts on node i
        try:
            for w in workers:
                w.start()
            for u in uplinks:
                u.start()
                if not u.wait_connected(20.0):
                    raise RuntimeError(f"{u.device_id} did not connect: {u.last_error}")
            time.sleep(0.3)  # reply subscriptions in place
            logs = [DeviceLog() for _ in uplinks]
            start, stop = time.monotonic(), threading.Event()
            threads = [threading.Thread(target=_device_loop, args=(u, manifest, log), kwargs={
                "start": start, "rate": rate_per_device, "duration_s": duration_s,
                "deadline_s": deadline_ms / 1000.0, "stop": stop}, daemon=True)
                for u, log in zip(uplinks, logs, strict=True)]
            for t in threads:
                t.start()
            time.sleep(max(0.0, start + kill_after_s - time.monotonic()))
            kill_at = time.monotonic() - start
            cluster.kill(kill_node)
            if settled_s is not None:
                _stop_once_settled(logs, stop, start=start, kill_at=kill_at, settled_s=settled_s,
                                   until=start + duration_s, deadline_s=deadline_ms / 1000.0)
            for t in threads:
                t.join(duration_s + 30.0)
            end = time.monotonic() - start
            counters = [u.counters for u in uplinks]
            stats = [w.stats() for w in workers]
        finally:
            for u in uplinks:
                u.close()
            for w in workers:
                w.stop(timeout_s=2.0)
    return summarize(logs, counters, stats, kill_at=kill_at, end=end, deadline_ms=deadline_ms,
                     rate=rate_per_device, kill_node=cluster.nodes[kill_node].name,
                     qos=qos)


def _stop_once_settled(logs: list[DeviceLog], stop: threading.Event, *, start: float,
                       kill_at: float, settled_s: float, until: float,
                       deadline_s: float) -> None:
    """Set ``stop`` once the cloud-answer rate has been back for ``settled_s`` (checked twice a
    second, on the requests whose deadline has passed), or at ``until``."""
    while time.monotonic() < until:
        time.sleep(0.5)
        answered_by = time.monotonic() - start - deadline_s
        back = recovery_seconds(logs, kill_at, answered_by)
        if back is not None and answered_by - (kill_at + back) >= settled_s:
            break
    stop.set()


def summarize(logs: list[DeviceLog], counters: list[Any], stats: list[dict[str, float]], *,
              kill_at: float, end: float, deadline_ms: float, rate: float,
              kill_node: str, qos: int) -> dict[str, Any]:
    outcomes = Counter(kinds[0] for log in logs for kinds in log.outcome.values())
    requests = sum(len(log.sent_at) for log in logs)
    recovery = recovery_seconds(logs, kill_at, end)
    return {
        "requests": requests,
        "answered_cloud": outcomes["cloud"],
        "answered_degraded": outcomes["degraded"],
        "lost": requests - sum(len(log.outcome) for log in logs),
        "duplicated": sum(len(k) - 1 for log in logs for k in log.outcome.values()),
        "recovery_s": None if recovery is None else round(recovery, 3),
        "duplicate_replies_dropped": int(sum(c["duplicate_replies"] for c in counters)),
        "late_replies_dropped": int(sum(c["late_replies"] for c in counters)),
        "resent": int(sum(c["resent"] for c in counters)),
        "failovers": int(sum(c["failovers"] for c in counters)),
        "worker_replies": [int(s["replies"]) for s in stats],
        "worker_reconnects": [int(s.get("reconnects", 0)) for s in stats],
        "device_errors": [e for log in logs for e in log.errors][:5],
        "setup": {"nodes": 3, "devices": len(logs), "workers": len(stats),
                  "killed": kill_node, "kill_at_s": round(kill_at, 3),
                  "duration_s": round(end, 3), "rate_per_device": rate,
                  "deadline_ms": deadline_ms, "device_qos": qos, "window_s": WINDOW_S,
                  "recovered_at": RECOVERED},
    }
