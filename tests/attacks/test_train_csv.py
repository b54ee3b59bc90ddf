"""Issue 15 item 13: training CSVs that cannot be learned from are refused in one line, naming
the row and column. Missing cells (empty or nan) are refused unless asked for (``missing=True``:
the methods that learn unmeasured sensors, issue 37); infinities always are."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adaptedge.trainer.data.datasets import DatasetError, load_dataset


def _rows(cell: str = "", *, at: int = 7, rows: int = 40) -> str:
    lines = ["f0,f1,label"]
    for i in range(rows):
        f1 = cell if i == at else str(i % 5)
        lines.append(f"{i},{f1},{'ab'[i % 2]}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("cell", "what"), [
    ("inf", "'inf'"), ("-Infinity", "'-Infinity'"),
    ("1e400", "'1e400'"), ("1e39", "'1e39'"),
])
def test_non_finite_cells_are_refused_naming_row_and_column(tmp_path: Path, cell: str,
                                                           what: str) -> None:
    path = tmp_path / "d.csv"
    path.write_text(_rows(cell))
    with pytest.raises(DatasetError, match=rf"column 'f1' row 8 .*{what}.*finite"):
        load_dataset(str(path), target="label")


@pytest.mark.parametrize(("cell", "what"), [(" ", "is empty"), ("nan", "holds 'nan'"),
                                            ("NaN", "holds 'NaN'")])
def test_a_missing_value_is_refused_naming_row_and_column(tmp_path: Path, cell: str,
                                                          what: str) -> None:
    path = tmp_path / "d.csv"
    path.write_text(_rows(cell))
    with pytest.raises(DatasetError, match=rf"column 'f1' row 8 {what}.*--impute median"):
        load_dataset(str(path), target="label")


@pytest.mark.parametrize("cell", [" ", "", "nan", "NaN"])
def test_missing_cells_load_as_nan_when_asked(tmp_path: Path, cell: str) -> None:
    path = tmp_path / "d.csv"
    path.write_text(_rows(cell))
    d = load_dataset(str(path), target="label", missing=True)
    X = np.vstack([d.X_train, d.X_val, d.X_test])
    assert int(np.isnan(X).sum()) == 1 and np.isnan(X[:, 1]).sum() == 1
    inf = tmp_path / "inf.csv"  # (read_rows caches by path)
    inf.write_text(_rows("inf"))
    with pytest.raises(DatasetError, match=r"column 'f1' row 8 holds 'inf'"):
        load_dataset(str(inf), target="label", missing=True)


def test_a_column_missing_everywhere_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("f0,f1,label\n" + "".join(f"{i},,{'ab'[i % 2]}\n" for i in range(40)))
    with pytest.raises(DatasetError, match="column 'f1' is missing on every row"):
        load_dataset(str(path), target="label", missing=True)


def test_all_constant_features_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("f0,f1,label\n" + "".join(f"1,2,{'ab'[i % 2]}\n" for i in range(40)))
    with pytest.raises(DatasetError, match="every feature column is constant"):
        load_dataset(str(path), target="label")


@pytest.mark.parametrize("content", [
    b"f0,f1,label\n" + bytes(range(256)) * 4,
    b"f0,f1,label\n1,2,a\n\x00\x00\x00,3,b\n",
    b"\x1f\x8b\x08\x00not really gzip",
])
def test_binary_content_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / ("d.csv.gz" if content.startswith(b"\x1f\x8b") else "d.csv")
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=r"not a text|must be numeric"):
        load_dataset(str(path), target="label")


def test_a_truncated_gzip_is_refused(tmp_path: Path) -> None:
    whole = gzip.compress(_rows().encode())
    path = tmp_path / "d.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DatasetError, match="not a text"):
        load_dataset(str(path), target="label")


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["nan", "1e400"])
def test_train_cli_says_it_in_one_line(tmp_path: Path, cell: str) -> None:
    """adapt-lin cannot learn missing values: the one line names the method and the cell."""
    (tmp_path / "d.csv").write_text(_rows(cell))
    out = subprocess.run(
        [sys.executable, "-m", "adaptedge.cli.main", "train", "--data", "d.csv", "--target",
         "label", "--method", "adapt-lin", "--quick", "--no-progress", "--out", "b"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "column 'f1' row 8" in lines[0], out.stderr[-600:]
    if cell == "nan":
        assert "method 'adapt-lin' cannot learn from missing values" in lines[0]
        assert "--impute median" in lines[0]
