"""Bundles the edge refuses (before any model runs) and the device-install import rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

import edge.session
from edge import EdgeError, EdgeRuntime
from edge.errors import BundleRefused
from protocol import BundleError, Manifest

Bundle = tuple[Path, Manifest]


@pytest.fixture()
def sessions_created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    created: list[str] = []
    real = onnxruntime.InferenceSession

    def spy(path: str, *args: object, **kwargs: object) -> object:
        created.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", spy)
    assert edge.session.ort is onnxruntime  # type: ignore[attr-defined]
    return created


@pytest.mark.parametrize("name", ["gate.onnx", "a.onnx", "hpc.onnx"])
def test_one_changed_byte_is_refused_naming_the_file(toy_bundle: Bundle, name: str,
                                                     sessions_created: list[str]) -> None:
    path, _ = toy_bundle
    target = path / name
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(BundleRefused) as info:
        EdgeRuntime.load(path)
    assert name in str(info.value) and "SHA-256" in str(info.value)
    assert isinstance(info.value, EdgeError) and isinstance(info.value, BundleError)
    assert info.value.path == str(target)
    assert sessions_created == []


def test_edited_manifest_and_extra_file_are_refused(toy_bundle: Bundle,
                                                    sessions_created: list[str]) -> None:
    path, _ = toy_bundle
    (path / "extra.onnx").write_bytes(b"x")
    with pytest.raises(BundleRefused, match=r"extra\.onnx"):
        EdgeRuntime.load(path)
    (path / "extra.onnx").unlink()
    body = json.loads((path / "manifest.json").read_text())
    body["link"]["deadline_ms"] = 1.0
    (path / "manifest.json").write_text(json.dumps(body))
    with pytest.raises(BundleRefused, match=r"manifest\.json"):
        EdgeRuntime.load(path)
    assert sessions_created == []


def test_intact_bundle_creates_sessions(toy_bundle: Bundle, sessions_created: list[str]) -> None:
    EdgeRuntime.load(toy_bundle[0])
    assert set(sessions_created) == {"gate.onnx", "root.onnx", "a.onnx", "ab.onnx"}


def test_missing_bundle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleRefused, match="neither a bundle directory"):
        EdgeRuntime.load(tmp_path / "nope")


def test_edge_predict_loads_no_heavy_library(toy_bundle: Bundle) -> None:
    code = (
        "import sys\n"
        "import edge\n"
        f"rt = edge.EdgeRuntime.load({str(toy_bundle[0])!r})\n"
        "d = rt.predict_row([0.1, 0.2, 0.3])\n"
        "d = rt.predict({'a': lambda: [0.1, 0.2], 'b': lambda: [0.3]})\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sklearn', 'scipy', 'skl2onnx'))\n"
        "print('heavy=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "heavy=", out.stdout
