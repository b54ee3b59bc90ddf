"""The built-in benchmarks, vendored in ``data/`` (provenance in ``data/README.md``)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import SensorSpec
from adaptedge.trainer.data.costs import PRESETS
from adaptedge.trainer.data.data_files import parse_floats, read_rows, require_file
from adaptedge.trainer.data.dataset_core import (
    NOMINAL_NOTE,
    UNIFORM,
    Dataset,
    DatasetError,
    Floats,
    Labels,
    Parts,
    assemble,
    check_grouping,
    data_dir,
    per_feature,
    sensor_groups,
)
from adaptedge.trainer.data.splits import stratified_split


def _seq(a: int, b: int) -> npt.NDArray[np.int64]:
    return np.arange(a, b, dtype=np.int64)


# -- the datasets -------------------------------------------------------------------------------
LETTER_FEATURES = ("x-box", "y-box", "width", "high", "onpix", "x-bar", "y-bar", "x2bar",
                   "y2bar", "xybar", "x2ybr", "xy2br", "x-ege", "xegvy", "y-ege", "yegvx")


def _letter_rows() -> tuple[Floats, npt.NDArray[np.str_]]:
    rows = read_rows(data_dir() / "letter" / "letter-recognition.data.gz", ",")[1:]  # header
    letters = np.array([r[0] for r in rows])
    return parse_floats([r[1:] for r in rows], LETTER_FEATURES, "letter"), letters


_LETTER_SPLITS = (_seq(0, 12000), _seq(12000, 16000), _seq(16000, 20000))


def _letter_binary(grouping: str | None, seed: int) -> Dataset:
    check_grouping("letter-binary", grouping, ("per-feature",))
    X, letters = _letter_rows()
    y = (letters >= "N").astype(np.int64)
    return assemble(
        "letter-binary", Parts(X, y, _LETTER_SPLITS), ("A-M", "N-Z"), LETTER_FEATURES,
        per_feature(LETTER_FEATURES), UNIFORM,
        "UCI Letter Recognition in its original row order, A-M vs N-Z; rows 0-11999 train, "
        "12000-15999 validation, 16000-19999 test; every feature its own sensor, uniform cost "
        "(1 per feature read: the protocol of Nan & Saligrama 2017). " + NOMINAL_NOTE)


def _letter(grouping: str | None, seed: int) -> Dataset:
    g = check_grouping("letter", grouping, ("4x4", "per-feature"))
    X, letters = _letter_rows()
    classes = tuple(chr(ord("A") + i) for i in range(26))
    y = (np.frombuffer(letters.astype("S1").tobytes(), dtype=np.uint8) - ord("A")).astype(np.int64)
    if g == "4x4":
        sensors = sensor_groups([f"group{i + 1}" for i in range(4)],
                          [range(4 * i, 4 * i + 4) for i in range(4)])
        layout = "4 sensors of 4 consecutive features (the DAG paper's small-sensor setting)"
    else:
        sensors = per_feature(LETTER_FEATURES)
        layout = "every feature its own sensor"
    return assemble(
        "letter", Parts(X, y, _LETTER_SPLITS), classes, LETTER_FEATURES, sensors, UNIFORM,
        f"UCI Letter Recognition, 26 classes, original row order; rows 0-11999 train, "
        f"12000-15999 validation, 16000-19999 test; {layout}; uniform cost (1 per feature). "
        + NOMINAL_NOTE)


SATIMAGE_CLASSES = ("red soil", "cotton crop", "grey soil", "damp grey soil",
                    "soil with vegetation stubble", "very damp grey soil")


def _satimage(grouping: str | None, seed: int) -> Dataset:
    g = check_grouping("satimage", grouping, ("bands", "per-feature"))
    rows = read_rows(data_dir() / "satimage" / "satimage.tsv.gz", "\t")
    header, body = rows[0], rows[1:]
    names = header[:-1]
    X = parse_floats([r[:-1] for r in body], names, "satimage")
    codes = np.array([int(float(r[-1])) for r in body])
    y = np.searchsorted(np.array([1, 2, 3, 4, 5, 7]), codes).astype(np.int64)
    train_all = _seq(0, 4435)
    fit, val = stratified_split(y[train_all], (0.75, 0.25), seed)
    if g == "bands":
        sensors = sensor_groups([f"band{b + 1}" for b in range(4)],
                          [range(b, 36, 4) for b in range(4)])
        layout = "4 sensors = the 4 Landsat MSS spectral bands (9 features each)"
    else:
        sensors = per_feature(names)
        layout = "every feature its own sensor"
    return assemble(
        "satimage", Parts(X, y, (train_all[fit], train_all[val], _seq(4435, 6435))),
        SATIMAGE_CLASSES, names, sensors, UNIFORM,
        "Statlog Landsat Satellite: original sat.trn (validation = a seeded stratified 25% of "
        f"it) and sat.tst; {layout}; uniform cost (1 per feature). " + NOMINAL_NOTE)


def _libsvm(path: Path, n_features: int) -> tuple[Floats, Labels]:
    rows = read_rows(path, None)
    X = np.zeros((len(rows), n_features), dtype=np.float32)
    y = np.empty(len(rows), dtype=np.int64)
    for r, row in enumerate(rows):
        y[r] = int(float(row[0]))
        for cell in row[1:]:
            k, v = cell.split(":")
            X[r, int(k) - 1] = float(v)
    return X, y


def _miniboone(grouping: str | None, seed: int) -> Dataset:
    check_grouping("miniboone-tiny", grouping, ("per-feature",))
    folder = data_dir() / "miniboone_tiny"
    parts = [_libsvm(folder / f"mbne_tiny_{s}.gz", 50) for s in ("tr", "tv", "te")]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    sizes = np.cumsum([0] + [len(p[1]) for p in parts])
    names = tuple(f"f{i + 1}" for i in range(50))
    return assemble(
        "miniboone-tiny",
        Parts(X, y, (_seq(sizes[0], sizes[1]), _seq(sizes[1], sizes[2]),
                      _seq(sizes[2], sizes[3]))),
        ("class0", "class1"), names, per_feature(names), UNIFORM,
        "MiniBooNE particle identification, the class-balanced 2000/1000/2000 subsample of "
        "Nan et al. (given train/validation/test files; which label is signal is not "
        "documented); -999 is the dataset's missing-value sentinel, kept as is; every feature "
        "its own sensor, uniform cost. " + NOMINAL_NOTE)


def _thyroid(grouping: str | None, seed: int) -> Dataset:
    check_grouping("thyroid", grouping, ("per-test",))
    folder = data_dir() / "thyroid_ann_costs"
    costs: list[tuple[str, float]] = []
    with require_file(folder / "ann-thyroid.cost").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                key, value = line.strip().split(":")
                costs.append((key.strip(), float(value)))
    names = tuple(k for k, _ in costs)  # 20 tests; FTI (column 21) is left out
    blocks = []
    for split in ("train", "test"):
        rows = read_rows(folder / f"ann-{split}.data.gz", None)
        blocks.append((parse_floats([r[:20] for r in rows], names, f"thyroid {split}"),
                       np.array([int(r[21]) - 1 for r in rows], dtype=np.int64)))
    X = np.concatenate([b[0] for b in blocks])
    y = np.concatenate([b[1] for b in blocks])
    n_train = len(blocks[0][1])
    fit, val = stratified_split(y[:n_train], (0.75, 0.25), seed)
    return assemble(
        "thyroid", Parts(X, y, (fit, val, _seq(n_train, len(y)))),
        ("class1", "class2", "class3 (normal)"), names,
        per_feature(names, money=[c for _, c in costs]), PRESETS["money"],
        "UCI Thyroid (ANN version): ann-train (validation = a seeded stratified 25% of it) and "
        "ann-test; each test a sensor with Turney's cost (money, training scalar); FTI "
        "(column 21) is left out: it is computed from TT4 and T4U and has no cost of its own. "
        "Energy/latency are nominal: 1 mJ and 1 ms per test.")


HEART_CATEGORIES = {
    "cp": ("ta", "aa", "np", "a"),
    "restecg": ("normal", "abnormal", "hypertrophy"),
    "slope": ("up", "flat", "down"),
    "thal": ("normal", "fd", "rd"),
}


def _heart(grouping: str | None, seed: int) -> Dataset:
    check_grouping("heart", grouping, ("per-test",))
    folder = data_dir() / "heart_cleveland_costs"
    rows = read_rows(folder / "heartdisease_fftrees.csv.gz", ",")
    header, body = rows[0], rows[1:]
    cost_rows = read_rows(folder / "heart_cost.csv", ",")[1:]
    test_cost = {r[0]: float(r[1]) for r in cost_rows}
    y = np.array([int(r[0]) for r in body], dtype=np.int64)
    columns: list[Floats] = []
    names: list[str] = []
    sensors: list[SensorSpec] = []
    for c, test in enumerate(header[1:], start=1):
        cells = [r[c] for r in body]
        if test in HEART_CATEGORIES:
            cats = HEART_CATEGORIES[test]
            unknown = sorted(set(cells) - set(cats))
            if unknown:
                raise DatasetError(f"heart: column {test!r} holds unknown categories {unknown}")
            block = np.array([[cell == cat for cat in cats] for cell in cells], dtype=np.float32)
            new = [f"{test}={cat}" for cat in cats]
        else:
            block = parse_floats([[cell] for cell in cells], [test], "heart")
            new = [test]
        cols = tuple(range(len(names), len(names) + len(new)))
        names += new
        columns.append(block)
        sensors.append(SensorSpec(test, cols, energy_mj=1.0, latency_ms=1.0,
                                  money=test_cost[test]))
    X = np.concatenate(columns, axis=1)
    splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
    return assemble(
        "heart", Parts(X, y, (splits[0], splits[1], splits[2])), ("no disease", "disease"),
        names, tuple(sensors), PRESETS["money"],
        "UCI Heart Disease (Cleveland, 303 rows, FFTrees copy), seeded stratified 60/20/20; "
        "each test a sensor with Turney's cost in USD (money, training scalar); categorical "
        "tests one-hot encoded inside their sensor. Energy/latency are nominal: 1 mJ and 1 ms "
        "per test.")


GAS_CLASSES = ("Ethanol", "Ethylene", "Ammonia", "Acetaldehyde", "Acetone", "Toluene")
GAS_BATCHES = (1, 2, 3, 4, 5, 6, 8, 9)
GAS_FEATURES = ("dR", "absdR", "ema_rise_0.001", "ema_rise_0.01", "ema_rise_0.1",
                "ema_decay_0.001", "ema_decay_0.01", "ema_decay_0.1")


def gas_rows() -> tuple[Floats, npt.NDArray[np.int64], npt.NDArray[np.int64], tuple[str, ...]]:
    """All vendored rows of the gas drift data: X, y, each row's batch, feature names."""
    X, y, batch, names, _ = gas_rows_with_concentration()
    return X, y, batch, names


