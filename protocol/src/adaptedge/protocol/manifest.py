"""The bundle manifest: what a trained bundle contains and promises, as typed dataclasses.

``Manifest.from_dict`` validates everything and raises ``BundleError`` naming the field
(e.g. ``policies.p0.nodes.n1.actions[2].sensor``). The trainer writes it, the edge, the
cloud and ``adaptedge inspect`` read it; nobody else parses ``manifest.json``.

The model contract (every ONNX file a policy node names):
  input  ``x``              float32 [N, len(model.inputs)] — the listed feature columns, in order;
  output ``probabilities``  float32 [N, len(classes)] — the node's local classifier;
  output ``action_scores``  float32 [N, len(actions)] — only when the node has more than one
                            action; the device takes the first highest score.
The HPC takes ``x`` float32 [N, len(feature_names)] (unmeasured slots 0) and gives
``probabilities``.

A regression bundle (``task`` "regression", schema version 2, ``classes`` empty) has the same
contract with output ``value`` float32 [N, 1] in place of ``probabilities``, for its nodes and
its HPC. Its operating points and HPC store validation ``mse`` and ``mae`` (the data's units)
instead of ``accuracy``; the score every front and budget lookup uses, ``accuracy``, is then
-mse (higher is better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from adaptedge.protocol.budget_index import checked_index
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.model_file import is_compressed
from adaptedge.protocol.policy_graph import ACTION_KINDS as ACTION_KINDS  # the contract's name
from adaptedge.protocol.policy_graph import PolicyGraph, read_graph
from adaptedge.protocol.size_poly import parse_size_poly
from adaptedge.protocol.split_recipe import (
    SplitRecipe,
    drop_unset_optionals,
    parse_interval,
    parse_split,
)

BUNDLE_SCHEMA_VERSION = 1
"""The schema version of a classification bundle."""
REGRESSION_SCHEMA_VERSION = 2
"""The schema version of a regression bundle (older readers refuse it in one line)."""
HEAD_SCHEMA_VERSION = 3
"""The schema version of a bundle (either task; ``task`` present: regression) whose nodes may
carry action heads (``protocol.action_head``) and whose model files may be compressed (xz or zlib)
(``protocol.model_file``); older readers refuse it in one line."""
READABLE_SCHEMA_VERSIONS = (BUNDLE_SCHEMA_VERSION, REGRESSION_SCHEMA_VERSION,
                            HEAD_SCHEMA_VERSION)
Task = Literal["classification", "regression"]
REGRESSION_METRIC = "mse"
"""The metric a regression bundle's points are scored by (``accuracy`` = -mse)."""
MODEL_INPUT = "x"
PROBA_OUTPUT = "probabilities"
VALUE_OUTPUT = "value"
"""A regression model's output: float32 [N, 1], the predicted value in the target's units."""
ACTION_OUTPUT = "action_scores"
MAX_SENSOR_TIMEOUT_MS = 3_600_000.0
"""Longest sensor read timeout a bundle (or a device) may set: one hour."""


@dataclass(frozen=True, slots=True)
class SensorSpec:
    """A sensor: the feature columns one read yields, and what a read costs in real units."""

    name: str
    features: tuple[int, ...]
    energy_mj: float = 1.0
    latency_ms: float = 0.0
    money: float = 0.0
    timeout_ms: float | None = None
    size_poly: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """``(unit, (c0, c1, ...))``: that unit costs c0 + c1 n + ... for an item of size n; its
    plain field holds the cost at the median training size (``protocol.size_poly``)."""


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """The uplink to the cloud: bytes, radio energy, round trip, price per call, deadline."""

    request_bytes: int = 256
    reply_bytes: int = 96
    tx_energy_mj_per_byte: float = 0.002
    rx_energy_mj_per_byte: float = 0.001
    rtt_ms: float = 40.0
    cloud_cost_per_call: float = 0.0
    deadline_ms: float = 250.0


