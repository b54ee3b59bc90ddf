"""Compressed model files (``protocol.model_file``): xz (written) and zlib (read), round trip,
damage refused, schema 3."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

import adaptedge.protocol.model_file as model_file
from adaptedge.protocol import BundleError, Manifest
from adaptedge.protocol.model_file import compress_model, model_bytes

DATA = Path(__file__).parent / "data"


def test_round_trip_and_plain_files_unchanged() -> None:
    data = b"onnx" * 5000
    stored = compress_model(data)  # xz, what the trainer writes
    assert stored.startswith(b"\xfd7zXZ\x00") and len(stored) < len(data) // 10
    assert compress_model(data) == stored  # deterministic: content-addressed names hold
    assert model_bytes("m.onnx.xz", stored) == data
    assert model_bytes("m.onnx.zlib", compress_model(data, ".zlib")) == data
    assert model_bytes("m.onnx", stored) is stored  # a plain file is its own bytes
    with pytest.raises(ValueError, match="unknown model compression"):
        compress_model(data, ".gz")


def test_xz_dictionary_is_sized_to_the_model() -> None:
    """A reader needs about the model's size in memory, not xz -9's 64 MiB dictionary."""
    data = bytes(range(256)) * 400  # 100 KiB
    block = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=1 << 20)
    assert block.decompress(compress_model(data)) == data  # under a 1 MiB memory limit


@pytest.mark.parametrize("suffix", [".zlib", ".xz"])
def test_damaged_or_oversized_stream_refused(suffix: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    name = "m.onnx" + suffix
    kind = "xz" if suffix == ".xz" else "zlib"
    with pytest.raises(BundleError, match=f"not an? {kind} stream") as info:
        model_bytes(name, b"not compressed at all")
    assert info.value.path == name
    with pytest.raises(BundleError, match="does not decompress to one model"):
        model_bytes(name, compress_model(b"x" * 1000, suffix)[:-6])  # truncated
    monkeypatch.setattr(model_file, "MAX_MODEL_BYTES", 1000)
    with pytest.raises(BundleError, match="at most 1000 bytes"):
        model_bytes(name, compress_model(b"\0" * 100_000, suffix))  # a small bomb


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
