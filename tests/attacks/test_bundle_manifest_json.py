"""Issue 15 item 13: hostile manifest.json text is refused with one BundleError line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adaptedge.protocol import BundleError, Manifest, read_manifest, verify
from adaptedge.protocol.bundle_digest import MANIFEST_NAME, manifest_digest


def _body(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / MANIFEST_NAME).read_text())  # type: ignore[no-any-return]


def _with_metadata(bundle: Path, text: str) -> None:
    """Put raw JSON ``text`` in metadata.note, with a matching bundle id when computable."""
    raw = _body(bundle)
    raw["metadata"]["note"] = "@@"
    raw["bundle_id"] = manifest_digest(raw)
    (bundle / MANIFEST_NAME).write_text(json.dumps(raw).replace('"@@"', text))


@pytest.mark.parametrize(("text", "match"), [
    ("[" * 100_000 + "]" * 100_000, "deeper than"),
    ("[" * 1_000 + "]" * 1_000, "deeper than"),
    ("1" * 5_000, "integer of 5000 digits"),
    ("1e400", "out of range"),
    ("NaN", "NaN"),
    ('{"a": 1, "a": 2}', "key 'a' twice"),
])
def test_hostile_json_is_one_bundle_error(toy_bundle: tuple[Path, Manifest], text: str,
                                          match: str) -> None:
    path, _ = toy_bundle
    _with_metadata(path, text)
    with pytest.raises(BundleError, match=match):
        verify(path)


def test_duplicate_top_level_keys_are_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    """Two readers must never disagree on the manifest: the first hpc.file would pass review."""
    path, _ = toy_bundle
    text = (path / MANIFEST_NAME).read_text()
    (path / MANIFEST_NAME).write_text(text.replace('"hpc": {', '"hpc": {"file": "a.onnx", ', 1))
    with pytest.raises(BundleError, match="key 'file' twice"):
        read_manifest(path)


def test_a_huge_integer_in_a_number_field_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    raw = _body(path)
    raw["link"]["rtt_ms"] = 10**400
    with pytest.raises(BundleError, match=r"link\.rtt_ms: must be a finite number"):
        Manifest.from_dict(raw)


def test_not_utf8_is_refused(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    (path / MANIFEST_NAME).write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(BundleError, match="not UTF-8"):
        read_manifest(path)


def test_inspect_reports_deep_nesting_in_one_line(toy_bundle: tuple[Path, Manifest]) -> None:
    path, _ = toy_bundle
    _with_metadata(path, "[" * 100_000 + "]" * 100_000)
    out = subprocess.run([sys.executable, "-m", "adaptedge.cli.main", "inspect", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "deeper than" in lines[0], out.stderr[-500:]


@pytest.mark.parametrize("deadline", [1e300, 3_600_001.0, 0.0, -5.0])
def test_an_unbounded_link_deadline_is_refused_at_load_in_one_line(
        toy_bundle: tuple[Path, Manifest], deadline: float,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31 item 6: ``link.deadline_ms = 1e300`` passed inspect, cloud serve and edge run,
    then every escalation failed on an OverflowError. Refused where the manifest is read."""
    from adaptedge.cli.main import main as cli

    path, _ = toy_bundle
    raw = _body(path)
    raw["link"]["deadline_ms"] = deadline
    raw["bundle_id"] = manifest_digest(raw)
    (path / MANIFEST_NAME).write_text(json.dumps(raw))
    with pytest.raises(BundleError, match=r"link\.deadline_ms"):
        read_manifest(path)
    assert cli(["inspect", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "deadline_ms" in err and "\n" not in err