@dataclass(frozen=True, slots=True)
class CostWeights:
    """How real units fold into the one scalar cost training trades against error."""

    energy_mj: float = 1.0
    latency_ms: float = 0.0
    money: float = 0.0
    uniform: float = 0.0
    """Cost per feature regardless of sensor ("uniform" = 1 per feature, as in the papers)."""

    def sensor_cost(self, sensor: SensorSpec) -> float:
        return (
            self.energy_mj * sensor.energy_mj
            + self.latency_ms * sensor.latency_ms
            + self.money * sensor.money
            + self.uniform * len(sensor.features)
        )

    def link_cost(self, link: LinkSpec) -> float:
        energy = (
            link.request_bytes * link.tx_energy_mj_per_byte
            + link.reply_bytes * link.rx_energy_mj_per_byte
        )
        return (
            self.energy_mj * energy
            + self.latency_ms * link.rtt_ms
            + self.money * link.cloud_cost_per_call
        )


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """One trade-off the device may run: a policy and its expected validation accuracy and cost."""

    name: str
    policy: str
    accuracy: float
    cost: float
    escalation_rate: float = 0.0
    avg_sensors_read: float = 0.0
    params: Mapping[str, float | str] = field(default_factory=dict)
    accuracy_interval: tuple[float, float] | None = None  # optional: Wilson, see split_recipe
    paired_lower_bound: float | None = None
    """Optional: the one-sided 97.5% lower bound on (accuracy - the HPC's accuracy) on the same
    validation rows (``protocol.operating_points.paired_lower_bound``); the default point is
    certified when it is >= -tolerance. ``None`` in bundles written before it."""
    method: str | None = None
    """Optional: the training method the point's policy came from (``train --method auto``
    merges several methods into one front). ``None`` when unrecorded."""
    mse: float | None = None
    """Regression only: validation mean squared error (``accuracy`` is then -mse)."""
    mae: float | None = None
    """Regression only: validation mean absolute error, in the target's units."""


@dataclass(frozen=True, slots=True)
class HpcRef:
    """The cloud's high-cost model. The device never needs its file; the cloud does.

    A full (cloud) bundle lists ``file`` among its files. A device bundle does not hold it: it
    names the model by ``sha256`` (of the ONNX file) and ``cloud_bundle`` (the id of the bundle
    it was cut from), and the cloud checks both before it answers for it
    (``protocol.device_bundle``)."""

    file: str
    sensors: tuple[str, ...]
    accuracy: float
    description: str = ""
    sha256: str | None = None
    cloud_bundle: str | None = None
    mse: float | None = None
    """Regression only: the HPC's validation mean squared error (``accuracy`` is -mse)."""
    mae: float | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    schema_version: int
    bundle_id: str
    classes: tuple[str, ...]
    feature_names: tuple[str, ...]
    sensors: tuple[SensorSpec, ...]
    link: LinkSpec
    cost_weights: CostWeights
    hpc: HpcRef
    policies: Mapping[str, PolicyGraph]
    operating_points: tuple[OperatingPoint, ...]
    default_operating_point: str
    files: Mapping[str, str]
    """File name -> SHA-256 hex of every file in the bundle besides ``manifest.json``."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Free-form provenance: method, dataset, training time, library versions."""
    budget_index: Mapping[str, Any] | None = None
    """Per-decision budgets: ``protocol.budget_index`` JSON (absent unless a method made one)."""
    split: SplitRecipe | None = None  # optional: the training split (protocol.split_recipe)
    task: Task = "classification"
    """What the bundle predicts: a class (``classes``) or a value (``target``)."""
    target: str = ""
    """Regression: the data column predicted (empty for classification)."""
    target_unit: str = ""
    """Regression: the target's unit ("" when unknown)."""

    # -- lookups ----------------------------------------------------------------------------
    def sensor(self, name: str) -> SensorSpec:
        for spec in self.sensors:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def operating_point(self, name: str) -> OperatingPoint:
        for point in self.operating_points:
            if point.name == name:
                return point
        raise KeyError(name)

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"

    def to_dict(self) -> dict[str, Any]:
        raw = _task_fields(drop_unset_optionals(asdict(self)))
        return _jsonable(raw)  # type: ignore[no-any-return]

    @property
    def carries_hpc(self) -> bool:
        """Whether the HPC's file is in this bundle (a full bundle) or only named (a device
        bundle)."""
        return self.hpc.file in self.files

    @property
    def hpc_sha256(self) -> str:
        """The SHA-256 of the HPC's ONNX file, held or named."""
        return self.files.get(self.hpc.file) or self.hpc.sha256 or ""

    @property
    def size_dependent(self) -> bool:  # any sensor's cost grows with the item's size
        return any(s.size_poly for s in self.sensors)

    @classmethod
    def from_dict(cls, raw: Any) -> Manifest:
        return _parse_manifest(raw)


