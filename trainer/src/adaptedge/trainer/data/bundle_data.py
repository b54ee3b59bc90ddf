"""The data a bundle runs on: ``load_dataset``, then, without a costs file, the bundle's own
sensors, weights, link and item-size column (``evaluate``, ``simulate`` and ``edge run
--replay`` need no ``--costs`` for a bundle trained with one, and no ``--target`` for a bundle
trained on a data file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaptedge.protocol.manifest import Manifest
from adaptedge.trainer.data.datasets import Dataset, load_dataset, with_size_column

SIZE_COLUMN_KEY = "size_column"
"""Manifest metadata key: the data column of item sizes a size-dependent bundle was trained
with (absent when costs do not grow with the item's size)."""

TARGET_COLUMN_KEY = "target_column"
"""Manifest metadata key: the label column of the data file a bundle was trained on."""


def bundle_size_column(manifest: Manifest, feature_names: tuple[str, ...]) -> str | None:
    """The column of item sizes in data with ``feature_names``: the bundle's recorded one, or,
    for a size-dependent bundle without the record, the one column the bundle does not read."""
    if not manifest.size_dependent:
        return None
    recorded = manifest.metadata.get(SIZE_COLUMN_KEY)
    if isinstance(recorded, str):
        return recorded if recorded in feature_names else None
    extra = [f for f in feature_names if f not in manifest.feature_names]
    return extra[0] if len(extra) == 1 else None


def load_for_bundle(data: str, manifest: Manifest, *, target: str | None = None,
                    costs: str | Path | None = None, grouping: str | None = None,
                    seed: int = 0) -> Dataset:
    """``data`` loaded for ``manifest``'s bundle: as ``load_dataset`` with ``costs`` or
    ``grouping`` when given; else a file's size column and sensors come from the bundle, and
    without ``target`` its label column too."""
    if target is None and isinstance(recorded := manifest.metadata.get(TARGET_COLUMN_KEY), str):
        target = recorded
    dataset = load_dataset(data, target=target, costs=costs, grouping=grouping, seed=seed,
                           task="regression" if manifest.is_regression else None)
    if costs is not None or grouping is not None or dataset.sizes is not None:
        return dataset
    column = bundle_size_column(manifest, dataset.feature_names)
    dataset = with_size_column(dataset, column)
    if tuple(dataset.feature_names) != tuple(manifest.feature_names):
        return dataset  # the caller reports the mismatch
    fields: dict[str, Any] = {"sensors": manifest.sensors, "cost_weights": manifest.cost_weights,
                              "link": manifest.link}
    return Dataset(**{**dataset.__dict__, **fields})
