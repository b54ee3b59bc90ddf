"""The gas drift scenario in the loop (hardware in the loop, ``simulator.hil``): real mosquitto,
``cloud serve --db --metrics-port`` and an ``edge run --outbox --audit-fraction`` device.

1. **Phase 1** (the deployed bundle): the batches 1-2 test rows, then the first rows of a
   subsample of batch 3. The device drains its escalated and audit rows to the fleet store;
   the cloud's live drift monitor (``cloud.live_drift``) raises alarms from the stored audits
   and the device telemetry. The Prometheus text is scraped during the run.
2. **Recalibrate**: ``adaptedge recalibrate --db`` on the rows phase 1 stored.
3. **Phase 2**: the rest of the stream (the rest of the batch 3 subsample, then subsamples of
   batches 4, 5, 6, 8, 9) through the loop twice, with the deployed and the recalibrated
   bundle, each with its own store.

Rows are written as a CSV file (all tagged ``test``, in stream order) that the device replays
(``edge run --replay FILE --target label``). Truth labels only score.
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.edge.journal import read_journal
from adaptedge.protocol.bundle import verify
from adaptedge.simulator.hil import HilOptions, run_hil
from adaptedge.simulator.processes import adaptedge_command
from adaptedge.simulator.records import RunResult

DEVICE = "dev-0"
TARGET = "label"


@dataclass(frozen=True)
class HilDriftConfig:
    """What the HIL drift run's numbers depend on (seeds stated; rows per phase bounded)."""

    audit_fraction: float = 0.05
    audit_seed: int = 0
    rate_hz: float = 50.0
    telemetry_every_s: float = 1.0
    early_rows: int | None = None
    """Batches 1-2 test rows streamed first (None: all of them)."""
    batch3_rows: int = 800
    """Evenly spaced rows of batch 3 (in time order) ..."""
    phase1_batch3: int = 600
    """... of which the first this many end phase 1; the rest open phase 2."""
    per_batch: int = 120
    """Evenly spaced rows of each later batch (4, 5, 6, 8, 9) in phase 2."""
    timeout_s: float = 600.0


def evenly(index: npt.NDArray[np.int64], n: int | None) -> npt.NDArray[np.int64]:
    """``n`` evenly spaced entries of ``index``, in order (all when ``n`` is None or larger)."""
    if n is None or n >= len(index):
        return index
    return index[np.linspace(0, len(index) - 1, n).round().astype(np.int64)]