def _task_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The task's own fields as the JSON holds them: none for classification (its manifests
    are written as before the task existed); for regression ``task``, ``target`` {name, unit},
    ``metric``, and ``mse``/``mae`` in place of ``accuracy`` in each point and the HPC."""
    task, name, unit = raw.pop("task"), raw.pop("target"), raw.pop("target_unit")
    scored = [*raw.get("operating_points", ()), raw.get("hpc", {})]
    for item in scored:
        if task == "regression":
            item.pop("accuracy", None)
        else:
            for key in ("mse", "mae"):
                if item.get(key) is None:
                    item.pop(key, None)
    if task == "regression":
        raw.update(task=task, target={"name": name, "unit": unit}, metric=REGRESSION_METRIC)
    return raw


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# -- parsing and validation ------------------------------------------------------------------
class _Reader:
    """Typed access to a JSON object that reports the dotted path of whatever is wrong."""

    def __init__(self, raw: Any, path: str) -> None:
        if not isinstance(raw, dict):
            raise BundleError(f"expected an object, got {type(raw).__name__}", path=path or "manifest")
        self.raw = raw
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if key not in self.raw:
            if default is ...:
                raise BundleError("required field is missing", path=self.at(key))
            return default
        value = self.raw[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise BundleError("must be a finite number", path=self.at(key)) from None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise BundleError(f"has the wrong type {type(value).__name__}", path=self.at(key))
        if isinstance(value, float) and not math.isfinite(value):
            raise BundleError("must be a finite number", path=self.at(key))
        return value

    def number(self, key: str, default: Any = ..., minimum: float = 0.0) -> float:
        value = float(self.get(key, float, default))
        if value < minimum:
            raise BundleError(f"must be >= {minimum}, got {value}", path=self.at(key))
        return value

    def text(self, key: str, default: Any = ...) -> str:
        value = self.get(key, str, default)
        if not isinstance(value, str) or not value:
            raise BundleError("must be a non-empty string", path=self.at(key))
        return value

    def child(self, key: str) -> _Reader:
        return _Reader(self.get(key, dict), self.at(key))

    def strings(self, key: str) -> tuple[str, ...]:
        items = self.get(key, list)
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise BundleError("must be a non-empty string", path=f"{self.at(key)}[{i}]")
        return tuple(items)

    def ints(self, key: str) -> tuple[int, ...]:
        items = self.get(key, list)
        for i, item in enumerate(items):
            if not isinstance(item, int) or isinstance(item, bool) or item < 0:
                raise BundleError("must be a non-negative integer", path=f"{self.at(key)}[{i}]")
        return tuple(items)

    def objects(self, key: str) -> list[_Reader]:
        """A reader for each object in list field ``key`` (at ``key[i]``)."""
        return [_Reader(item, f"{self.at(key)}[{i}]") for i, item in enumerate(self.get(key, list))]


def _parse_manifest(raw: Any) -> Manifest:
    r = _Reader(raw, "")
    version = r.get("schema_version", int)
    if version not in READABLE_SCHEMA_VERSIONS:
        raise BundleError(
            f"bundle schema version {version} is not supported (this adaptedge reads versions "
            f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}): re-export the bundle "
            "with a matching trainer", path="schema_version",
        )
    task = _parse_task(r, version)
    regression = task.task == "regression"
    classes = task.classes
    feature_names = r.strings("feature_names")
    n_features = len(feature_names)
    if not n_features:
        raise BundleError("must list at least one feature", path="feature_names")

    sensors = tuple(_parse_sensor(item, f"sensors[{i}]", n_features)
                    for i, item in enumerate(r.get("sensors", list)))
    names = [s.name for s in sensors]
    if len(set(names)) != len(names):
        raise BundleError("sensor names must be unique", path="sensors")
    owner: dict[int, str] = {}
    for spec in sensors:
        for col in spec.features:
            if col in owner:
                raise BundleError(f"feature {col} belongs to both {owner[col]!r} and {spec.name!r}",
                                  path="sensors")
            owner[col] = spec.name

    link = _parse_link(r.child("link"))
    weights = _parse_weights(r.child("cost_weights"))
    files = _parse_files(r.child("files"))
    hpc = _parse_hpc(r.child("hpc"), files, regression)
    _check_sensors(hpc.sensors, names, "hpc.sensors")

    policies_raw = r.child("policies")
    if not policies_raw.raw:
        raise BundleError("must hold at least one policy graph", path="policies")
    policies = {
        name: read_graph(policies_raw.child(name), name=name, sensor_names=names, owner=owner,
                         files=files)
        for name in policies_raw.raw
    }
    _check_heads(policies, files, version)
    points = tuple(_parse_point(_Reader(item, f"operating_points[{i}]"), policies, regression)
                   for i, item in enumerate(r.get("operating_points", list)))
    if not points:
        raise BundleError("must hold at least one operating point", path="operating_points")
    point_names = [p.name for p in points]
    if len(set(point_names)) != len(point_names):
        raise BundleError("operating point names must be unique", path="operating_points")
    default = r.text("default_operating_point")
    if default not in point_names:
        raise BundleError(f"names {default!r}, which is not an operating point",
                          path="default_operating_point")
    return Manifest(
        schema_version=version,
        bundle_id=r.text("bundle_id"),
        classes=classes,
        feature_names=feature_names,
        sensors=sensors,
        link=link,
        cost_weights=weights,
        hpc=hpc,
        policies=policies,
        operating_points=points,
        default_operating_point=default,
        files=files,
        metadata=r.get("metadata", dict, {}),
        budget_index=checked_index(r.get("budget_index", dict, None), point_names),
        split=parse_split(r.raw.get("split"), "split"),
        task=task.task, target=task.target, target_unit=task.unit,
    )


@dataclass(frozen=True, slots=True)
class _TaskFields:
    task: Task
    classes: tuple[str, ...]
    target: str = ""
    unit: str = ""


def uses_heads(policies: Mapping[str, PolicyGraph]) -> bool:
    """Whether any node's model has an action head (the bundle then needs schema 3)."""
    return any(n.model.action_head is not None for g in policies.values()
               for n in g.nodes.values())


