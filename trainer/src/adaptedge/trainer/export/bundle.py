"""Turn a dataset, its HPC and a method's policies into a verified bundle on disk.

Node models are stored once each, named by the SHA-256 of their bytes; the HPC is
``hpc.onnx``; each policy becomes a ``PolicyGraph`` and an ``OperatingPoint`` carrying its
validation metrics. The same inputs give byte-identical bundles (and the same bundle id).
``export_bundle`` also writes each point's drift reference (``metadata["drift_reference"]``,
``trainer.validation_reference``), measured on the validation split with the exported ONNX,
and each point's paired outcomes against the HPC on the same validation rows
(``paired_on_validation``): its ``paired_lower_bound``, and what ``choose`` picks the default by.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptedge.protocol.action_head import ActionHead
from adaptedge.protocol.bundle import write_bundle
from adaptedge.protocol.drift_reference import REFERENCE_KEY
from adaptedge.protocol.manifest import HpcRef, Manifest, OperatingPoint, schema_version
from adaptedge.protocol.model_file import MODEL_SUFFIX, compress_model
from adaptedge.protocol.operating_points import PairedCounts, wilson_interval
from adaptedge.protocol.policy_graph import ModelRef, PolicyGraph, PolicyNode
from adaptedge.protocol.split_recipe import SplitRecipe
from adaptedge.trainer.data.datasets import Dataset, SplitName
from adaptedge.trainer.hpc import HpcModel
from adaptedge.trainer.policy.graph import Graph, Metrics, NodeModel
from adaptedge.trainer.policy.oracle import BundleRunner, PolicyResult
from adaptedge.trainer.validation_reference import (
    ValidationWalks,
    validation_reference,
    validation_walks,
)

HPC_FILE = "hpc.onnx"
Chooser = Callable[[list[PairedCounts]], tuple[str, Mapping[str, Any]]]
"""Picks the default point from each policy's paired counts (in the order given): its name
and metadata to add (e.g. the rule in words)."""


def model_file_name(onnx_model: bytes) -> str:
    return f"m_{hashlib.sha256(onnx_model).hexdigest()[:16]}.onnx"


def _point(policy: Graph, n_val: int) -> OperatingPoint:
    params: dict[str, float | str] = {}
    for key, value in sorted(policy.params.items()):
        params[key] = value if isinstance(value, str) else float(value)
    if policy.method and "method" not in params:
        params["method"] = policy.method
    v = policy.validation
    return OperatingPoint(name=policy.name, policy=policy.name, accuracy=float(v.accuracy),
                          cost=float(v.cost), escalation_rate=float(v.escalation_rate),
                          avg_sensors_read=float(v.avg_sensors_read), params=params,
                          accuracy_interval=wilson_interval(v.accuracy, n_val),
                          method=policy.method or None)


def node_export(model: NodeModel) -> tuple[bytes, ActionHead | None]:
    """A node model's ONNX bytes and action head: the model shared by every threshold of its
    fit with the variant's head when it offers one (``to_onnx_shared``), else its own
    ``to_onnx()`` and no head."""
    shared = getattr(model, "to_onnx_shared", None)
    pair: tuple[bytes, ActionHead] | None = None if shared is None else shared()
    return pair if pair is not None else (model.to_onnx(), None)


def manifest_graph(graph: Graph, files: dict[str, bytes],
                   pending: dict[str, bytes] | None = None) -> PolicyGraph:
    """A trainer graph as the manifest's policy graph; each node's ONNX model is added to
    ``files`` under its content-addressed name (shared models are stored once: the points of
    one ADAPT-GBRT fit name one file, each with its own action head; a model with a head is
    stored xz-compressed, ``*.onnx.xz``, as schema 3 allows). With ``pending``, a model to
    compress is put there instead (``files`` holds its slot) for ``compress_pending``."""
    nodes: dict[str, PolicyNode] = {}
    for node_id in sorted(graph.nodes):
        node = graph.nodes[node_id]
        onnx_model, head = node_export(node.model)
        file = model_file_name(onnx_model)
        if head is None:
            files[file] = onnx_model
        else:  # a schema-3 node: its model is stored compressed (protocol.model_file)
            file += MODEL_SUFFIX
            if file not in files and pending is not None:
                files[file], pending[file] = b"", onnx_model
            elif file not in files:
                files[file] = compress_model(onnx_model)
        nodes[node_id] = PolicyNode(sensors=tuple(node.sensors),
                                    model=ModelRef(file, tuple(int(i) for i in node.inputs),
                                                   action_head=head),
                                    actions=tuple(a.to_manifest() for a in node.actions),
                                    compute=node.compute)
    return PolicyGraph(root=graph.root, nodes=nodes)


def compress_pending(files: dict[str, bytes], pending: Mapping[str, bytes]) -> None:
    """Fill ``files``' slots with the xz bytes of ``pending``'s models, on up to
    ``usable_cores()`` threads (lzma releases the GIL); the bytes are those of
    ``compress_model`` one by one, and ``files`` keeps its order."""
    from concurrent.futures import ThreadPoolExecutor

    from adaptedge.trainer.parallel import usable_cores

    names = list(pending)
    workers = max(1, min(usable_cores(), len(names)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name, stored in zip(names, pool.map(compress_model, [pending[n] for n in names]),
                                strict=True):
            files[name] = stored


def build_bundle(dataset: Dataset, hpc: HpcModel, policies: Sequence[Graph], *,
                 default: str | None = None, metadata: Mapping[str, Any] | None = None,
                 hpc_onnx: bytes | None = None, split: SplitRecipe | None = None
                 ) -> tuple[Manifest, dict[str, bytes]]:
    """The manifest (hashes not yet filled in) and the files of a bundle, in memory."""
    if not policies:
        raise ValueError("a bundle needs at least one policy")
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"policy names must be unique; repeated: {dupes}")
    files: dict[str, bytes] = {HPC_FILE: hpc_onnx if hpc_onnx is not None else hpc.onnx_bytes()}
    graphs: dict[str, PolicyGraph] = {}
    pending: dict[str, bytes] = {}
    for policy in policies:
        graphs[policy.name] = manifest_graph(policy, files, pending)
    compress_pending(files, pending)
    points = tuple(_point(p, len(dataset.y_val)) for p in policies)
    chosen = default if default is not None else points[0].name
    if chosen not in names:
        raise ValueError(f"default operating point {chosen!r} is not one of {names}")
    manifest = Manifest(
        schema_version=schema_version(False, graphs), bundle_id="pending",
        classes=dataset.classes,
        feature_names=dataset.feature_names, sensors=dataset.sensors, link=dataset.link,
        cost_weights=dataset.cost_weights,
        hpc=HpcRef(HPC_FILE, hpc.sensors, accuracy=float(hpc.val_accuracy),
                   description=hpc.description),
        policies=graphs, operating_points=points, default_operating_point=chosen, files={},
        metadata=dict(metadata or {}), split=split)
    return manifest, files


def export_bundle(out_dir: str | Path, dataset: Dataset, hpc: HpcModel,
                  policies: Sequence[Graph], *, default: str | None = None,
                  metadata: Mapping[str, Any] | None = None, force: bool = False,
                  budget_index: Mapping[str, Any] | None = None,
                  split: SplitRecipe | None = None, drift_reference: bool = True,
                  choose: Chooser | None = None,
                  certify: tuple[Any, Any] | None = None) -> Manifest:
    """Write the bundle to ``out_dir`` (an existing bundle there only with ``force``) and
    return the validated manifest (``budget_index``: ``protocol.budget_index`` JSON).

    Every point gets its ``paired_lower_bound`` from ``paired_on_validation``, or, with
    ``certify`` (the ``(X, y)`` of validation rows held out from training and from every
    choice of the sweep, ``data.splits.hold_out_certify``), from ``paired_on_rows`` on those;
    ``choose``, when given, picks the default from those counts (instead of ``default``).
    ``drift_reference``: add every point's validation figures for the drift monitor
    (``metadata["drift_reference"]``: one walk of the exported ONNX over the validation rows
    per point; never the test split)."""
    manifest, files = build_bundle(dataset, hpc, policies, default=default, metadata=metadata,
                                   split=split)
    # one session per model for both walks, each model run once per rows
    runner = BundleRunner.from_files(manifest, files, reuse_runs=True)
    walks = validation_walks(manifest, files, dataset.split("validation")[0], runner)
    paired = (paired_on_validation(manifest, files, dataset, walks) if certify is None
              else paired_on_rows(manifest, files, *certify, runner=runner))
    points = tuple(replace(p, paired_lower_bound=c.lower_bound)
                   for p, c in zip(manifest.operating_points, paired, strict=True))
    manifest = replace(manifest, operating_points=points)
    if choose is not None:
        chosen, extra = choose(paired)
        manifest = replace(manifest, default_operating_point=chosen,
                           metadata={**manifest.metadata, **extra})
    if drift_reference:
        X_val, _ = dataset.split("validation")
        figures = validation_reference(manifest, files, X_val, walks)
        manifest = replace(manifest, metadata={**manifest.metadata, REFERENCE_KEY: figures})
    if budget_index is not None:
        manifest = replace(manifest, budget_index=dict(budget_index))
    return write_bundle(out_dir, manifest, files, force=force)


def paired_on_validation(manifest: Manifest, files: Mapping[str, bytes],
                         dataset: Dataset, walks: ValidationWalks | None = None
                         ) -> list[PairedCounts]:
    """Each point's and the HPC's outcomes on the same VALIDATION rows (never test), walked
    on the exported ONNX (what the device runs; escalated rows get the HPC's answer), in
    ``manifest.operating_points`` order (``walks``: those rows already walked)."""
    X, y = dataset.split("validation")
    return paired_on_rows(manifest, files, X, y, walks)


def paired_on_rows(manifest: Manifest, files: Mapping[str, bytes], X: Any, y: Any,
                   walks: ValidationWalks | None = None, *, runner: BundleRunner | None = None
                   ) -> list[PairedCounts]:
    """Each point's and the HPC's outcomes on the rows ``(X, y)`` (validation or its
    held-out certify rows; never test), walked on the exported ONNX, in
    ``manifest.operating_points`` order (``walks``: those rows already walked; ``runner``:
    ``manifest``'s, sessions already created)."""
    walks = walks or validation_walks(manifest, files, X, runner)
    hpc_right = walks.hpc_labels == y
    out = []
    for point in manifest.operating_points:
        right = walks.results[point.policy].labels == y
        out.append(PairedCounts(both=int(np.sum(right & hpc_right)),
                                point_only=int(np.sum(right & ~hpc_right)),
                                hpc_only=int(np.sum(~right & hpc_right)),
                                neither=int(np.sum(~right & ~hpc_right))))
    return out


def evaluate_exports(dataset: Dataset, hpc: HpcModel, policies: Sequence[Graph],
                     split: SplitName = "validation", *, hpc_onnx: bytes | None = None
                     ) -> list[PolicyResult]:
    """Run each policy's exported ONNX (via ``policy_eval``) on a split, without writing files.

    For methods: the validation ``Metrics`` of a candidate come from exactly what the device
    will run (``metrics_of``). Pass ``hpc_onnx`` (``hpc.onnx_bytes()``) to convert once.
    """
    manifest, files = build_bundle(dataset, hpc, policies, hpc_onnx=hpc_onnx)
    runner = BundleRunner.from_files(manifest, files)
    X, y = dataset.split(split)
    return [runner.evaluate(p.name, X, y) for p in policies]


def metrics_of(result: PolicyResult) -> Metrics:
    return Metrics(accuracy=result.accuracy, cost=result.mean_cost,
                   escalation_rate=result.escalation_rate,
                   avg_sensors_read=result.avg_sensors_read)

