"""Issue 21, tried again as a new user would: small or lopsided CSVs end in one line, never a
traceback (a class with one training row crashed the HPC's out-of-fold fit; 20 rows crashed the
ONNX export of a boosted model whose leaves were all 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptedge.cli.main import main as cli


def write(path: Path, labels: list[str], seed: int = 0) -> Path:
    X = np.random.default_rng(seed).normal(size=(len(labels), 3))
    rows = [",".join(f"{v:.3f}" for v in x) + f",{t}" for x, t in zip(X, labels, strict=True)]
    path.write_text("a,b,c,label\n" + "\n".join(rows) + "\n")
    return path


def test_a_class_too_rare_to_train_is_named(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    data = write(tmp_path / "rare.csv", ["x"] * 298 + ["y"] * 2)
    # adapt-gbrt's trees need more rows than 12 to split (the tuned confidence cascade's
    # logistic regression and the DAG do train on them)
    assert cli(["train", "--data", str(data), "--target", "label", "--method", "adapt-gbrt",
                "--quick", "--no-progress", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "too few training rows of class 'y' (1); every class needs at least 2" in err
    # reading such a file is fine: replay and evaluate do not train on it
    assert len(load_dataset(str(data), target="label").y_train) > 0


def test_twenty_rows_end_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write(tmp_path / "tiny.csv", ["x", "y"] * 10)
    # adapt-gbrt's trees need more rows than 12 to split (the tuned confidence cascade's
    # logistic regression and the DAG do train on them)
    assert cli(["train", "--data", str(data), "--target", "label", "--method", "adapt-gbrt",
                "--quick", "--no-progress", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "found no policy on tiny" in err and "12 training rows" in err


@pytest.mark.slow
@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_edge_run_streams_its_journal_to_a_pipe(target: str, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from adaptedge.trainer.api import train_bundle

    data = write(tmp_path / "d.csv", ["x", "y"] * 150)
    train_bundle(str(data), "confidence", tmp_path / "b", target="label", quick=True,
                 progress=False)
    launcher = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", launcher, "edge", "run", "--bundle", str(tmp_path / "b"),
         "--replay", str(data), "--target", "label", "--limit", "20", "--json-out", target,
         "--fsync-every", "0"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    # fsync on a pipe raised EINVAL; '-' wrote a file named '-'
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "-").exists()
    kinds = [json.loads(line)["kind"] for line in proc.stdout.splitlines() if line.strip()
             and line.startswith("{")]
    assert kinds[0] == "start" and kinds[-1] == "summary" and kinds.count("decision") == 20
    if target == "-":  # stdout holds JSON Lines only; the text summary went to stderr
        assert all(line.startswith("{") for line in proc.stdout.splitlines())
        assert "decisions 20" in proc.stderr


@pytest.mark.slow
def test_a_tar_made_with_dash_c_dot_is_a_bundle(tmp_path: Path) -> None:
    """``tar -cf b.tar -C bundle .`` (members ``.``, ``./manifest.json``) was refused as
    "'.' is not a plain path inside the bundle"; ``./..`` stays refused."""
    import io
    import tarfile

    from adaptedge.protocol.bundle import open_bundle, verify
    from adaptedge.protocol.errors import BundleError
    from adaptedge.trainer.api import train_bundle

    data = write(tmp_path / "d.csv", ["x", "y"] * 150)
    bundle = tmp_path / "b"
    manifest = train_bundle(str(data), "confidence", bundle, target="label", quick=True,
                            progress=False)
    archive = tmp_path / "b.tar"
    with tarfile.open(archive, "w", format=tarfile.USTAR_FORMAT) as tar:
        tar.add(bundle, arcname=".")
    with tarfile.open(archive) as tar:
        assert "./manifest.json" in tar.getnames()
    with open_bundle(archive) as root:
        assert verify(root).bundle_id == manifest.bundle_id
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("./../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(BundleError, match="not a plain path"), open_bundle(evil):
        pass


def test_a_run_without_any_cloud_answer_asks_about_the_prefix() -> None:
    from adaptedge.cli.edge_cmd import _reasons

    silent = {"degraded_by_reason": {"deadline": 3}, "by_source": {"local": 9, "cloud": 0}}
    assert any("same --prefix" in line for line in _reasons(silent))
    answered = {"degraded_by_reason": {"deadline": 3}, "by_source": {"local": 9, "cloud": 5}}
    assert not any("same --prefix" in line for line in _reasons(answered))