def schema_version(regression: bool, policies: Mapping[str, PolicyGraph]) -> int:
    """The schema version a bundle of this task and these policies is written with: 3 with
    action heads, else 1 (classification) or 2 (regression), as before heads existed."""
    if uses_heads(policies):
        return HEAD_SCHEMA_VERSION
    return REGRESSION_SCHEMA_VERSION if regression else BUNDLE_SCHEMA_VERSION


def _check_heads(policies: Mapping[str, PolicyGraph], files: Mapping[str, str],
                 version: int) -> None:
    """Action heads and compressed (xz or zlib) model files (``protocol.model_file``) are schema 3."""
    if version != HEAD_SCHEMA_VERSION:
        for name in files:
            if is_compressed(name):
                raise BundleError(f"a compressed model file needs schema version "
                                  f"{HEAD_SCHEMA_VERSION}, the bundle says {version}",
                                  path=f"files.{name}")
        for name, graph in policies.items():
            for node_id, node in graph.nodes.items():
                if node.model.action_head is not None:
                    raise BundleError(
                        f"an action head needs schema version {HEAD_SCHEMA_VERSION}, the bundle "
                        f"says {version}", path=f"policies.{name}.nodes.{node_id}.model")


def _parse_task(r: _Reader, version: int) -> _TaskFields:
    """The task's fields: version 1 is classification (two or more distinct classes, no task
    fields); version 2 is regression (``task``, ``target``, ``metric``, ``classes`` []);
    version 3 is either (regression when it has ``task``)."""
    regression = "task" in r.raw if version == HEAD_SCHEMA_VERSION else (
        version == REGRESSION_SCHEMA_VERSION)
    if not regression:
        for key in ("task", "target", "metric"):
            if key in r.raw:
                raise BundleError(f"is a regression field; a schema version {version} "
                                  "(classification) bundle must not hold it", path=key)
        if r.get("classes", list) == []:
            raise BundleError("is empty; only a regression bundle (schema version "
                              f"{REGRESSION_SCHEMA_VERSION}) has no classes", path="classes")
        classes = r.strings("classes")
        if len(classes) < 2 or len(set(classes)) != len(classes):
            raise BundleError("needs at least two distinct class names", path="classes")
        return _TaskFields("classification", classes)
    if r.get("task", str) != "regression":
        raise BundleError(f"must be 'regression' in a schema version {version} bundle",
                          path="task")
    if r.get("classes", list) != []:
        raise BundleError("must be [] in a regression bundle (it predicts a value, not a "
                          "class)", path="classes")
    metric = r.get("metric", str)
    if metric != REGRESSION_METRIC:
        raise BundleError(f"must be {REGRESSION_METRIC!r} (the only regression metric), got "
                          f"{metric[:40]!r}", path="metric")
    target = r.child("target")
    return _TaskFields("regression", (), target.text("name"), target.get("unit", str, ""))


