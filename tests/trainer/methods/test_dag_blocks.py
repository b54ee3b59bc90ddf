"""The many-sensor DAG (trainer.methods.dag.blocks): gain-order blocks, the lattice over their
unions, the choice of lattice by sensor count, and a quick sweep on 64 pixels with ONNX parity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.bundle import evaluate_exports
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.dag.blocks import (
    BLOCK_ENDS,
    WIDE_SENSORS,
    block_lattice,
    gain_order,
    order_blocks,
)
from adaptedge.trainer.methods.dag.method import export_sweep, settings_from
from adaptedge.trainer.methods.dag.nodes import dag_walk
from adaptedge.trainer.methods.dag.problem import DagProblem, make_problem, problem_from
from adaptedge.trainer.methods.dag.subsets import lattice_scorer
from adaptedge.trainer.methods.dag.sweep import (
    LATTICE_CHOICES,
    DagSettings,
    build_lattice,
    sweep_dag,
)
from adaptedge.trainer.methods.params import DAG_PARAMS, ParamError
from adaptedge.trainer.methods.registry import MethodOptions
from tests.support.dag_parity import assert_same_walk

pytestmark = pytest.mark.usefixtures("one_native_thread")


def wide(n_sensors: int, seed: int = 0, n: int = 300) -> DagProblem:
    """``n_sensors`` one-feature sensors; the label is sign(x5 + x9), the rest is noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n, n_sensors))
    y = (X[:, 5] + X[:, 9] + 0.2 * rng.normal(size=3 * n) > 0).astype(np.int64)
    proba = np.where(y[:, None] == np.arange(2), 0.9, 0.1)
    sensors = [SensorSpec(f"s{i}", (i,)) for i in range(n_sensors)]
    parts = {name: (X[i * n:(i + 1) * n], y[i * n:(i + 1) * n], proba[i * n:(i + 1) * n])
             for i, name in enumerate(("train", "val", "test"))}
    return make_problem(sensors=sensors, weights=CostWeights(), link=LinkSpec(), n_classes=2,
                        data=parts)


def test_blocks_end_at_cost_fractions_of_the_order() -> None:
    order = list(range(63, -1, -1))
    blocks = order_blocks(order, [1.0] * 64)
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 16, 32]
    assert blocks[0] == (60, 61, 62, 63) and sorted(sum(blocks, ())) == list(range(64))
    # a sensor costing half the total fills the first blocks alone
    costs = [1.0] * 8
    costs[3] = 8.0
    assert order_blocks([3, 0, 1, 2, 4, 5, 6, 7], costs, (0.25, 0.75, 1.0)) == [
        (3,), (0, 1, 2, 4), (5, 6, 7)]
    with pytest.raises(ValueError, match="rise within"):
        order_blocks(order, [1.0] * 64, (0.5, 0.25))


def test_block_lattice_is_every_union_of_the_gain_order_blocks() -> None:
    problem = wide(40)
    order = gain_order(problem)
    assert set(order[:2]) == {5, 9}  # the two sensors that carry the label lead
    lattice, blocks = block_lattice(problem)
    assert len(blocks) == len(BLOCK_ENDS) and len(lattice.edges) == 2 ** len(blocks)
    assert lattice.root == ()
    for node, targets in lattice.edges.items():
        for target in targets:
            added = set(target) - set(node)
            assert set(node) < set(target) and tuple(sorted(added)) in blocks


@pytest.mark.slow
def test_lattice_auto_keeps_tracks_up_to_24_sensors_and_blocks_beyond() -> None:
    narrow = wide(WIDE_SENSORS)
    settings = DagSettings.quick()
    auto, _ = build_lattice(narrow, settings, lattice_scorer(narrow))
    tracks, _ = build_lattice(narrow, DagSettings.quick(lattice="tracks"), lattice_scorer(narrow))
    assert auto == tracks
    assert all(len(set(t) - set(s)) == 1 for s, ts in auto.edges.items() for t in ts)
    many = wide(WIDE_SENSORS + 1)
    blocks, units = build_lattice(many, settings, lattice_scorer(many))
    assert len(blocks.edges) == 2 ** len(units) and len(units) == 4
    assert settings_from(MethodOptions(extra={"lattice": "blocks"})).lattice == "blocks"
    lattice = next(p for p in DAG_PARAMS if p.key == "lattice")
    assert lattice.choices == LATTICE_CHOICES
    with pytest.raises(ParamError, match="lattice"):
        settings_from(MethodOptions(extra={"lattice": "grid"}))


@pytest.mark.slow
def test_quick_sweep_on_64_pixels_is_cheap_near_all_sensors_and_exports_exactly(
        tmp_path: Path) -> None:
    dataset: Any = load_dataset(str(_digits_csv(tmp_path)), target="label", seed=0)
    hpc = fit_hpc(dataset, kind="logistic", cache=False)
    problem = problem_from(dataset, hpc)
    sweep = sweep_dag(problem, DagSettings.quick(classifier="hgb"))
    assert len(sweep.tracks) == 4 and len(sweep.lattice.edges) == 16
    best = max(p.validation.accuracy for p in sweep.points)
    assert best > 0.9
    cheap = [p for p in sweep.points if p.validation.cost < 0.5 * problem.total_cost
             and p.validation.accuracy >= best - 0.03]
    assert cheap, [(p.validation.accuracy, p.validation.cost) for p in sweep.points]
    exports = export_sweep(sweep)
    names = [s.name for s in dataset.sensors]
    for point, export, result in zip(sweep.points, exports,
                                     evaluate_exports(dataset, hpc, exports, "test"),
                                     strict=True):
        assert_same_walk(result, dag_walk(point, sweep.bank, "test"), names, export.name)


def _digits_csv(directory: Path) -> Path:
    """scikit-learn's digits as a CSV (64 pixel columns and ``label``: ``ge5`` / ``lt5``), built
    here rather than imported from ``benchmarks`` so the trainer's sdist runs this test."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    path = directory / "digits-binary.csv"
    lines = [",".join([*(f"p{i}" for i in range(64)), "label"])]
    for row, digit in zip(digits.data, digits.target, strict=True):
        lines.append(",".join([*(f"{v:g}" for v in row), "ge5" if digit >= 5 else "lt5"]))
    path.write_text("\n".join(lines) + "\n")
    return path
