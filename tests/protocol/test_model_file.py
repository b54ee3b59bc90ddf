"""zlib-compressed model files (``protocol.model_file``): round trip, damage refused, schema 3."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

import adaptedge.protocol.model_file as model_file
from adaptedge.protocol import BundleError, Manifest
from adaptedge.protocol.model_file import compress_model, model_bytes

DATA = Path(__file__).parent / "data"


def test_round_trip_and_plain_files_unchanged() -> None:
    data = b"onnx" * 5000
    stored = compress_model(data)
    assert len(stored) < len(data) // 10
    assert model_bytes("m.onnx.zlib", stored) == data
    assert model_bytes("m.onnx", stored) is stored  # a plain file is its own bytes


def test_damaged_or_oversized_stream_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BundleError, match="not a zlib stream") as info:
        model_bytes("m.onnx.zlib", b"not zlib at all")
    assert info.value.path == "m.onnx.zlib"
    with pytest.raises(BundleError, match="does not decompress to one model"):
        model_bytes("m.onnx.zlib", compress_model(b"x" * 1000)[:-6])  # truncated
    monkeypatch.setattr(model_file, "MAX_MODEL_BYTES", 1000)
    with pytest.raises(BundleError, match="at most 1000 bytes"):
        model_bytes("m.onnx.zlib", zlib.compress(b"\0" * 100_000))  # a small bomb


def test_compressed_file_needs_schema_3() -> None:
    raw = json.loads((DATA / "classification_manifest.json").read_text())
    digest = raw["files"].pop("gate.onnx")
    raw["files"]["gate.onnx.zlib"] = digest
    raw["policies"]["gate"]["nodes"]["ab"]["model"]["file"] = "gate.onnx.zlib"
    with pytest.raises(BundleError, match="needs schema version 3") as info:
        Manifest.from_dict(raw)
    assert info.value.path == "files.gate.onnx.zlib"
    raw["schema_version"] = 3
    assert Manifest.from_dict(raw).files["gate.onnx.zlib"] == digest
