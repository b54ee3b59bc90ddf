"""Where a device bundle's bytes and load time go: ``benchmarks.device_bundle``'s ``profile``.

``bytes``: the bundle's models (stored bytes; how many are zlib-compressed, how many nodes
carry an action head), how many distinct files and distinct tree cores they hold (a core is a
``TreeEnsemble*`` node with its ``base_values`` cleared: before action heads the points of one
ADAPT-GBRT fit differed only in the gate threshold folded into the base value and the head's
margin weight; with heads they name one file), and, for the default point's models, the bytes
of each attribute of their tree ensembles with the trees, nodes, leaves and splits they hold.
``load``: the medians of ``verify`` (manifest and every file's hash) and of creating the
default point's onnxruntime sessions (``edge.policy.ModelStore``), the two parts of
``EdgeRuntime.load``.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
from onnx import helper

from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.model_file import is_compressed
from adaptedge.protocol.model_file import model_bytes as onnx_bytes


def _tree_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type.startswith("TreeEnsemble")]


def _core_digest(node: onnx.NodeProto) -> str:
    core = onnx.NodeProto()
    core.CopyFrom(node)
    for attr in core.attribute:
        if attr.name == "base_values":
            del attr.floats[:]
    return hashlib.sha256(core.SerializeToString()).hexdigest()


def _attributes(nodes: list[onnx.NodeProto]) -> dict[str, Any]:
    """Bytes per attribute (summed over ``nodes``), and the trees, nodes, leaves, splits."""
    sizes: Counter[str] = Counter()
    trees = n_nodes = leaves = 0
    for node in nodes:
        for attr in node.attribute:
            sizes[attr.name] += attr.ByteSize()
            if attr.name == "nodes_modes":
                modes = helper.get_attribute_value(attr)
                n_nodes += len(modes)
                leaves += sum(m == b"LEAF" for m in modes)
            elif attr.name == "nodes_treeids":
                trees += len(set(helper.get_attribute_value(attr)))
    return {"attribute_bytes": dict(sizes.most_common()), "trees": trees, "nodes": n_nodes,
            "leaves": leaves, "splits": n_nodes - leaves}


def bytes_profile(root: Path, manifest: Manifest) -> dict[str, Any]:
    """The ``bytes`` part of the profile of the bundle at ``root``."""
    point = manifest.operating_point(manifest.default_operating_point)
    default = {n.model.file for n in manifest.policies[point.policy].nodes.values()}
    cores: set[str] = set()
    default_nodes: list[onnx.NodeProto] = []
    models = [f for f in manifest.files if f != manifest.hpc.file]
    for name in models:
        nodes = _tree_nodes(onnx.load_model_from_string(
            onnx_bytes(name, (root / name).read_bytes())))
        cores.update(_core_digest(n) for n in nodes)
        if name in default:
            default_nodes += nodes
    return {"model_files": len(models),
            "model_bytes": sum((root / f).stat().st_size for f in models),
            "compressed_model_files": sum(is_compressed(f) for f in models),
            "heads": sum(n.model.action_head is not None for g in manifest.policies.values()
                         for n in g.nodes.values()),
            "distinct_model_files": len({manifest.files[f] for f in models}),
            "distinct_tree_cores": len(cores),
            "default_point": {"files": len(default),
                              "bytes": sum((root / f).stat().st_size for f in default),
                              **_attributes(default_nodes)}}


def _median_ms(run: Callable[[], object], times: int) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        spent.append((time.perf_counter() - started) * 1000.0)
    return round(statistics.median(spent), 2)


def load_profile(root: Path, times: int) -> dict[str, Any]:
    """The ``load`` part: medians over ``times`` runs of ``verify`` and of the default point's
    sessions."""
    from adaptedge.edge.policy import ModelStore, compile_policy
    from adaptedge.protocol.bundle import verify

    manifest = verify(root)
    policy = manifest.operating_point(manifest.default_operating_point).policy

    def sessions() -> ModelStore:
        store = ModelStore(manifest, root)
        compile_policy(manifest, policy, manifest.policies[policy], store)
        return store

    return {"verify_ms_median": _median_ms(lambda: verify(root), times),
            "sessions_ms_median": _median_ms(sessions, times),
            "sessions": sessions().n_sessions}