def gas_rows_with_concentration() -> tuple[Floats, npt.NDArray[np.int64], npt.NDArray[np.int64],
                                           tuple[str, ...], npt.NDArray[np.float64]]:
    """``gas_rows`` plus each reading's concentration in ppmv (the file's second column)."""
    names = tuple(f"s{s + 1}_{f}" for s in range(16) for f in GAS_FEATURES)
    per_batch = [read_rows(data_dir() / "gas_sensor_drift" / f"batch{b}.dat.gz", ",")
                 for b in GAS_BATCHES]
    rows = [r for batch in per_batch for r in batch]
    batch = np.repeat(np.array(GAS_BATCHES, dtype=np.int64), [len(b) for b in per_batch])
    try:
        y = np.array([GAS_CLASSES.index(r[0]) for r in rows], dtype=np.int64)
    except ValueError as exc:
        raise DatasetError(f"gas: unknown gas name ({exc})") from None
    ppmv = parse_floats([r[1:2] for r in rows], ("concentration",), "gas").astype(np.float64)
    return parse_floats([r[2:] for r in rows], names, "gas"), y, batch, names, ppmv[:, 0]


GAS_NOTE = ("16 metal-oxide sensors x 8 features; the concentration column is dropped; nominal "
            "cost 1 mJ and 1 ms per sensor read (training scalar: energy, so each sensor costs "
            "1). Features are raw: scaling is the model's business.")


