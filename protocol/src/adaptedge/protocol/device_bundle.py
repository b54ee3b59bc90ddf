"""Device bundles: what a device runs, cut from a full bundle, naming the cloud's HPC by hash.

A full bundle (``adaptedge train`` writes one; the cloud serves it) holds the policy graphs and
the HPC. Its device bundle keeps the chosen operating points, the policies they run and those
policies' model files, the sensors, costs, link and classes, and names the HPC by the SHA-256 of
its ONNX file and the full bundle's id (``hpc.sha256``, ``hpc.cloud_bundle``). It is a bundle
like any other (hashed, signable) and the cut is deterministic: the same full bundle and points
give the same device bundle id, so a cloud serving a full bundle knows the id of its all-points
device bundle without reading it (``device_bundle_id``).

The default point stays the full bundle's default when it is kept; otherwise the first point
given becomes the default. A budget index is kept only when every point it indexes is kept; the
metadata's drift references only for the kept points.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adaptedge.protocol.bundle import write_bundle
from adaptedge.protocol.bundle_digest import manifest_digest
from adaptedge.protocol.drift_reference import REFERENCE_KEY
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest


def _chosen(full: Manifest, points: Sequence[str] | None) -> list[str]:
    """The point names to keep, in the order given (all of the bundle's by default)."""
    names = [p.name for p in full.operating_points]
    if points is None:
        return names
    chosen = list(dict.fromkeys(points))
    unknown = [p for p in chosen if p not in names]
    if unknown or not chosen:
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        what = (f"the bundle has no operating point {unknown[0]!r}" if unknown
                else "no operating point chosen: name at least one")
        raise BundleError(f"{what} (it has {shown}; `adaptedge inspect` lists them)")
    return chosen


def device_manifest(full: Manifest, points: Sequence[str] | None = None) -> Manifest:
    """The device bundle's manifest (bundle id filled in) for ``points`` of ``full`` (default:
    all of them); ``BundleError`` naming a point the bundle does not have."""
    chosen = _chosen(full, points)
    kept = tuple(p for p in full.operating_points if p.name in chosen)
    policies = {name: graph for name, graph in full.policies.items()
                if any(p.policy == name for p in kept)}
    used = {node.model.file for graph in policies.values() for node in graph.nodes.values()}
    index = full.budget_index
    if index is not None and not {str(m.get("point")) for m in index.get("models", ())} \
            <= set(chosen):
        index = None
    hpc = full.hpc if not full.carries_hpc else replace(  # a regression HPC keeps mse, mae
        full.hpc, sha256=full.hpc_sha256, cloud_bundle=full.bundle_id)
    default = (full.default_operating_point if full.default_operating_point in chosen
               else chosen[0])
    draft = replace(full, bundle_id="pending", hpc=hpc, policies=policies, operating_points=kept,
                    default_operating_point=default, budget_index=index,
                    files={f: h for f, h in full.files.items() if f in used},
                    metadata=_kept_references(full.metadata, chosen))
    body = draft.to_dict()
    body["bundle_id"] = manifest_digest(body)
    return Manifest.from_dict(body)


def _kept_references(metadata: Mapping[str, Any], chosen: Sequence[str]) -> dict[str, Any]:
    """``metadata`` with its per-point drift references (``protocol.drift_reference``) cut to
    the kept points (the default letter-binary training's 52 take 7 KB of a one-point
    bundle's manifest)."""
    out = dict(metadata)
    references = out.get(REFERENCE_KEY)
    if isinstance(references, Mapping):
        out[REFERENCE_KEY] = {k: v for k, v in references.items() if k in chosen}
    return out


def device_bundle_id(full: Manifest, points: Sequence[str] | None = None) -> str:
    """The id of the device bundle ``write_device_bundle`` cuts from ``full`` (no file read)."""
    return device_manifest(full, points).bundle_id


def write_device_bundle(full_root: str | os.PathLike[str], full: Manifest,
                        out: str | os.PathLike[str], points: Sequence[str] | None = None, *,
                        force: bool = False) -> Manifest:
    """Write the device bundle of the verified bundle ``full`` (its directory ``full_root``)
    to ``out`` (new, empty, or with ``force`` a bundle); returns its manifest."""
    draft = device_manifest(full, points)
    root = Path(full_root)
    written = write_bundle(out, draft, {name: root / name for name in draft.files}, force=force)
    if written.bundle_id != draft.bundle_id:  # a file changed since it was verified
        raise BundleError("changed while its device bundle was cut: verify it and try again",
                          path=str(root))
    return written


def require_hpc(manifest: Manifest, where: str | os.PathLike[str], use: str) -> None:
    """``BundleError`` (one line) when ``manifest`` is a device bundle, since ``use`` (e.g.
    "an evaluation") needs the HPC's file."""
    if not manifest.carries_hpc:
        raise BundleError(f"is a device bundle: it names its HPC ({manifest.hpc.cloud_bundle}/"
                          f"{manifest.hpc.file}) but does not hold it; {use} needs the full "
                          "bundle it was cut from", path=str(where))


def check_answers_for(cloud: Manifest, device: Manifest) -> None:
    """``BundleError`` (one line) unless the HPC of ``cloud`` is the one ``device`` names and
    the two bundles agree on what a request carries (classes, features, the HPC's sensors)."""
    if device.hpc_sha256 != cloud.hpc_sha256:
        raise BundleError(
            f"names the cloud model {device.hpc.cloud_bundle}/{device.hpc.file} with SHA-256 "
            f"{device.hpc_sha256[:16]}..., but the HPC served is {cloud.bundle_id}/"
            f"{cloud.hpc.file} with SHA-256 {cloud.hpc_sha256[:16]}...: serve the cloud bundle "
            "this device bundle was cut from", path=device.bundle_id)
    for field in ("classes", "feature_names"):
        if getattr(device, field) != getattr(cloud, field):
            raise BundleError(f"has other {field} than cloud bundle {cloud.bundle_id}: serve "
                              "the cloud bundle it was cut from", path=device.bundle_id)
    if _hpc_columns(device) != _hpc_columns(cloud):
        raise BundleError(f"sends the HPC other feature columns than cloud bundle "
                          f"{cloud.bundle_id}: serve the cloud bundle it was cut from",
                          path=device.bundle_id)


def _hpc_columns(m: Manifest) -> tuple[int, ...]:
    return tuple(sorted(c for s in m.sensors if s.name in m.hpc.sensors for c in s.features))