def _parse_errors(r: _Reader, regression: bool) -> tuple[float, float | None, float | None]:
    """(score, mse, mae) of a point or the HPC: ``accuracy`` in a classification bundle;
    ``mse`` and ``mae`` (score -mse) in a regression bundle."""
    if not regression:
        return r.number("accuracy"), None, None
    if "accuracy" in r.raw:
        raise BundleError("a regression bundle stores mse and mae, not accuracy",
                          path=r.at("accuracy"))
    mse = r.number("mse")
    return -mse, mse, r.number("mae")


def _parse_hpc(hr: _Reader, files: Mapping[str, str], regression: bool = False) -> HpcRef:
    """The HPC reference: a file the bundle holds, or (a device bundle) one it names by hash."""
    sha = hr.get("sha256", (str, type(None)), None)
    cloud = hr.get("cloud_bundle", (str, type(None)), None)
    score, mse, mae = _parse_errors(hr, regression)
    hpc = HpcRef(file=hr.text("file"), sensors=hr.strings("sensors"),
                 accuracy=score, description=hr.get("description", str, ""),
                 sha256=sha, cloud_bundle=cloud, mse=mse, mae=mae)
    if sha is None and cloud is None:
        _check_file(files, hpc.file, "hpc.file")  # a full bundle holds its HPC
        return hpc
    if sha is None or cloud is None or not cloud:
        raise BundleError("a device bundle names its HPC by both sha256 and cloud_bundle",
                          path=hr.at("sha256" if sha is None else "cloud_bundle"))
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise BundleError("must be a lower-case SHA-256 hex digest", path=hr.at("sha256"))
    if hpc.file in files:
        raise BundleError(f"names file {hpc.file!r} by hash, so the bundle must not hold it",
                          path=hr.at("file"))
    return hpc


def _parse_sensor(raw: Any, path: str, n_features: int) -> SensorSpec:
    r = _Reader(raw, path)
    features = r.ints("features")
    if not features:
        raise BundleError("a sensor must yield at least one feature", path=r.at("features"))
    for col in features:
        if col >= n_features:
            raise BundleError(f"feature index {col} is out of range (bundle has {n_features})",
                              path=r.at("features"))
    timeout = r.get("timeout_ms", (float, int, type(None)), None)
    if timeout is not None and not 0 < timeout <= MAX_SENSOR_TIMEOUT_MS:  # NaN fails too
        raise BundleError(f"must be > 0 and <= {MAX_SENSOR_TIMEOUT_MS:g} ms (one hour), got "
                          f"{str(timeout)[:24]}", path=r.at("timeout_ms"))
    return SensorSpec(
        name=r.text("name"),
        features=features,
        energy_mj=r.number("energy_mj", 0.0),
        latency_ms=r.number("latency_ms", 0.0),
        money=r.number("money", 0.0),
        timeout_ms=None if timeout is None else float(timeout),
        size_poly=parse_size_poly(r.get("size_poly", dict, {}), r.at("size_poly")),
    )


