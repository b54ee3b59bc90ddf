"""A size-dependent bundle carries its sensors, item-size column and label column: ``evaluate``,
``simulate`` and ``edge run --replay`` take them from the bundle, so ``--costs`` and
``--target`` are not needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.edge.journal import read_journal
from adaptedge.protocol.bundle import verify
from tests.support.sized_data import write_data


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    from adaptedge.trainer.api import train_bundle

    folder = tmp_path_factory.mktemp("sized")
    data, costs = write_data(folder)
    train_bundle(str(data), "static", folder / "bundle", target="label", costs=costs,
                 quick=True, progress=False, hpc_kind="hgb")
    return data, costs, folder / "bundle"


def _evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["evaluate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_bundle_records_its_size_column(sized: tuple[Path, Path, Path]) -> None:
    manifest = verify(sized[2])
    assert manifest.size_dependent and manifest.metadata["size_column"] == "n"
    assert "n" not in manifest.feature_names


@pytest.mark.slow
def test_evaluate_needs_no_costs(sized: tuple[Path, Path, Path],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    data, costs, bundle = sized
    common = ["--bundle", str(bundle), "--data", str(data), "--target", "label"]
    bare = _evaluate(capsys, *common)
    assert bare == _evaluate(capsys, *common, "--costs", str(costs))


@pytest.mark.slow
def test_edge_replay_and_simulate_need_no_costs(sized: tuple[Path, Path, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data, costs, bundle = sized
    energies = []
    for extra in ([], ["--costs", str(costs)]):
        out = tmp_path / f"run{len(energies)}.jsonl"
        assert main(["edge", "run", "--bundle", str(bundle), "--replay", str(data), "--target",
                     "label", "--limit", "20", "--json-out", str(out), *extra]) == 0
        energies.append([r["cost"]["energy_mj"] for r in read_journal(out)
                         if r["kind"] == "decision"])
    assert energies[0] == energies[1] and len(energies[0]) == 20
    assert len(set(energies[0])) > 1  # each item is charged its own size
    assert main(["simulate", "--bundle", str(bundle), "--data", str(data), "--target", "label",
                 "--no-progress", "--report", str(tmp_path / "report")]) == 0


@pytest.mark.slow
def test_the_bundle_names_its_label_column(sized: tuple[Path, Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data, _, bundle = sized
    assert verify(bundle).metadata["target_column"] == "label"
    given = _evaluate(capsys, "--bundle", str(bundle), "--data", str(data), "--target", "label")
    assert _evaluate(capsys, "--bundle", str(bundle), "--data", str(data)) == given
    out = tmp_path / "run.jsonl"
    assert main(["edge", "run", "--bundle", str(bundle), "--replay", str(data), "--limit", "5",
                 "--json-out", str(out)]) == 0
    assert sum(r["kind"] == "decision" for r in read_journal(out)) == 5
    assert main(["simulate", "--bundle", str(bundle), "--data", str(data), "--no-progress",
                 "--report", str(tmp_path / "report")]) == 0


@pytest.mark.slow
def test_a_bundle_trained_with_val_fraction_replays_its_own_test_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``train --val-fraction`` re-draws validation; ``evaluate``, ``edge run --replay`` and
    ``simulate`` re-draw it as the bundle's split recipe says instead of refusing the data."""
    from adaptedge.trainer.api import train_bundle

    data, costs = write_data(tmp_path)
    bundle = tmp_path / "bundle"
    train_bundle(str(data), "static", bundle, target="label", costs=costs, quick=True,
                 progress=False, hpc_kind="hgb", val_fraction=0.4)
    from adaptedge.trainer.data.datasets import load_dataset
    from adaptedge.trainer.data.splits import with_val_fraction

    recipe = verify(bundle).split
    assert recipe is not None
    redrawn = with_val_fraction(load_dataset(str(data), target="label", costs=costs),
                                recipe.fractions[1], 0)
    assert _evaluate(capsys, "--bundle", str(bundle), "--data", str(data))["points"]
    out = tmp_path / "run.jsonl"
    assert main(["edge", "run", "--bundle", str(bundle), "--replay", str(data),
                 "--json-out", str(out)]) == 0
    decisions = [r for r in read_journal(out) if r["kind"] == "decision"]
    assert len(decisions) == len(redrawn.y_test)
    assert main(["simulate", "--bundle", str(bundle), "--data", str(data), "--no-progress",
                 "--report", str(tmp_path / "report")]) == 0
