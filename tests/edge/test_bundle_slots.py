"""Bundles the edge refuses (before any model runs) and the device-install import rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import adaptedge.edge.session as edge_session
from adaptedge.edge import EdgeError, EdgeRuntime
from adaptedge.edge.errors import BundleRefused
from adaptedge.protocol import BundleError, Manifest

Bundle = tuple[Path, Manifest]


@pytest.fixture()
def sessions_created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Files the runtime creates onnxruntime sessions for, in order."""
    created: list[str] = []
    real = edge_session.NodeSession.__init__

    def spy(self: edge_session.NodeSession, path: Path, *args: Any, **kwargs: Any) -> None:
        created.append(path.name)
        real(self, path, *args, **kwargs)

    monkeypatch.setattr(edge_session.NodeSession, "__init__", spy)
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


def test_sessions_are_built_for_the_points_in_use(toy_bundle: Bundle,
                                                 sessions_created: list[str]) -> None:
    rt = EdgeRuntime.load(toy_bundle[0])  # default point "walk"
    assert sorted(sessions_created) == ["a.onnx", "ab.onnx", "root.onnx"]
    rt.set_operating_point("gate")
    assert sessions_created[-1] == "gate.onnx" and len(sessions_created) == 4
    rt.set_operating_point("walk")  # still resident (two policies by default)
    assert len(sessions_created) == 4
    assert rt.resident_policies == ("gate", "walk")
    one = EdgeRuntime.load(toy_bundle[0], max_resident_policies=1)
    one.set_operating_point("gate")
    assert one.resident_policies == ("gate",)
    one.set_operating_point("walk")  # rebuilt
    assert sessions_created.count("root.onnx") == 3
    everything = EdgeRuntime.load(toy_bundle[0], preload_all=True, max_resident_policies=5)
    assert set(everything.resident_policies) == {"gate", "walk"}
    assert everything.resident_policies[-1] == "walk"


def test_model_changed_after_load_is_refused_on_switch(toy_bundle: Bundle) -> None:
    path, _ = toy_bundle
    rt = EdgeRuntime.load(path)  # "walk": gate.onnx is not loaded yet
    target = path / "gate.onnx"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(BundleRefused, match=r"gate\.onnx.*modified after loading"):
        rt.set_operating_point("gate")
    assert rt.operating_point == "walk"
    assert rt.predict_row([0.1, 0.2, 0.3]).nodes[0] == "root"


def test_missing_bundle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleRefused, match="neither a bundle directory"):
        EdgeRuntime.load(tmp_path / "nope")