def _parse_link(r: _Reader) -> LinkSpec:
    values: dict[str, Any] = {k: r.number(k, v) for k, v in asdict(LinkSpec()).items()}
    if not 0 < values["deadline_ms"] <= 3_600_000:  # 1e300 overflowed the clocks it met
        raise BundleError("must be > 0 and <= 3600000 ms (one hour)", path=r.at("deadline_ms"))
    return LinkSpec(**{k: int(v) if k.endswith("_bytes") else v for k, v in values.items()})


def _parse_weights(r: _Reader) -> CostWeights:
    d = CostWeights()
    return CostWeights(energy_mj=r.number("energy_mj", d.energy_mj),
                       latency_ms=r.number("latency_ms", d.latency_ms),
                       money=r.number("money", d.money), uniform=r.number("uniform", d.uniform))


def _parse_files(r: _Reader) -> dict[str, str]:
    files: dict[str, str] = {}
    for name, digest in r.raw.items():
        if (not isinstance(name, str) or not name or "/" in name or "\\" in name
                or name.startswith(".") or name == "manifest.json"):
            raise BundleError("file names must be plain names inside the bundle directory",
                              path=r.at(str(name)))
        if not isinstance(digest, str) or len(digest) != 64 or any(
                c not in "0123456789abcdef" for c in digest):
            raise BundleError("must be a lower-case SHA-256 hex digest", path=r.at(name))
        files[name] = digest
    return files


def _check_file(files: Mapping[str, str], name: str, path: str) -> None:
    if name not in files:
        raise BundleError(f"names file {name!r}, which is not listed in files", path=path)


def _check_sensors(used: tuple[str, ...], known: list[str], path: str) -> None:
    for name in used:
        if name not in known:
            raise BundleError(f"unknown sensor {name!r} (the bundle has {known})", path=path)
    if len(set(used)) != len(used):
        raise BundleError("lists a sensor twice", path=path)


def _parse_point(r: _Reader, policies: Mapping[str, PolicyGraph],
                 regression: bool = False) -> OperatingPoint:
    policy = r.text("policy")
    if policy not in policies:
        raise BundleError(f"names policy {policy!r}, which does not exist", path=r.at("policy"))
    params = r.get("params", dict, {})
    for key, value in params.items():
        if not isinstance(value, int | float | str) or isinstance(value, bool):
            raise BundleError("params values must be numbers or strings", path=r.at(f"params.{key}"))
    score, mse, mae = _parse_errors(r, regression)
    return OperatingPoint(
        name=r.text("name"), policy=policy, accuracy=score, cost=r.number("cost"),
        escalation_rate=r.number("escalation_rate", 0.0),
        avg_sensors_read=r.number("avg_sensors_read", 0.0),
        params=params,
        accuracy_interval=parse_interval(r.raw.get("accuracy_interval"),
                                         r.at("accuracy_interval")),
        paired_lower_bound=_parse_bound(r, regression),
        method=_parse_method(r), mse=mse, mae=mae,
    )


def _parse_method(r: _Reader) -> str | None:
    raw = r.raw.get("method")
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise BundleError("must be a non-empty string (a method name)", path=r.at("method"))
    return raw


def _parse_bound(r: _Reader, regression: bool = False) -> float | None:
    """An accuracy difference's bound lies in [-1, 1]; a regression bound (HPC MAE - point
    MAE, the target's unit: ``protocol.error_rule``) is any finite number."""
    if r.raw.get("paired_lower_bound") is None:
        return None
    if regression:
        return float(r.get("paired_lower_bound", float))
    value = r.number("paired_lower_bound", minimum=-1.0)
    if value > 1.0:
        raise BundleError(f"must be in [-1, 1], got {value}", path=r.at("paired_lower_bound"))
    return value
