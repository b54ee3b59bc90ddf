"""The manifest's task (issue #33): regression bundles are schema version 2 with a target, a
metric and mse/mae in place of accuracy; classification manifests read and write exactly as
before (stored manifests written by the classification-only code are re-written byte for
byte)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from adaptedge.protocol import BundleError, Manifest, read_manifest, verify
from adaptedge.protocol.bundle_digest import manifest_digest
from adaptedge.protocol.manifest import (
    BUNDLE_SCHEMA_VERSION,
    PROBA_OUTPUT,
    REGRESSION_SCHEMA_VERSION,
    VALUE_OUTPUT,
)
from adaptedge.protocol.onnx_contract import VALUE_OUTPUT as CONTRACT_VALUE_OUTPUT
from adaptedge.protocol.operating_points import certified_near, within_budget
from tests.support.toy_regression_bundle import build_toy_regression_bundle

DATA = Path(__file__).parent / "data"
STORED = ("classification_manifest.json", "classification_manifest_rich.json")


def _dump(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, sort_keys=True) + "\n"  # as bundle.write_bundle writes


@pytest.mark.parametrize("name", STORED)
def test_stored_classification_manifest_rewrites_byte_identically(name: str) -> None:
    """Written by the classification-only code (main before #33): read, written, same bytes."""
    text = (DATA / name).read_text()
    manifest = Manifest.from_dict(json.loads(text))
    assert manifest.task == "classification" and not manifest.is_regression
    assert manifest.schema_version == BUNDLE_SCHEMA_VERSION
    assert all(p.mse is None and p.mae is None for p in manifest.operating_points)
    body = manifest.to_dict()
    assert _dump(body) == text
    assert manifest_digest(body) == manifest.bundle_id
    assert not {"task", "target", "metric"} & body.keys()


@pytest.fixture(scope="module")
def regression_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reg") / "bundle"
    build_toy_regression_bundle(out)
    return out


@pytest.fixture()
def body(regression_dir: Path) -> dict[str, Any]:
    return json.loads((regression_dir / "manifest.json").read_text())


def test_regression_manifest_fields_and_round_trip(regression_dir: Path,
                                                   body: dict[str, Any]) -> None:
    assert body["schema_version"] == REGRESSION_SCHEMA_VERSION == 2
    assert body["task"] == "regression" and body["metric"] == "mse"
    assert body["target"] == {"name": "temperature", "unit": "degC"}
    assert body["classes"] == []
    for item in (*body["operating_points"], body["hpc"]):
        assert "accuracy" not in item and {"mse", "mae"} <= item.keys()
    manifest = verify(regression_dir)
    assert manifest.is_regression and manifest.target == "temperature"
    assert manifest.target_unit == "degC"
    assert manifest.hpc.accuracy == -0.5 and manifest.hpc.mse == 0.5 and manifest.hpc.mae == 0.6
    gate = manifest.operating_point("gate")
    assert (gate.accuracy, gate.mse, gate.mae, gate.paired_lower_bound) == (-0.75, 0.75, 0.7,
                                                                            -0.4)
    assert _dump(manifest.to_dict()) == (regression_dir / "manifest.json").read_text()


def test_regression_score_drives_fronts_and_certification(regression_dir: Path) -> None:
    """accuracy = -mse: the lower-error point wins a budget; the bound certifies as before."""
    points = read_manifest(regression_dir).operating_points
    assert points[within_budget(points, 100.0) or 0].name == "gate"  # mse 0.75 < 1.25
    assert within_budget(points, 9.0) == 1
    bounds = [p.paired_lower_bound for p in points]
    assert certified_near(points, bounds, 0.5, fallback=False) == 0
    assert certified_near(points, bounds, 0.3, fallback=False) is None


def test_value_output_name() -> None:
    assert VALUE_OUTPUT == CONTRACT_VALUE_OUTPUT == "value" != PROBA_OUTPUT


def _refused(raw: dict[str, Any], match: str, path: str) -> None:
    with pytest.raises(BundleError, match=match) as info:
        Manifest.from_dict(raw)
    assert info.value.path == path
    assert "\n" not in str(info.value)


def test_regression_with_classes_refused(body: dict[str, Any]) -> None:
    body["classes"] = ["a", "b"]
    _refused(body, "must be \\[\\] in a regression bundle", "classes")


def test_classification_without_classes_refused() -> None:
    raw = json.loads((DATA / STORED[0]).read_text())
    raw["classes"] = []
    _refused(raw, "only a regression bundle", "classes")


@pytest.mark.parametrize("key", ["task", "target", "metric"])
def test_classification_with_regression_field_refused(key: str) -> None:
    raw = json.loads((DATA / STORED[0]).read_text())
    raw[key] = "regression"
    _refused(raw, "regression field", key)


def test_regression_point_without_mse_refused(body: dict[str, Any]) -> None:
    del body["operating_points"][1]["mse"]
    _refused(body, "required field is missing", "operating_points[1].mse")


def test_regression_point_with_accuracy_refused(body: dict[str, Any]) -> None:
    body["operating_points"][0]["accuracy"] = 0.9
    _refused(body, "stores mse and mae, not accuracy", "operating_points[0].accuracy")


def test_regression_hpc_needs_mae(body: dict[str, Any]) -> None:
    del body["hpc"]["mae"]
    _refused(body, "required field is missing", "hpc.mae")


@pytest.mark.parametrize(("key", "value", "match", "path"), [
    ("task", "classification", "must be 'regression'", "task"),
    ("metric", "mae", "must be 'mse'", "metric"),
    ("target", {"unit": "K"}, "required field is missing", "target.name"),
])
def test_regression_task_fields_checked(body: dict[str, Any], key: str, value: Any, match: str,
                                        path: str) -> None:
    body[key] = value
    _refused(body, match, path)


def test_schema_3_errors_name_schema_3(body: dict[str, Any]) -> None:
    """A schema-3 manifest (either task) names its own version in a task error."""
    body["schema_version"] = 3
    assert Manifest.from_dict(body).is_regression
    body["task"] = "classification"
    _refused(body, "must be 'regression' in a schema version 3 bundle", "task")
    classification = json.loads((DATA / STORED[0]).read_text())
    classification["schema_version"] = 3
    classification["metric"] = "mse"
    _refused(classification, "a schema version 3 \\(classification\\) bundle", "metric")


def test_regression_needs_its_schema_version(body: dict[str, Any]) -> None:
    old = copy.deepcopy(body)
    old["schema_version"] = 1
    _refused(old, "regression field", "task")
    body["schema_version"] = 4
    _refused(body, "bundle schema version 4 is not supported", "schema_version")


def test_old_reader_refuses_regression_in_one_line(body: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that knows only version 1 (as every release before #33) says so in one line."""
    import adaptedge.protocol.manifest as manifest_module

    monkeypatch.setattr(manifest_module, "READABLE_SCHEMA_VERSIONS", (BUNDLE_SCHEMA_VERSION,))
    _refused(body, "bundle schema version 2 is not supported", "schema_version")


def test_regression_bound_is_any_finite_number(body: dict[str, Any]) -> None:
    body["operating_points"][0]["paired_lower_bound"] = -12.5  # squared units, not [-1, 1]
    assert Manifest.from_dict(body).operating_points[0].paired_lower_bound == -12.5


def test_dataclass_defaults_keep_classification() -> None:
    raw = json.loads((DATA / STORED[0]).read_text())
    manifest = Manifest.from_dict(raw)
    changed = dataclasses.replace(manifest, metadata={"x": 1})
    assert "task" not in changed.to_dict()


def test_device_bundle_of_regression_keeps_the_task(regression_dir: Path) -> None:
    from adaptedge.protocol.device_bundle import device_manifest

    full = read_manifest(regression_dir)
    device = device_manifest(full, ["gate"])
    assert device.is_regression and (device.target, device.target_unit) == ("temperature", "degC")
    assert (device.hpc.mse, device.hpc.mae, device.hpc.accuracy) == (0.5, 0.6, -0.5)
    assert device.hpc.cloud_bundle == full.bundle_id and not device.carries_hpc
    assert device.schema_version == REGRESSION_SCHEMA_VERSION
