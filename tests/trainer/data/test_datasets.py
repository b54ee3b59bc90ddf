"""Datasets: shapes, class counts (data/README.md), splits, sensor partitions; CSVs; costs files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol.manifest import CostWeights
from adaptedge.trainer.data import datasets as datasets_module
from adaptedge.trainer.data.costs import (
    CostsError,
    cost_weights_preset,
    feature_sensor_index,
    load_costs,
    sensor_cost_vector,
)
from adaptedge.trainer.data.datasets import (
    DatasetError,
    list_datasets,
    load_dataset,
    stratified_split,
)

# the installed package's data (the repository's in an editable install)
DATA = Path(datasets_module.__file__).resolve().parent / "vendored"

# name -> (n_features, n_sensors, class counts over all splits, (n_train, n_val, n_test) or None)
EXPECTED = {
    "letter-binary": (16, 16, [9940, 10060], (12000, 4000, 4000)),
    "letter": (16, 4, None, (12000, 4000, 4000)),
    "satimage": (36, 4, [1533, 703, 1358, 626, 707, 1508], None),
    "miniboone-tiny": (50, 50, [2500, 2500], (2000, 1000, 2000)),
    "thyroid": (20, 20, [166, 368, 6666], None),
    "heart": (22, 13, [164, 139], None),
    "gas": (128, 16, [1316, 1664, 681, 592, 1779, 665], None),
    "wall-robot": (24, 24, [2205, 2097, 328, 826], None),
    "gas-time": (128, 16, [1316, 1664, 681, 592, 1779, 665], (3633, 2300, 764)),
    "wall-robot-time": (24, 24, [2205, 2097, 328, 826], (3274, 1091, 1091)),
}


def test_list_datasets_names_every_builtin() -> None:
    assert list_datasets() == sorted([*EXPECTED, "gas-concentration"])  # regression: own tests


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_builtin_shapes_counts_and_sensor_partition(name: str) -> None:
    n_features, n_sensors, counts, sizes = EXPECTED[name]
    d = load_dataset(name)
    assert len(d.feature_names) == n_features and len(d.sensors) == n_sensors
    for X, y in (d.split("train"), d.split("validation"), d.split("test")):
        assert X.dtype == np.float32 and y.dtype == np.int64
        assert X.shape == (len(y), n_features)
        assert np.isfinite(X).all()
        assert y.min() >= 0 and y.max() < len(d.classes)
    y_all = np.concatenate([d.y_train, d.y_val, d.y_test])
    if counts is not None:
        assert np.bincount(y_all, minlength=len(d.classes)).tolist() == counts
    if sizes is not None:
        assert (len(d.y_train), len(d.y_val), len(d.y_test)) == sizes
    owner = feature_sensor_index(d.sensors, n_features)
    assert sorted(owner.tolist()) == sorted(
        s for s, spec in enumerate(d.sensors) for _ in spec.features)
    assert d.description


def test_letter_binary_follows_the_papers_protocol() -> None:
    d = load_dataset("letter-binary")
    assert d.classes == ("A-M", "N-Z")
    assert d.cost_weights == CostWeights(energy_mj=0.0, uniform=1.0)
    # the UCI file's first data row is "T,2,8,3,5,1,8,13,0,6,6,10,8,0,8,0,8"
    assert d.y_train[0] == 1 and d.X_train[0].tolist() == [2, 8, 3, 5, 1, 8, 13, 0, 6, 6, 10,
                                                             8, 0, 8, 0, 8]
    costs, _ = sensor_cost_vector(d.sensors, d.cost_weights, d.n_features)
    assert costs.tolist() == [1.0] * 16


def test_letter_grouping_choices() -> None:
    assert [s.features for s in load_dataset("letter").sensors] == [
        (0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
    assert len(load_dataset("letter", grouping="per-feature").sensors) == 16
    with pytest.raises(DatasetError, match="no grouping 'bogus'"):
        load_dataset("letter", grouping="bogus")


def test_satimage_keeps_the_original_test_split_and_band_sensors() -> None:
    d = load_dataset("satimage")
    assert len(d.y_train) + len(d.y_val) == 4435 and len(d.y_test) == 2000
    assert np.bincount(d.y_test).tolist() == [461, 224, 397, 211, 237, 470]
    assert d.sensors[0].features == tuple(range(0, 36, 4))
    assert d.sensors[3].features == tuple(range(3, 36, 4))


def test_thyroid_costs_and_left_out_fti() -> None:
    d = load_dataset("thyroid")
    assert "FTI" not in d.feature_names and "FTI" in d.description
    money = {s.name: s.money for s in d.sensors}
    assert money["TSH"] == 22.78 and money["TT4"] == 14.51 and money["age"] == 1.0
    assert np.bincount(d.y_test).tolist() == [73, 177, 3178]
    costs, _ = sensor_cost_vector(d.sensors, d.cost_weights, d.n_features)
    assert costs.sum() == pytest.approx(16 + 22.78 + 11.41 + 14.51 + 11.41)


def test_heart_one_hot_columns_belong_to_their_test() -> None:
    d = load_dataset("heart")
    cp = next(s for s in d.sensors if s.name == "cp")
    assert [d.feature_names[i] for i in cp.features] == ["cp=ta", "cp=aa", "cp=np", "cp=a"]
    assert cp.money == 1.0
    one_hot = np.concatenate([d.X_train, d.X_val, d.X_test])[:, list(cp.features)]
    assert (one_hot.sum(axis=1) == 1).all()


def test_gas_sensor_costs_one_each() -> None:
    d = load_dataset("gas")
    costs, owner = sensor_cost_vector(d.sensors, d.cost_weights, d.n_features)
    assert costs.tolist() == [1.0] * 16
    assert owner.tolist() == [s for s in range(16) for _ in range(8)]


def test_random_splits_are_seeded_and_stratified() -> None:
    a, b, c = load_dataset("wall-robot", seed=3), load_dataset("wall-robot", seed=3), \
        load_dataset("wall-robot", seed=4)
    assert np.array_equal(a.X_test, b.X_test) and not np.array_equal(a.X_test, c.X_test)
    y = np.repeat(np.arange(3), [50, 30, 20])
    parts = stratified_split(y, (0.6, 0.2, 0.2), seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(100))
    assert [np.bincount(y[p]).tolist() for p in parts] == [[30, 18, 12], [10, 6, 4], [10, 6, 4]]


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_csv_with_split_column_and_string_labels(tmp_path: Path) -> None:
    rows = ["a,b,label,split"] + [f"{i},{i % 3},{'yes' if i % 2 else 'no'},"
                                  f"{('train', 'validation', 'test')[i % 3]}" for i in range(30)]
    d = load_dataset(str(_write(tmp_path / "toy.csv.gz", "\n".join(rows) + "\n")), target="label")
    assert d.name == "toy" and d.classes == ("no", "yes") and d.feature_names == ("a", "b")
    assert d.X_train[:, 0].tolist() == [float(i) for i in range(0, 30, 3)]
    assert [len(s.features) for s in d.sensors] == [1, 1]
    assert d.cost_weights.uniform == 1.0


def test_csv_without_split_gets_60_20_20(tmp_path: Path) -> None:
    rows = ["x\ty\tt"] + [f"{i}\t{-i}\t{i % 2}" for i in range(100)]
    d = load_dataset(str(_write(tmp_path / "t.tsv", "\n".join(rows))), target="t", seed=1)
    assert (len(d.y_train), len(d.y_val), len(d.y_test)) == (60, 20, 20)


@pytest.mark.parametrize(("text", "target", "message"), [
    ("a,b\n1,2\n", "c", "no target column 'c'"),
    ("a,b\nfoo,1\n2,0\n", "b", "column 'a' row 1 holds 'foo'"),
    ("a,b\n,1\n2,0\n", "b", "column 'a' row 1 is empty"),
    ("a,b,split\n1,0,train\n2,1,later\n", "b", "allowed values are train"),
    ("a,b\n1,0\n2,0\n", "b", "fewer than two classes"),
])
def test_csv_errors_are_clear(tmp_path: Path, text: str, target: str, message: str) -> None:
    path = _write(tmp_path / "bad.csv", text)
    with pytest.raises(DatasetError, match=message):
        load_dataset(str(path), target=target)


def test_unknown_name_and_target_misuse(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"built-ins are .*letter-binary"):
        load_dataset("no-such-dataset")
    with pytest.raises(DatasetError, match="needs --target"):
        load_dataset(str(_write(tmp_path / "x.csv", "a,b\n1,2\n")))
    with pytest.raises(DatasetError, match="fixed target"):
        load_dataset("heart", target="diagnosis")


# -- costs files -----------------------------------------------------------------------------
EXAMPLE_FEATURES = ("ax", "ay", "az", "temp", "hr")


def test_example_costs_file_loads() -> None:
    sensors, weights, link = load_costs(DATA / "costs-example.toml", EXAMPLE_FEATURES)
    assert [s.name for s in sensors] == ["accel", "thermo", "ppg"]
    assert sensors[0].features == (0, 1, 2) and sensors[1].timeout_ms == 50.0
    assert weights == CostWeights(energy_mj=1.0, latency_ms=0.1)
    assert link.rtt_ms == 40.0 and link.request_bytes == 256
    costs, owner = sensor_cost_vector(sensors, weights, len(EXAMPLE_FEATURES))
    assert costs.tolist() == pytest.approx([0.5 + 0.2, 0.1 + 1.5, 4.0 + 3.0])
    assert owner.tolist() == [0, 0, 0, 1, 2]


def test_costs_file_with_a_csv(tmp_path: Path) -> None:
    rows = ["ax,ay,az,temp,hr,label"] + [f"{i},{i},{i},{i},{i},{i % 2}" for i in range(20)]
    d = load_dataset(str(_write(tmp_path / "s.csv", "\n".join(rows))), target="label",
                     costs=DATA / "costs-example.toml")
    assert [s.name for s in d.sensors] == ["accel", "thermo", "ppg"]
    assert d.cost_weights.latency_ms == 0.1


@pytest.mark.parametrize(("body", "message"), [
    ('[[sensor]]\nname = "a"\nfeatures = ["ax"]\n', r"not assigned to any sensor: \['ay'\]"),
    ('[[sensor]]\nname = "a"\nfeatures = ["ax", "zz"]\n', r"sensor\[0\].features: unknown column"),
    ('[[sensor]]\nname = "a"\nfeatures = ["ax", "ay"]\nenergy_mj = -1\n',
     r"sensor\[0\].energy_mj: must be >= 0"),
    ('weights = "gold"\n[[sensor]]\nname = "a"\nfeatures = ["ax", "ay"]\n', "unknown preset"),
    ('[link]\nfoo = 1\n[[sensor]]\nname = "a"\nfeatures = ["ax", "ay"]\n', "link: unknown keys"),
    ("[[sensor]\n", "not valid TOML"),
])
def test_costs_file_errors_name_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(body)
    with pytest.raises(CostsError, match=message) as err:
        load_costs(path, ("ax", "ay"))
    assert "c.toml" in str(err.value)


def test_presets() -> None:
    assert cost_weights_preset("uniform") == CostWeights(energy_mj=0.0, uniform=1.0)
    assert cost_weights_preset("energy") == CostWeights()
    with pytest.raises(ValueError, match="unknown cost preset"):
        cost_weights_preset("gold")
