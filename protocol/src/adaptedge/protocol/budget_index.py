"""The budget index a bundle may carry: per item, the most accurate model whose worst-case cost
at the item's size fits the decision's budget (the indexing paper's retrieval), stdlib only.

Each indexed model is an operating point with its validation accuracy and its worst-case
training-scalar cost as polynomial coefficients in the item's size (``c0 + c1 n + ...``).

- ``kind = "polydom"``: sizes are cut at ``breaks`` (ascending) into intervals inside which no
  two cost curves cross; each interval holds its skyline (model ids by ascending cost, so by
  ascending accuracy). A lookup is a bisection on the breaks, then one on the skyline with the
  costs at the item's size: O(log intervals + log skyline) polynomial evaluations.
- ``kind = "greedy"``: sequences of nested feature sets (one per trade-off) and a skyline
  (models by ascending cost at ``median_size``, each with its sequence). A lookup bisects the
  skyline with the budget, then walks that model's sequence from its start, adding the next
  set while its cost at the item's size fits (the anytime walk).

Nothing fits: ``lookup`` returns None and the caller must not run any model (never overspend).
JSON form: ``{"kind", "models": [{"point", "accuracy", "cost": [c0, ...]}], "breaks",
"skylines"}`` or ``{"kind", "models", "median_size", "skyline", "sequences"}``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptedge.protocol.errors import BundleError

SLACK = 1e-9
"""A model fits when its cost * (1 + SLACK) <= budget: float sums never overspend."""
INDEX_KINDS = ("polydom", "greedy")


@dataclass(frozen=True, slots=True)
class IndexedModel:
    point: str
    accuracy: float
    cost: tuple[float, ...]


def cost_at(coeffs: Sequence[float], size: float) -> float:
    """``c0 + c1 size + c2 size^2 + ...`` (Horner)."""
    total = 0.0
    for c in reversed(coeffs):
        total = total * size + c
    return total


class BudgetIndex:
    """Device-side lookup of a bundle's ``budget_index`` (see the module docstring)."""

    def __init__(self, kind: str, models: Sequence[IndexedModel], *,
                 breaks: Sequence[float] = (), skylines: Sequence[Sequence[int]] = (),
                 median_size: float = 0.0, skyline: Sequence[Sequence[int]] = (),
                 sequences: Sequence[Sequence[int]] = ()) -> None:
        self.kind = kind
        self.models = tuple(models)
        self.breaks = [float(b) for b in breaks]
        self.skylines = [list(s) for s in skylines]
        self.median_size = float(median_size)
        self.skyline = [(int(m), int(q)) for m, q in skyline]
        self.sequences = [list(s) for s in sequences]
        self._reversed = [tuple(reversed(m.cost)) for m in self.models]
        self._median_costs = [cost_at(self.models[m].cost, self.median_size)
                              for m, _ in self.skyline]

    def worst_cost(self, model: int, size: float) -> float:
        """The worst-case training-scalar cost of ``model`` for an item of ``size``."""
        return cost_at(self.models[model].cost, size)

    def lookup(self, size: float, budget: float) -> int | None:
        """The model (position in ``models``) to run for an item of ``size`` under ``budget``."""
        if self.kind == "polydom":
            return self._last_fitting(self.skylines[bisect_right(self.breaks, size)], size,
                                      budget)
        k = bisect_right(self._median_costs, budget / (1.0 + SLACK))
        if not k:
            return None
        return self._walk(self.sequences[self.skyline[k - 1][1]], size, budget)

    def _last_fitting(self, sky: Sequence[int], size: float, budget: float) -> int | None:
        limit = budget / (1.0 + SLACK)
        rev = self._reversed
        lo, hi = 0, len(sky)
        while lo < hi:
            mid = (lo + hi) >> 1
            c = 0.0
            for coef in rev[sky[mid]]:
                c = c * size + coef
            if c <= limit:
                lo = mid + 1
            else:
                hi = mid
        return sky[lo - 1] if lo else None

    def _walk(self, sequence: Sequence[int], size: float, budget: float) -> int | None:
        chosen = None
        limit = budget / (1.0 + SLACK)
        for model in sequence:  # nested sets: costs only grow along a sequence
            if cost_at(self.models[model].cost, size) > limit:
                break
            chosen = model
        return chosen

    def size_of_index(self) -> int:
        """Stored entries: breaks plus every skyline slot (plus sequence slots)."""
        return (len(self.breaks) + sum(len(s) for s in self.skylines) + len(self.skyline)
                + sum(len(s) for s in self.sequences))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "models": [
            {"point": m.point, "accuracy": m.accuracy, "cost": list(m.cost)} for m in self.models]}
        if self.kind == "polydom":
            out.update(breaks=self.breaks, skylines=self.skylines)
        else:
            out.update(median_size=self.median_size, skyline=[list(p) for p in self.skyline],
                       sequences=self.sequences)
        return out

    @classmethod
    def from_dict(cls, raw: Any, points: Iterable[str], path: str = "budget_index"
                  ) -> BudgetIndex:
        """Validate a JSON index against the bundle's operating point names."""
        return _parse(raw, set(points), path)