def gas_sensors() -> tuple[SensorSpec, ...]:
    """The gas data's 16 sensors of 8 features each, nominal cost per sensor read."""
    return sensor_groups([f"sensor{s + 1}" for s in range(16)],
                         [range(8 * s, 8 * s + 8) for s in range(16)], per_feature_nominal=False)


def _gas(grouping: str | None, seed: int, by_batch: bool = False) -> Dataset:
    check_grouping("gas-time" if by_batch else "gas", grouping, ("sensors",))
    X, y, batch, names = gas_rows()
    if by_batch:  # 36 months of drift: train on the past, validate and test on the future
        splits = [np.flatnonzero(np.isin(batch, part)) for part in ((1, 2, 3, 4, 5), (6,), (8, 9))]
        how = ("time-ordered by batch: train batches 1-5, validation batch 6, test batches 8-9 "
               "(the seed does not change it)")
    else:
        splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
        how = "seeded stratified 60/20/20 (near-duplicate readings of a batch on both sides)"
    return assemble(
        "gas-time" if by_batch else "gas", Parts(X, y, (splits[0], splits[1], splits[2])),
        GAS_CLASSES, names, gas_sensors(), PRESETS["energy"],
        "UCI Gas Sensor Array Drift, batches 1-6, 8, 9 concatenated (7 and 10 not vendored), "
        f"{how}; {GAS_NOTE}")


