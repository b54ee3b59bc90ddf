"""Optional manifest fields: the train/validation/test split a bundle was trained on (``split``)
and each operating point's ``accuracy_interval`` (the ``protocol.operating_points.CONFIDENCE``
Wilson interval of its validation accuracy). Bundles written before them have neither and read
as before. ``adaptedge evaluate`` redraws the split from ``split`` and refuses data whose split
does not match its digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptedge.protocol.errors import BundleError


@dataclass(frozen=True, slots=True)
class SplitRecipe:
    """The dataset's name, the split seed, the fraction of rows in each part (train,
    validation, test) and a SHA-256 of which rows went where."""

    dataset: str
    seed: int
    fractions: tuple[float, ...]
    digest: str


def parse_split(raw: Any, path: str) -> SplitRecipe | None:
    """The manifest's ``split`` object (``None`` when absent or null)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BundleError(f"expected an object, got {type(raw).__name__}", path=path)
    for key in ("dataset", "digest"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise BundleError("must be a non-empty string", path=f"{path}.{key}")
    seed = raw.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise BundleError("must be an integer", path=f"{path}.seed")
    fractions = raw.get("fractions")
    if not isinstance(fractions, list):
        raise BundleError("must be a list of numbers", path=f"{path}.fractions")
    for i, value in enumerate(fractions):
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
            raise BundleError("must be a number in [0, 1]", path=f"{path}.fractions[{i}]")
    return SplitRecipe(dataset=raw["dataset"], seed=seed,
                       fractions=tuple(float(v) for v in fractions), digest=raw["digest"])


def parse_interval(raw: Any, path: str) -> tuple[float, float] | None:
    """An operating point's ``accuracy_interval``: ``[low, high]`` within [0, 1] (``None``
    when absent or null)."""
    if raw is None:
        return None
    ok = (isinstance(raw, list) and len(raw) == 2
          and all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
          and 0 <= raw[0] <= raw[1] <= 1)
    if not ok:
        raise BundleError("must be [low, high] with 0 <= low <= high <= 1", path=path)
    return float(raw[0]), float(raw[1])


def drop_unset_optionals(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a manifest as a dict) without the optional fields left unset, so bundles that
    do not use them read as before: ``split``, ``budget_index``, each point's
    ``accuracy_interval``, ``paired_lower_bound`` and ``method``, the HPC's ``sha256`` and
    ``cloud_bundle`` (a device bundle's), each sensor's ``size_poly`` (a mapping when set) and each policy
    node's ``compute`` and its model's ``action_head``."""
    for key in ("split", "budget_index"):
        if raw.get(key) is None:
            raw.pop(key, None)
    for key in ("sha256", "cloud_bundle"):
        if isinstance(raw.get("hpc"), dict) and raw["hpc"].get(key) is None:
            raw["hpc"].pop(key, None)
    for sensor in raw.get("sensors", ()):
        if poly := sensor.pop("size_poly", None):
            sensor["size_poly"] = dict(poly)
    for point in raw.get("operating_points", ()):
        for key in ("accuracy_interval", "paired_lower_bound", "method"):
            if point.get(key) is None:
                point.pop(key, None)
    for graph in (raw.get("policies") or {}).values():
        for node in (graph.get("nodes") or {}).values():
            if node.get("compute") is None:
                node.pop("compute", None)
            if isinstance(node.get("model"), dict) and node["model"].get("action_head") is None:
                node["model"].pop("action_head", None)
    return raw