def phases(batch: npt.NDArray[np.int64], drift_start: int, config: HilDriftConfig
           ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Stream indices of phase 1 (early test rows + the first rows of the batch 3 subsample)
    and phase 2 (the rest of it + subsamples of the later batches), each in time order."""
    early = evenly(np.arange(drift_start), config.early_rows)
    b3 = evenly(np.flatnonzero(batch == 3), config.batch3_rows)
    later = [evenly(np.flatnonzero(batch == b), config.per_batch)
             for b in np.unique(batch[drift_start:]) if b != 3]
    return (np.concatenate([early, b3[:config.phase1_batch3]]),
            np.concatenate([b3[config.phase1_batch3:], *later]))


def write_rows_csv(path: Path, feature_names: Sequence[str], classes: Sequence[str],
                   X: npt.NDArray[np.float32], y: npt.NDArray[np.int64],
                   filler: tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]) -> Path:
    """The rows as a CSV file ``edge run --replay FILE --target label`` replays in order (its
    ``test`` split). A CSV split needs train and validation rows too: ``filler`` (training
    rows, never replayed) gives one of each."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*feature_names, TARGET, "split"])
        tagged = [(filler[0][:2], filler[1][:2], ["train", "validation"]),
                  (X, y, ["test"] * len(y))]
        for rows, labels, tags in tagged:
            for row, label, tag in zip(rows.tolist(), labels.tolist(), tags, strict=True):
                writer.writerow([*(repr(float(v)) for v in row), classes[label], tag])
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def scraping(port: int, every_s: float = 0.5) -> Iterator[dict[str, Any]]:
    """Scrape ``http://127.0.0.1:port/metrics`` in the background; the dict gets the last
    text (``text``) and how many scrapes answered (``scrapes``)."""
    seen: dict[str, Any] = {"text": "", "scrapes": 0}
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    seen["text"] = r.read().decode()
                    seen["scrapes"] += 1
            except OSError:
                continue

    thread = threading.Thread(target=loop, name="metrics-scrape", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=5)


def metric_total(text: str, name: str) -> float:
    """Sum of a metric's samples in Prometheus text (raises on invalid text)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


def run_phase(bundle: Path, rows_csv: Path, truth: npt.NDArray[np.int64], work: Path,
              config: HilDriftConfig) -> dict[str, Any]:
    """One HIL run of ``rows_csv`` with a fresh SQLite store; the decisions, the store's
    alarms and rows, the device's counters, the last Prometheus scrape."""
    work.mkdir(parents=True, exist_ok=True)
    db, port = f"sqlite:///{work / 'fleet.db'}", free_port()
    options = HilOptions(
        devices=1, broker="mosquitto", split="test", target=TARGET, rate_hz=config.rate_hz,
        timeout_s=config.timeout_s, workdir=work,
        cloud_args=("--db", db, "--metrics-port", str(port)),
        device_args=("--outbox", str(work / "outbox-{device}"), "--audit-fraction",
                     f"{config.audit_fraction:g}", "--audit-seed", str(config.audit_seed),
                     "--telemetry-every", f"{config.telemetry_every_s:g}", "--drain-wait", "60"))
    with scraping(port) as seen:
        run = run_hil(bundle, str(rows_csv), options=options, truth=truth)
    journal = read_journal(work / f"{DEVICE}.json")
    with FleetStore(db) as store:
        alarms = store.alarms()
        rows = store.labelled_rows(device=DEVICE)
    return {"run": run, "db": db, "journal": journal, "alarms": alarms, "rows": rows,
            "metrics_text": seen["text"], "scrapes": seen["scrapes"]}


def decisions_by(journal: list[dict[str, Any]], wall_time: float) -> int:
    """How many decisions the device had started by ``wall_time`` (its journal's clock)."""
    start = next(r["started_at"] for r in journal if r.get("kind") == "start")
    return sum(1 for r in journal
               if r.get("kind") == "decision" and start + float(r["t_s"]) <= wall_time)


def device_counters(journal: list[dict[str, Any]]) -> dict[str, float]:
    """The device's last counters line (decisions, audits and what they cost, the backlog)."""
    lines = [r["counters"] for r in journal if r.get("kind") == "counters"]
    return dict(lines[-1]) if lines else {}


def recalibrate_from_store(bundle: Path, db: str, out: Path, audit_fraction: float,
                           timeout_s: float = 600.0) -> dict[str, Any]:
    """``adaptedge recalibrate --bundle B --db URL --out B2 --json`` (its printed choice)."""
    proc = subprocess.run(
        adaptedge_command("recalibrate", "--bundle", str(bundle), "--db", db, "--out", str(out),
                          "--audit-fraction", f"{audit_fraction:g}", "--force", "--json"),
        capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"adaptedge recalibrate failed: {proc.stderr.strip()[-600:]}")
    verify(out)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def accuracy_by_batch(run: RunResult, batch: npt.NDArray[np.int64]) -> dict[str, float]:
    hits = run.labels() == run.truth()
    return {str(int(b)): float(hits[batch == b].mean()) for b in np.unique(batch)}


def escalation_by_batch(run: RunResult, batch: npt.NDArray[np.int64]) -> dict[str, float]:
    esc = np.asarray(run.columns.escalated, dtype=bool)
    return {str(int(b)): float(esc[batch == b].mean()) for b in np.unique(batch)}


def elapsed(started: float) -> float:
    return round(time.perf_counter() - started, 1)
