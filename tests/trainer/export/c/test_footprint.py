"""A point over the flash limit is refused in one line naming the point that fits; the
estimate tracks the compiled size."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.protocol import Manifest
from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c import export_c
from adaptedge.trainer.export.c.footprint import estimator


def test_point_over_the_limit_names_the_one_that_fits(toy_bundle: tuple[Path, Manifest],
                                                      tmp_path: Path) -> None:
    path, manifest = toy_bundle
    estimate = estimator(manifest, path)
    sized = sorted((estimate(p.name), p.name) for p in manifest.operating_points)
    (small, small_name), (big, big_name) = sized[0], sized[-1]
    assert small < big
    with pytest.raises(ExportError) as info:
        export_c(path, tmp_path / "c", big_name, flash_limit=small)
    message = str(info.value)
    assert "\n" not in message and repr(big_name) in message
    assert f"the most accurate point that fits is {small_name!r}" in message
    assert not (tmp_path / "c").exists()
    assert export_c(path, tmp_path / "c", small_name, flash_limit=small).flash_estimate == small


def test_no_point_fits_says_which_is_smallest(toy_bundle: tuple[Path, Manifest],
                                              tmp_path: Path) -> None:
    path, manifest = toy_bundle
    with pytest.raises(ExportError, match="no point of the bundle fits: the smallest"):
        export_c(path, tmp_path / "c", manifest.default_operating_point, flash_limit=1024)