def naive_lookup(models: Sequence[IndexedModel], size: float, budget: float) -> int | None:
    """NaiveLookup: scan every model; the most accurate whose cost at ``size`` fits."""
    best, best_acc = None, -math.inf
    limit = budget / (1.0 + SLACK)
    for i, m in enumerate(models):
        if m.accuracy > best_acc and cost_at(m.cost, size) <= limit:
            best, best_acc = i, m.accuracy
    return best


def _parse(raw: Any, points: set[str], path: str) -> BudgetIndex:
    def fail(msg: str, where: str = "") -> BundleError:
        return BundleError(msg, path=f"{path}.{where}" if where else path)

    if not isinstance(raw, Mapping) or raw.get("kind") not in INDEX_KINDS:
        raise fail(f"must be an object with kind one of {list(INDEX_KINDS)}")
    models = []
    for i, m in enumerate(raw.get("models") or []):
        cost = m.get("cost") if isinstance(m, Mapping) else None
        if (not isinstance(m, Mapping) or m.get("point") not in points
                or not _numbers(cost) or not cost or not _numbers([m.get("accuracy")])):
            raise fail("needs point (an operating point), accuracy and cost coefficients >= 0",
                       f"models[{i}]")
        models.append(IndexedModel(str(m["point"]), float(m["accuracy"]),
                                   tuple(float(c) for c in cost)))
    if not models:
        raise fail("must index at least one model", "models")
    ids = range(len(models))
    kind = str(raw["kind"])
    if kind == "polydom":
        breaks: Any = raw.get("breaks")
        skylines = raw.get("skylines")
        if (not _numbers(breaks) or list(breaks) != sorted(breaks) or not isinstance(skylines, list)
                or len(skylines) != len(breaks) + 1 or not all(_ids(s, ids) for s in skylines)):
            raise fail("needs ascending breaks and one skyline of model ids per interval")
        return BudgetIndex(kind, models, breaks=breaks, skylines=skylines)
    skyline, sequences = raw.get("skyline"), raw.get("sequences")
    if (not isinstance(sequences, list) or not all(_ids(s, ids) for s in sequences)
            or not isinstance(skyline, list) or not _numbers([raw.get("median_size")])
            or not all(isinstance(p, list) and len(p) == 2 and p[0] in ids
                       and p[1] in range(len(sequences)) for p in skyline)):
        raise fail("needs median_size, sequences of model ids and a skyline of [model, "
                   "sequence] pairs")
    return BudgetIndex(kind, models, median_size=raw["median_size"], skyline=skyline,
                       sequences=sequences)


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in values)


def _ids(values: Any, ids: range) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v in ids for v in values)


def checked_index(raw: dict[str, Any] | None, points: list[str]) -> dict[str, Any] | None:
    """A manifest's ``budget_index`` JSON as given, once ``BudgetIndex`` accepts it (a
    ``BundleError`` names the field otherwise)."""
    if raw is not None:
        BudgetIndex.from_dict(raw, points)
    return raw
