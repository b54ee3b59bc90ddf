"""The manifest's optional ``size_poly`` of a sensor: costs as polynomials in the item's size.

JSON form ``{"energy_mj": [c0, c1, ...], ...}`` meaning ``c0 + c1 n + c2 n^2 + ...``; the
coefficients are finite and >= 0, so a cost never falls below zero and never shrinks as the
item grows.
"""

from __future__ import annotations

import math
from typing import Any

from adaptedge.protocol.errors import BundleError

SIZE_UNITS = ("energy_mj", "latency_ms", "money")
"""The sensor cost units that may be polynomials in the item's size."""
MAX_COEFFICIENTS = 8


def parse_size_poly(raw: Any, path: str) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """``{unit: [c0, ...]}`` -> ``((unit, (c0, ...)), ...)``; ``BundleError`` naming the field."""
    if not isinstance(raw, dict):
        raise BundleError("must be an object of cost unit -> coefficients", path=path)
    out: list[tuple[str, tuple[float, ...]]] = []
    for unit, coeffs in raw.items():
        where = f"{path}.{unit}"
        if unit not in SIZE_UNITS:
            raise BundleError(f"unknown cost unit (allowed: {list(SIZE_UNITS)})", path=where)
        if not isinstance(coeffs, list) or not 0 < len(coeffs) <= MAX_COEFFICIENTS:
            raise BundleError(f"must be a list of 1..{MAX_COEFFICIENTS} polynomial "
                              "coefficients", path=where)
        for c in coeffs:
            if (isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c)
                    or c < 0):
                raise BundleError(f"coefficients must be finite numbers >= 0, got {c!r}",
                                  path=where)
        out.append((unit, tuple(float(c) for c in coeffs)))
    return tuple(out)
