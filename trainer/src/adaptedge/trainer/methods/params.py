"""The one table of method-specific parameters (``adaptedge train --param KEY=VALUE``,
``train_bundle(extra=...)``, ``MethodOptions.extra``), in the spirit of scikit-learn's
``_parameter_constraints``: one line per key naming its type, its bounds or choices and its use.

``check_params(method, extra)`` converts command-line strings to the declared type and refuses a
mistake in one line naming the key, what it expects and the method's valid keys. An empty entry
means the method takes no parameters. To add a method, add one ``METHOD_PARAMS`` entry (a tuple
of ``Param``, empty if none); methods sharing parameters share a tuple (see ``DAG_PARAMS``).
A method with no entry at all (a plug-in registered from outside) gets its ``extra`` unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from adaptedge.trainer.errors import ParamError as ParamError

Kind = Literal["bool", "int", "float", "str", "floats", "mapping"]
"""``floats``: comma-separated numbers (or a sequence); ``mapping``: a dict, from Python only."""

_KIND_WORDS: dict[Kind, str] = {
    "bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
    "floats": "comma-separated numbers", "mapping": "a dict (from Python only)",
}
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Param:
    key: str
    kind: Kind
    help: str
    choices: tuple[str, ...] = ()
    min: float | None = None

    def expected(self) -> str:
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.min is not None:
            return f">= {self.min:g} ({_KIND_WORDS[self.kind]})"
        return _KIND_WORDS[self.kind]


DAG_PARAMS: tuple[Param, ...] = (
    Param("lambdas", "floats", "sensor-cost prices of the sweep, each >= 0", min=0),
    Param("escalation", "str", "escalation prices: both (with and without), on or off",
          choices=("both", "on", "off")),
    Param("reduction", "str", "graph reduction model of policy=linear",
          choices=("ridge", "lr", "both")),
    Param("policy", "str", "node policy: linear (default; ridge or lr, see reduction) or paper "
          "(the paper's filter tree of logistic regressions on polynomial features)",
          choices=("linear", "paper")),
    Param("policy_degree", "int", "polynomial degree of policy=paper (default 2)", min=1),
    Param("classifier", "str", "node classifiers (auto: per node, the lower validation "
          "log-loss of per-subset and masked)",
          choices=("auto", "per-subset", "masked", "hgb", "hgb-wide", "lr")),
    Param("max_nodes", "int", "nodes of a graph beyond max_exhaustive sensors", min=1),
    Param("max_exhaustive", "int", "up to this many sensors, every subset is a node", min=1),
    Param("lattice", "str", "graph beyond max_exhaustive sensors: tracks (greedy order and "
          "subsets), blocks (unions of gain-order blocks) or auto (tracks up to 24 sensors, "
          "blocks beyond)", choices=("auto", "tracks", "blocks")),
    Param("n_subsets", "int", "greedy subsets kept", min=1),
    Param("max_subset_size", "int", "largest greedy subset", min=1),
    Param("max_iter", "int", "Graph-Reduce iterations", min=1),
    Param("subset_trees", "int", "boosting budget of a per-subset classifier", min=1),
    Param("masked_trees", "int", "boosting budget of the masked classifier", min=1),
    Param("masked_replicas", "int", "masked copies of each training row", min=1),
)

INDEX_CLASSIFIER = Param("classifier", "str", "the model of each sensor set: lr (logistic "
                         "regression, default) or hgb (boosted trees)", choices=("lr", "hgb"))
POLYDOM_PARAMS: tuple[Param, ...] = (
    INDEX_CLASSIFIER,
    Param("epsilon", "float", "ε of the lattice pruning, exactly (default: the smallest of "
          "0.2 ... 0.01 within max_sets)", min=0),
    Param("max_sets", "int", "sensor sets the progressive ε may score (default 1,000 with "
          "--quick, else 4,000)", min=1),
    Param("delta", "float", "tolerance to non-monotone accuracies (default 0)", min=0),
    Param("covering", "bool", "also prune by the covering property (3.4; exact for the "
          "paper's combiner only)"),
)

METHOD_PARAMS: dict[str, tuple[Param, ...]] = {
    "polydom": POLYDOM_PARAMS,
    "greedy": (INDEX_CLASSIFIER,),
    "greedy-acc": (INDEX_CLASSIFIER,),
    "greedy-cost": (INDEX_CLASSIFIER,),
    "adapt-gbrt": (
        Param("warm_start", "bool", "also sweep warm starts from greedy sensor prefixes"),
        Param("margin_weights", "floats", "gate margin weights tried per fitted model", min=0),
        Param("grid", "mapping", "replaces (p_full, gamma) values of the sweep grid"),
        Param("warm_grid", "mapping", "replaces (p_full, gamma) values of the warm starts"),
        Param("params", "mapping", "AdaptGbrtClassifier parameters of every fit"),
    ),
    "adapt-lin": (),
    "l1": (),
    "greedy-miser": (
        Param("tree_cost", "float", "price of one tree evaluation, as a fraction of the mean "
              "sensor read (0: trees are free)", min=0),
        Param("gammas", "floats", "the feature-cost prices λ swept, each >= 0", min=0),
        Param("params", "mapping", "GreedyMiser parameters replacing FULL_STRENGTH's (e.g. "
              "n_rounds, max_depth)"),
        Param("patience", "int", "stop a λ's boosting once validation accuracy has not risen "
              "for this many trees (0: grow them all, as the paper)", min=0),
    ),
    "confidence": (
        Param("families", "str", "cheap-model families swept, comma-separated: hgb "
              "(HistGradientBoosting), gbt (the trainer's boosted trees), lr (logistic "
              "regression); default all three (--quick: hgb,lr)"),
        Param("ks", "floats", "sensor counts swept (default 1..min(sensors, 12) and 1/4, 3/8, "
              "1/2, 3/4 of the sensors; --quick 1,2,4,6)", min=1),
        Param("order", "str", "sensor order: gain (cost-blind split gain), cost-aware (gain "
              "per unit cost) or both (default; --quick: gain)",
              choices=("gain", "cost-aware", "both")),
        Param("quantiles", "int", "thresholds: this many validation quantiles of the top "
              "probability (default 61; --quick 21)", min=2),
        Param("hgb_iter", "int", "boosting iterations of the hgb family (default 300; --quick "
              "50)", min=1),
    ),
    "auto": (
        Param("time_budget", "float", "seconds for all methods (adaptedge train "
              "--time-budget; default: 1.5 x the estimates of every method that applies)",
              min=0),
        Param("methods", "str", "comma-separated methods to consider, in order (default: "
              "trainer.methods.auto.DEFAULT; adapt-lin only when named)"),
        Param("params", "mapping", "per-method options, {method: {key: value}}"),
    ),
    "cegb": (
        Param("coupled", "floats", "CEGB coupled feature prices swept (per training row, in "
              "mean-sensor-cost units; 0 skips), one fit each", min=0),
        Param("lazy", "floats", "CEGB lazy (per-row) feature prices swept, one fit each", min=0),
        Param("escalate", "floats", "validation escalation rates whose confidence quantiles "
              "become the escalation cuts (0: never escalate)", min=0),
        Param("n_rounds", "int", "most boosting rounds of a fit (the best validation round is "
              "kept)", min=1),
        Param("patience", "int", "early stopping: rounds without a better validation log-loss",
              min=1),
        Param("learning_rate", "float", "LightGBM learning_rate", min=0),
        Param("num_leaves", "int", "LightGBM num_leaves", min=2),
        Param("min_data_in_leaf", "int", "LightGBM min_data_in_leaf", min=1),
        Param("penalty_split", "float", "LightGBM cegb_penalty_split", min=0),
        Param("iteration", "str", "validation metric whose best round is kept",
              choices=("error", "logloss")),
    ),
    "dag": DAG_PARAMS,
    "static": DAG_PARAMS,
    "cascade": DAG_PARAMS,
}


def _convert(p: Param, value: Any) -> Any:
    """``value`` as ``p.kind``; raises ValueError (or TypeError) when it is not one."""
    text = value.strip() if isinstance(value, str) else None
    if p.kind == "bool":
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError
    if p.kind == "int":
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        return int(text if text is not None else value)
    if p.kind == "float":
        return float(text if text is not None else value)
    if p.kind == "floats":
        items = text.split(",") if text is not None else list(value)
        out = tuple(float(v) for v in items)
        if not out:
            raise ValueError
        return out
    if p.kind == "mapping":
        if not isinstance(value, Mapping):
            raise TypeError
        return dict(value)
    if text is None:
        raise TypeError
    return text


def _in_range(p: Param, value: Any) -> bool:
    if p.choices:
        return value in p.choices
    if p.min is None:
        return True
    values: Sequence[float] = value if isinstance(value, tuple) else (value,)
    return all(v >= p.min for v in values)


def check_params(method: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` with each value converted to its declared kind; a ParamError names the key,
    what it expects and ``method``'s valid keys."""
    if method not in METHOD_PARAMS:
        return dict(extra)
    table = {p.key: p for p in METHOD_PARAMS[method]}
    valid = f"{method} options: {', '.join(table)}" if table else f"{method} takes no --param"
    out: dict[str, Any] = {}
    for key, value in extra.items():
        p = table.get(key)
        if p is None:
            raise ParamError(f"unknown {method} options [{key!r}]; {valid}")
        try:
            converted = _convert(p, value)
        except (TypeError, ValueError, OverflowError):
            converted = None
        if converted is None or not _in_range(p, converted):
            raise ParamError(f"{key} must be {p.expected()}, got {value!r} ({valid})")
        out[key] = converted
    return out


def describe(method: str) -> str:
    """One line per parameter of ``method``, for help texts."""
    return "\n".join(f"{p.key}: {p.expected()}; {p.help}" for p in METHOD_PARAMS.get(method, ()))
