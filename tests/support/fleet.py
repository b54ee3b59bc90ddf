"""Helpers of the fleet-loop tests: a ``cloud serve --db`` process, bounded waits, outboxes."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from adaptedge.edge import EdgeRuntime, Outbox

REPO = Path(__file__).resolve().parents[2]


def start_cloud(bundle: Path, url: str, db: Path | str, log: Path, *extra: str,
                name: str = "fleet-cloud") -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "adaptedge.cli.main", "cloud", "serve", "--bundle", str(bundle),
           "--broker", url, "--client-id", name, "--stats-every", "0.2", "--db", str(db),
           *extra]
    with log.open("ab") as fh:
        return subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)


def wait_ready(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 30.0) -> str:
    """Wait for the worker's "ready" line; the log so far."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text()
        if "ready" in text.split("storing records")[-1]:
            return text
        assert proc.poll() is None, f"cloud serve exited early: {text[-2000:]}"
        time.sleep(0.05)
    raise AssertionError(f"cloud serve not ready in {timeout_s} s: {log.read_text()[-2000:]}")


def metrics_port(log_text: str) -> int:
    found = re.findall(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", log_text)
    assert found, f"no metrics line in the log: {log_text[-1000:]}"
    return int(found[-1])


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def offline_outbox(bundle: Path, folder: Path, n_rows: int, device: str = "dev1") -> int:
    """An outbox filled by an offline device (walk policy: escalations kept with what was
    measured); the number of records."""
    outbox = Outbox(folder)
    rows = np.random.default_rng(3).normal(scale=2.0, size=(n_rows, 3)).astype(np.float32)
    with EdgeRuntime.load(bundle, operating_point="walk", device_id=device,
                          outbox=outbox) as rt:
        for row in rows:
            rt.predict_row(row)
    return len(outbox)


PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def postgres_unreachable() -> str | None:
    """Why the PostgreSQL of the tests (127.0.0.1:5432, user postgres, db test) cannot be
    used, or None."""
    import socket

    from sqlalchemy import create_engine, text

    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            pass
    except OSError as exc:
        return f"no PostgreSQL on 127.0.0.1:5432 ({exc})"
    try:
        engine = create_engine(PG_ADMIN)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
    except Exception as exc:  # a server that refuses us: say why
        return f"PostgreSQL on 127.0.0.1:5432 refused user postgres, db test ({exc})"
    return None


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database (its URL), dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"fleet_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
