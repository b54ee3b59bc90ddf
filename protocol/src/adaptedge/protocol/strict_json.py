"""Strict JSON for files a stranger may have written (bundle manifests, signatures).

Refused, each with one ``BundleError`` line: duplicate keys (two readers could disagree on
which one counts), ``NaN``/``Infinity`` and numbers that overflow to infinity, integers longer
than ``MAX_INT_DIGITS`` digits, nesting deeper than ``MAX_DEPTH``, and bytes that are not UTF-8.
"""

from __future__ import annotations

import json
import math
from typing import Any

from adaptedge.protocol.errors import BundleError

MAX_DEPTH = 64
MAX_INT_DIGITS = 64


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BundleError(f"has the key {key[:64]!r} twice in one object")
        out[key] = value
    return out


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BundleError(f"has an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BundleError(f"has a number out of range ({text[:32]})")
    return value


def _constant(text: str) -> Any:
    raise BundleError(f"has {text}, which JSON does not allow")


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def loads_strict(data: bytes | str) -> Any:
    """Parse JSON text strictly (see the module docstring); raise ``BundleError`` on anything else."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise BundleError(f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_int,
                           parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise BundleError(f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise BundleError(f"nests objects or arrays deeper than {MAX_DEPTH} levels") from None
    if _depth(value) > MAX_DEPTH:
        raise BundleError(f"nests objects or arrays deeper than {MAX_DEPTH} levels")
    return value
