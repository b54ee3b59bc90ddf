"""Datasets with sensors and costs: the built-in benchmarks (vendored in ``data/``) and any CSV.

numpy + stdlib only (the edge CLI replays datasets on devices). ``load_dataset(name_or_path)``
returns a ``Dataset``: float32 features, int64 class indices, fixed train/validation/test
splits, the sensors that partition the features, the default training scalar and the link.
Provenance of every vendored file is in ``data/README.md``.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.manifest import CostWeights, LinkSpec, SensorSpec
from adaptedge.trainer.costs import PRESETS, feature_sensor_index, load_costs

SplitName = Literal["train", "validation", "test"]
Floats = npt.NDArray[np.float32]
Labels = npt.NDArray[np.int64]

UNIFORM = PRESETS["uniform"]
NOMINAL_NOTE = ("Sensor costs in real units are nominal (the data gives none): 1 mJ and 1 ms per "
                "feature read.")


class DatasetError(ValueError):
    """A dataset that cannot be loaded: unknown name, missing column, bad value, bad grouping."""


@dataclass(frozen=True)
class Dataset:
    name: str
    X_train: Floats
    y_train: Labels
    X_val: Floats
    y_val: Labels
    X_test: Floats
    y_test: Labels
    classes: tuple[str, ...]
    feature_names: tuple[str, ...]
    sensors: tuple[SensorSpec, ...]
    cost_weights: CostWeights
    link: LinkSpec = field(default_factory=LinkSpec)
    description: str = ""

    def split(self, name: SplitName) -> tuple[Floats, Labels]:
        """``(X, y)`` of "train", "validation" or "test"."""
        if name == "train":
            return self.X_train, self.y_train
        if name == "validation":
            return self.X_val, self.y_val
        if name == "test":
            return self.X_test, self.y_test
        raise DatasetError(f"unknown split {name!r}; choose train, validation or test")

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def data_dir() -> Path:
    """Where the vendored data lives: ``$ADAPTEDGE_DATA_DIR`` or the repository's ``data/``."""
    env = os.environ.get("ADAPTEDGE_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


# -- splits ----------------------------------------------------------------------------------
def stratified_split(y: npt.NDArray[np.int64], fractions: Sequence[float], seed: int
                     ) -> list[npt.NDArray[np.int64]]:
    """Seeded stratified partition of ``range(len(y))`` into len(fractions) sorted index arrays."""
    rng = np.random.default_rng(seed)
    parts: list[list[npt.NDArray[np.int64]]] = [[] for _ in fractions]
    bounds = np.cumsum(fractions)[:-1] / float(np.sum(fractions))
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        cuts = np.round(bounds * len(members)).astype(int)
        for part, chunk in zip(parts, np.split(members, cuts), strict=True):
            part.append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


# -- file reading ----------------------------------------------------------------------------
def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _require(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"data file {path} is missing: set ADAPTEDGE_DATA_DIR to the folder "
                           "holding adaptedge's vendored data/")
    return path


@lru_cache(maxsize=16)
def _read_rows(path: Path, delimiter: str | None) -> tuple[tuple[str, ...], ...]:
    """Rows of a (gzipped) delimited text file; ``delimiter=None`` splits on whitespace."""
    with _open_text(_require(path)) as fh:
        if delimiter is None:
            return tuple(tuple(line.split()) for line in fh if line.strip())
        return tuple(tuple(row) for row in csv.reader(fh, delimiter=delimiter) if row)


def _floats(rows: Sequence[Sequence[str]], names: Sequence[str], source: str) -> Floats:
    try:
        return np.asarray(rows, dtype=np.float64).astype(np.float32)
    except ValueError:
        pass
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            try:
                float(cell)
            except ValueError:
                what = "is empty" if not cell.strip() else f"holds {cell!r}"
                raise DatasetError(f"{source}: column {names[c]!r} row {r + 1} {what}; every "
                                   "feature column must be numeric") from None
    raise DatasetError(f"{source}: rows have different lengths")


# -- sensor helpers --------------------------------------------------------------------------
def _per_feature(names: Sequence[str], *, energy: float = 1.0, latency: float = 1.0,
                 money: Sequence[float] | None = None) -> tuple[SensorSpec, ...]:
    return tuple(SensorSpec(name, (i,), energy_mj=energy, latency_ms=latency,
                            money=0.0 if money is None else float(money[i]))
                 for i, name in enumerate(names))


def _groups(names: Sequence[str], groups: Sequence[Sequence[int]], *,
            per_feature_nominal: bool = True, energy: float = 1.0, latency: float = 1.0
            ) -> tuple[SensorSpec, ...]:
    """Sensors ``names[i]`` owning ``groups[i]``; nominal cost per feature or per sensor."""
    return tuple(SensorSpec(n, tuple(g),
                            energy_mj=energy * (len(g) if per_feature_nominal else 1),
                            latency_ms=latency * (len(g) if per_feature_nominal else 1))
                 for n, g in zip(names, groups, strict=True))


def _check_grouping(name: str, grouping: str | None, allowed: Sequence[str]) -> str:
    if grouping is None:
        return allowed[0]
    if grouping not in allowed:
        raise DatasetError(f"dataset {name!r} has no grouping {grouping!r}; choose one of "
                           f"{list(allowed)}")
    return grouping


@dataclass(frozen=True)
class _Parts:
    """A dataset before splitting: all rows plus split indices."""

    X: Floats
    y: Labels
    splits: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _assemble(name: str, parts: _Parts, classes: Sequence[str], feature_names: Sequence[str],
              sensors: tuple[SensorSpec, ...], weights: CostWeights, description: str,
              link: LinkSpec | None = None) -> Dataset:
    tr, va, te = parts.splits
    feature_sensor_index(sensors, len(feature_names))  # sensors partition the features
    return Dataset(name=name,
                   X_train=parts.X[tr], y_train=parts.y[tr],
                   X_val=parts.X[va], y_val=parts.y[va],
                   X_test=parts.X[te], y_test=parts.y[te],
                   classes=tuple(classes), feature_names=tuple(feature_names),
                   sensors=sensors, cost_weights=weights, link=link or LinkSpec(),
                   description=description)


def _seq(a: int, b: int) -> npt.NDArray[np.int64]:
    return np.arange(a, b, dtype=np.int64)


# -- built-ins -------------------------------------------------------------------------------
LETTER_FEATURES = ("x-box", "y-box", "width", "high", "onpix", "x-bar", "y-bar", "x2bar",
                   "y2bar", "xybar", "x2ybr", "xy2br", "x-ege", "xegvy", "y-ege", "yegvx")


def _letter_rows() -> tuple[Floats, npt.NDArray[np.str_]]:
    rows = _read_rows(data_dir() / "letter" / "letter-recognition.data.gz", ",")[1:]  # header
    letters = np.array([r[0] for r in rows])
    return _floats([r[1:] for r in rows], LETTER_FEATURES, "letter"), letters


_LETTER_SPLITS = (_seq(0, 12000), _seq(12000, 16000), _seq(16000, 20000))


def _letter_binary(grouping: str | None, seed: int) -> Dataset:
    _check_grouping("letter-binary", grouping, ("per-feature",))
    X, letters = _letter_rows()
    y = (letters >= "N").astype(np.int64)
    return _assemble(
        "letter-binary", _Parts(X, y, _LETTER_SPLITS), ("A-M", "N-Z"), LETTER_FEATURES,
        _per_feature(LETTER_FEATURES), UNIFORM,
        "UCI Letter Recognition in its original row order, A-M vs N-Z; rows 0-11999 train, "
        "12000-15999 validation, 16000-19999 test; every feature its own sensor, uniform cost "
        "(1 per feature read: the protocol of Nan & Saligrama 2017). " + NOMINAL_NOTE)


def _letter(grouping: str | None, seed: int) -> Dataset:
    g = _check_grouping("letter", grouping, ("4x4", "per-feature"))
    X, letters = _letter_rows()
    classes = tuple(chr(ord("A") + i) for i in range(26))
    y = (np.frombuffer(letters.astype("S1").tobytes(), dtype=np.uint8) - ord("A")).astype(np.int64)
    if g == "4x4":
        sensors = _groups([f"group{i + 1}" for i in range(4)],
                          [range(4 * i, 4 * i + 4) for i in range(4)])
        layout = "4 sensors of 4 consecutive features (the DAG paper's small-sensor setting)"
    else:
        sensors = _per_feature(LETTER_FEATURES)
        layout = "every feature its own sensor"
    return _assemble(
        "letter", _Parts(X, y, _LETTER_SPLITS), classes, LETTER_FEATURES, sensors, UNIFORM,
        f"UCI Letter Recognition, 26 classes, original row order; rows 0-11999 train, "
        f"12000-15999 validation, 16000-19999 test; {layout}; uniform cost (1 per feature). "
        + NOMINAL_NOTE)


SATIMAGE_CLASSES = ("red soil", "cotton crop", "grey soil", "damp grey soil",
                    "soil with vegetation stubble", "very damp grey soil")


def _satimage(grouping: str | None, seed: int) -> Dataset:
    g = _check_grouping("satimage", grouping, ("bands", "per-feature"))
    rows = _read_rows(data_dir() / "satimage" / "satimage.tsv.gz", "\t")
    header, body = rows[0], rows[1:]
    names = header[:-1]
    X = _floats([r[:-1] for r in body], names, "satimage")
    codes = np.array([int(float(r[-1])) for r in body])
    y = np.searchsorted(np.array([1, 2, 3, 4, 5, 7]), codes).astype(np.int64)
    train_all = _seq(0, 4435)
    fit, val = stratified_split(y[train_all], (0.75, 0.25), seed)
    if g == "bands":
        sensors = _groups([f"band{b + 1}" for b in range(4)],
                          [range(b, 36, 4) for b in range(4)])
        layout = "4 sensors = the 4 Landsat MSS spectral bands (9 features each)"
    else:
        sensors = _per_feature(names)
        layout = "every feature its own sensor"
    return _assemble(
        "satimage", _Parts(X, y, (train_all[fit], train_all[val], _seq(4435, 6435))),
        SATIMAGE_CLASSES, names, sensors, UNIFORM,
        "Statlog Landsat Satellite: original sat.trn (validation = a seeded stratified 25% of "
        f"it) and sat.tst; {layout}; uniform cost (1 per feature). " + NOMINAL_NOTE)


def _libsvm(path: Path, n_features: int) -> tuple[Floats, Labels]:
    rows = _read_rows(path, None)
    X = np.zeros((len(rows), n_features), dtype=np.float32)
    y = np.empty(len(rows), dtype=np.int64)
    for r, row in enumerate(rows):
        y[r] = int(float(row[0]))
        for cell in row[1:]:
            k, v = cell.split(":")
            X[r, int(k) - 1] = float(v)
    return X, y


def _miniboone(grouping: str | None, seed: int) -> Dataset:
    _check_grouping("miniboone-tiny", grouping, ("per-feature",))
    folder = data_dir() / "miniboone_tiny"
    parts = [_libsvm(folder / f"mbne_tiny_{s}.gz", 50) for s in ("tr", "tv", "te")]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    sizes = np.cumsum([0] + [len(p[1]) for p in parts])
    names = tuple(f"f{i + 1}" for i in range(50))
    return _assemble(
        "miniboone-tiny",
        _Parts(X, y, (_seq(sizes[0], sizes[1]), _seq(sizes[1], sizes[2]),
                      _seq(sizes[2], sizes[3]))),
        ("class0", "class1"), names, _per_feature(names), UNIFORM,
        "MiniBooNE particle identification, the class-balanced 2000/1000/2000 subsample of "
        "Nan et al. (given train/validation/test files; which label is signal is not "
        "documented); -999 is the dataset's missing-value sentinel, kept as is; every feature "
        "its own sensor, uniform cost. " + NOMINAL_NOTE)


def _thyroid(grouping: str | None, seed: int) -> Dataset:
    _check_grouping("thyroid", grouping, ("per-test",))
    folder = data_dir() / "thyroid_ann_costs"
    costs: list[tuple[str, float]] = []
    with _require(folder / "ann-thyroid.cost").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                key, value = line.strip().split(":")
                costs.append((key.strip(), float(value)))
    names = tuple(k for k, _ in costs)  # 20 tests; FTI (column 21) is left out
    blocks = []
    for split in ("train", "test"):
        rows = _read_rows(folder / f"ann-{split}.data.gz", None)
        blocks.append((_floats([r[:20] for r in rows], names, f"thyroid {split}"),
                       np.array([int(r[21]) - 1 for r in rows], dtype=np.int64)))
    X = np.concatenate([b[0] for b in blocks])
    y = np.concatenate([b[1] for b in blocks])
    n_train = len(blocks[0][1])
    fit, val = stratified_split(y[:n_train], (0.75, 0.25), seed)
    return _assemble(
        "thyroid", _Parts(X, y, (fit, val, _seq(n_train, len(y)))),
        ("class1", "class2", "class3 (normal)"), names,
        _per_feature(names, money=[c for _, c in costs]), PRESETS["money"],
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
    _check_grouping("heart", grouping, ("per-test",))
    folder = data_dir() / "heart_cleveland_costs"
    rows = _read_rows(folder / "heartdisease_fftrees.csv.gz", ",")
    header, body = rows[0], rows[1:]
    cost_rows = _read_rows(folder / "heart_cost.csv", ",")[1:]
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
            block = _floats([[cell] for cell in cells], [test], "heart")
            new = [test]
        cols = tuple(range(len(names), len(names) + len(new)))
        names += new
        columns.append(block)
        sensors.append(SensorSpec(test, cols, energy_mj=1.0, latency_ms=1.0,
                                  money=test_cost[test]))
    X = np.concatenate(columns, axis=1)
    splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
    return _assemble(
        "heart", _Parts(X, y, (splits[0], splits[1], splits[2])), ("no disease", "disease"),
        names, tuple(sensors), PRESETS["money"],
        "UCI Heart Disease (Cleveland, 303 rows, FFTrees copy), seeded stratified 60/20/20; "
        "each test a sensor with Turney's cost in USD (money, training scalar); categorical "
        "tests one-hot encoded inside their sensor. Energy/latency are nominal: 1 mJ and 1 ms "
        "per test.")


GAS_CLASSES = ("Ethanol", "Ethylene", "Ammonia", "Acetaldehyde", "Acetone", "Toluene")
GAS_BATCHES = (1, 2, 3, 4, 5, 6, 8, 9)
GAS_FEATURES = ("dR", "absdR", "ema_rise_0.001", "ema_rise_0.01", "ema_rise_0.1",
                "ema_decay_0.001", "ema_decay_0.01", "ema_decay_0.1")


def _gas(grouping: str | None, seed: int) -> Dataset:
    _check_grouping("gas", grouping, ("sensors",))
    names = tuple(f"s{s + 1}_{f}" for s in range(16) for f in GAS_FEATURES)
    rows = [r for b in GAS_BATCHES
            for r in _read_rows(data_dir() / "gas_sensor_drift" / f"batch{b}.dat.gz", ",")]
    try:
        y = np.array([GAS_CLASSES.index(r[0]) for r in rows], dtype=np.int64)
    except ValueError as exc:
        raise DatasetError(f"gas: unknown gas name ({exc})") from None
    X = _floats([r[2:] for r in rows], names, "gas")
    splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
    sensors = _groups([f"sensor{s + 1}" for s in range(16)],
                      [range(8 * s, 8 * s + 8) for s in range(16)], per_feature_nominal=False)
    return _assemble(
        "gas", _Parts(X, y, (splits[0], splits[1], splits[2])), GAS_CLASSES, names, sensors,
        PRESETS["energy"],
        "UCI Gas Sensor Array Drift, batches 1-6, 8, 9 concatenated (7 and 10 not vendored), "
        "seeded stratified 60/20/20; 16 metal-oxide sensors x 8 features; the concentration "
        "column is dropped; nominal cost 1 mJ and 1 ms per sensor read (training scalar: "
        "energy, so each sensor costs 1). Features are raw: scaling is the model's business.")


WALL_CLASSES = ("Move-Forward", "Sharp-Right-Turn", "Slight-Left-Turn", "Slight-Right-Turn")


def _wall_robot(grouping: str | None, seed: int) -> Dataset:
    _check_grouping("wall-robot", grouping, ("per-sensor",))
    rows = _read_rows(data_dir() / "wall_robot_navigation" / "sensor_readings_24.data.gz", ",")
    header, body = rows[0], rows[1:]
    names = header[:-1]
    try:
        y = np.array([WALL_CLASSES.index(r[-1]) for r in body], dtype=np.int64)
    except ValueError as exc:
        raise DatasetError(f"wall-robot: unknown class ({exc})") from None
    X = _floats([r[:-1] for r in body], names, "wall-robot")
    splits = stratified_split(y, (0.6, 0.2, 0.2), seed)
    return _assemble(
        "wall-robot", _Parts(X, y, (splits[0], splits[1], splits[2])), WALL_CLASSES, names,
        _per_feature(names), UNIFORM,
        "UCI Wall-Following Robot Navigation: 24 ultrasound sensors of one feature each, seeded "
        "stratified 60/20/20; unit cost per sensor. " + NOMINAL_NOTE)


_BUILTINS: dict[str, Callable[[str | None, int], Dataset]] = {
    "letter-binary": _letter_binary,
    "letter": _letter,
    "satimage": _satimage,
    "miniboone-tiny": _miniboone,
    "thyroid": _thyroid,
    "heart": _heart,
    "gas": _gas,
    "wall-robot": _wall_robot,
}


def list_datasets() -> list[str]:
    """Names of the built-in datasets."""
    return sorted(_BUILTINS)


# -- any CSV/TSV -----------------------------------------------------------------------------
def _csv_dataset(path: Path, target: str | None, grouping: str | None, seed: int) -> Dataset:
    if target is None:
        raise DatasetError(f"{path}: a CSV/TSV dataset needs --target COLUMN (the label column)")
    _check_grouping(path.name, grouping, ("per-feature",))
    plain = path.name[:-3] if path.name.endswith(".gz") else path.name
    delimiter = "\t" if plain.endswith((".tsv", ".tab")) else ","
    rows = _read_rows(path, delimiter)
    if len(rows) < 2:
        raise DatasetError(f"{path}: needs a header row and at least one data row")
    header, body = [h.strip() for h in rows[0]], rows[1:]
    if target not in header:
        raise DatasetError(f"{path}: no target column {target!r}; the columns are {header}")
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise DatasetError(f"{path}: row {bad[0] + 2} has {len(body[bad[0]])} cells, the header "
                           f"has {len(header)}")
    t = header.index(target)
    s = header.index("split") if "split" in header else None
    feat_cols = [i for i in range(len(header)) if i not in (t, s)]
    if not feat_cols:
        raise DatasetError(f"{path}: no feature columns besides {target!r}")
    names = tuple(header[i] for i in feat_cols)
    if len(set(names)) != len(names):
        raise DatasetError(f"{path}: duplicate column names in the header")
    X = _floats([[r[i] for i in feat_cols] for r in body], names, str(path))
    labels = [r[t].strip() for r in body]
    classes = _sorted_labels(set(labels))
    if len(classes) < 2:
        raise DatasetError(f"{path}: target {target!r} has fewer than two classes")
    y = np.array([classes.index(v) for v in labels], dtype=np.int64)
    if s is not None:
        tags = np.array([r[s].strip().lower() for r in body])
        unknown = sorted(set(tags.tolist()) - {"train", "validation", "test"})
        if unknown:
            raise DatasetError(f"{path}: column 'split' holds {unknown}; allowed values are "
                               "train, validation, test")
        splits = tuple(np.flatnonzero(tags == v).astype(np.int64)
                       for v in ("train", "validation", "test"))
        empty = [v for v, idx in zip(("train", "validation", "test"), splits, strict=True)
                 if not idx.size]
        if empty:
            raise DatasetError(f"{path}: column 'split' has no {empty[0]!r} rows")
        how = "splits from the 'split' column"
    else:
        splits = tuple(stratified_split(y, (0.6, 0.2, 0.2), seed))
        how = f"seeded (seed {seed}) stratified 60/20/20 split"
    return _assemble(
        Path(plain).stem, _Parts(X, y, (splits[0], splits[1], splits[2])), classes, names,
        _per_feature(names), UNIFORM,
        f"{path.name}: target {target!r}, {how}; every feature its own sensor, uniform cost. "
        + NOMINAL_NOTE)


def _sorted_labels(values: set[str]) -> tuple[str, ...]:
    try:
        return tuple(sorted(values, key=float))
    except ValueError:
        return tuple(sorted(values))


# -- entry point -----------------------------------------------------------------------------
def load_dataset(name_or_path: str, *, target: str | None = None, costs: str | Path | None = None,
                 grouping: str | None = None, seed: int = 0) -> Dataset:
    """A built-in dataset by name (see ``list_datasets``) or a CSV/TSV(.gz) file with ``target``.

    ``costs`` (a TOML file, see ``trainer.costs``) replaces the sensors, training weights and
    link; ``grouping`` picks a built-in sensor grouping (e.g. ``letter``: "4x4" or
    "per-feature"); ``seed`` fixes every random split.
    """
    if name_or_path in _BUILTINS:
        if target is not None:
            raise DatasetError(f"built-in dataset {name_or_path!r} has a fixed target; drop "
                               "--target (it is for CSV files)")
        dataset = _BUILTINS[name_or_path](grouping, seed)
    else:
        path = Path(name_or_path)
        looks_like_file = path.suffix in (".csv", ".tsv", ".tab", ".gz", ".txt") or path.exists()
        if not looks_like_file:
            raise DatasetError(f"unknown dataset {name_or_path!r}; built-ins are "
                               f"{list_datasets()}, or give a path to a CSV/TSV(.gz) file")
        if not path.is_file():
            raise DatasetError(f"data file {path} not found")
        dataset = _csv_dataset(path, target, grouping, seed)
    if costs is not None:
        if grouping is not None:
            raise DatasetError("give either a costs file or a grouping, not both (the costs "
                               "file defines the sensors)")
        sensors, weights, link = load_costs(costs, dataset.feature_names)
        dataset = Dataset(**{**dataset.__dict__, "sensors": sensors, "cost_weights": weights,
                             "link": link,
                             "description": dataset.description + f" Sensors and costs from "
                             f"{Path(costs).name}."})
    return dataset