WALL_CLASSES = ("Move-Forward", "Sharp-Right-Turn", "Slight-Left-Turn", "Slight-Right-Turn")


def _wall_robot(grouping: str | None, seed: int, by_time: bool = False) -> Dataset:
    name = "wall-robot-time" if by_time else "wall-robot"
    check_grouping(name, grouping, ("per-sensor",))
    rows = read_rows(data_dir() / "wall_robot_navigation" / "sensor_readings_24.data.gz", ",")
    header, body = rows[0], rows[1:]
    names = header[:-1]
    try:
        y = np.array([WALL_CLASSES.index(r[-1]) for r in body], dtype=np.int64)
    except ValueError as exc:
        raise DatasetError(f"wall-robot: unknown class ({exc})") from None
    X = parse_floats([r[:-1] for r in body], names, "wall-robot")
    if by_time:  # the file is the robot's trajectory in time order: contiguous blocks
        cuts = [0, round(0.6 * len(y)), round(0.8 * len(y)), len(y)]
        splits = [np.arange(a, b, dtype=np.int64) for a, b in pairwise(cuts)]
        how = ("time-ordered: the first 60% of the trajectory train, the next 20% validation, "
               "the last 20% test (the seed does not change it)")
    else:
        splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
        how = "seeded stratified 60/20/20 (neighbouring readings on both sides)"
    return assemble(
        name, Parts(X, y, (splits[0], splits[1], splits[2])), WALL_CLASSES, names,
        per_feature(names), UNIFORM,
        f"UCI Wall-Following Robot Navigation: 24 ultrasound sensors of one feature each, {how}; "
        "unit cost per sensor. " + NOMINAL_NOTE)


BUILTINS: dict[str, Callable[[str | None, int], Dataset]] = {
    "letter-binary": _letter_binary,
    "letter": _letter,
    "satimage": _satimage,
    "miniboone-tiny": _miniboone,
    "thyroid": _thyroid,
    "heart": _heart,
    "gas": _gas,
    "wall-robot": _wall_robot,
    "gas-time": lambda grouping, seed: _gas(grouping, seed, by_batch=True),
    "wall-robot-time": lambda grouping, seed: _wall_robot(grouping, seed, by_time=True),
}
