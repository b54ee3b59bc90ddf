"""Issue 31 item 6: what a device writes holds sensor readings: outbox records and
``--json-out`` journals are the owner's only (0600), whatever the umask."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptedge.edge.journal import DecisionJournal
from adaptedge.edge.outbox import Outbox
from adaptedge.protocol import InferenceRequest
from adaptedge.protocol.features import pack_features


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the common default: files 0644 unless asked otherwise
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_outbox_records_are_private(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox")
    feats, mask = pack_features([1.0, 2.0, 3.0], [True] * 3)
    path = outbox.record(InferenceRequest(1, "dev1", "b1", time.time(), 250.0, feats, mask))
    assert path is not None and mode(path) == 0o600
    assert mode(tmp_path / "outbox") == 0o700


def test_journals_are_private_new_or_replaced(tmp_path: Path) -> None:
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    old.write_text("earlier run\n")
    old.chmod(0o644)
    for path in (new, old):
        with DecisionJournal(path) as journal:
            journal.write("start", {"device": "dev1"})
        assert mode(path) == 0o600, path
