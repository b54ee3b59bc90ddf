"""A node's action head: the few numbers that turn one shared model into many operating points.

Without a head a node's model outputs its ``action_scores`` itself. With one (``model.
action_head`` in the manifest) the model outputs ``action_basis`` float32 [N, k] instead and

    action_scores[:, j] = ((basis[:, 0] * W[0][j] + basis[:, 1] * W[1][j]) + ...) + bias[j]

in float32, each product and sum rounded once, in exactly this order (``apply_head``; the C
exporter writes the same statements). The points of one ADAPT-GBRT fit differ only in the gate
threshold and the margin weight, so all of them can name one model file (basis
``[g, margin]``) and carry their own ``W = [[-1, 1], [w, -w]]``, ``bias = [t, -t]``.

A bundle with a head has schema version ``HEAD_SCHEMA_VERSION`` (3): readers that predate heads
refuse it in one line instead of walking a basis as if it were scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.errors import BundleError

BASIS_OUTPUT = "action_basis"
"""The output of a model whose node has an action head: float32 [N, k]."""
MAX_BASIS = 16
"""Longest basis a head may take (a head is a handful of numbers, not a model)."""

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class ActionHead:
    """``action_scores = basis @ weights + bias`` in float32 (``weights`` [k][n_actions])."""

    weights: tuple[tuple[float, ...], ...]
    bias: tuple[float, ...]

    @property
    def basis_width(self) -> int:
        return len(self.weights)

    @property
    def n_actions(self) -> int:
        return len(self.bias)


@lru_cache(maxsize=1024)
def head_arrays(head: ActionHead) -> tuple[F32, F32]:
    """``(weights, bias)`` as read-only float32 arrays (cached per head)."""
    w = np.asarray(head.weights, dtype=np.float32)
    b = np.asarray(head.bias, dtype=np.float32)
    w.flags.writeable = b.flags.writeable = False
    return w, b


def apply_head(head: ActionHead, basis: npt.ArrayLike) -> F32:
    """The action scores [N, n_actions] (float32) of ``basis`` [N, k] (or one row [k] ->
    [n_actions])."""
    b = np.asarray(basis, dtype=np.float32)
    rows = b.reshape(-1, head.basis_width)
    w, bias = head_arrays(head)
    out: F32 = rows[:, :1] * w[0]
    for i in range(1, head.basis_width):
        out = out + rows[:, i:i + 1] * w[i]
    out = out + bias
    return out.reshape(-1) if b.ndim == 1 else out


def row_scorer(head: ActionHead) -> Callable[[F32], F32]:
    """``apply_head`` for one basis row [k], its arrays bound once (the device's hot path:
    no per-call lookup of the head's arrays)."""
    w, bias = head_arrays(head)
    rows = tuple(w[i] for i in range(head.basis_width))
    first, rest = rows[0], tuple(enumerate(rows[1:], start=1))

    def score(basis: F32) -> F32:
        out: F32 = basis[0] * first
        for i, row in rest:
            out = out + basis[i] * row
        return out + bias

    return score


def _finite_list(raw: Any, path: str) -> tuple[float, ...]:
    if not isinstance(raw, list) or not raw:
        raise BundleError("must be a non-empty list of numbers", path=path)
    out = []
    for i, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise BundleError("must be a finite number", path=f"{path}[{i}]")
        if float(np.float32(v)) != float(v):
            raise BundleError(f"{v!r} is not a float32 value; the head computes in float32",
                              path=f"{path}[{i}]")
        out.append(float(v))
    return tuple(out)


def read_head(raw: Any, path: str, n_actions: int) -> ActionHead:
    """An ``action_head`` object ``{"weights": [[...]], "bias": [...]}`` of a node with
    ``n_actions`` actions; ``BundleError`` naming the field when it is malformed."""
    if not isinstance(raw, dict):
        raise BundleError("must be an object {weights, bias}", path=path)
    unknown = sorted(set(raw) - {"weights", "bias"})
    if unknown:
        raise BundleError(f"unknown fields {unknown} (weights, bias)", path=path)
    if n_actions < 2:
        raise BundleError("a node with one action takes it without scores: drop its head",
                          path=path)
    rows = raw.get("weights")
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_BASIS:
        raise BundleError(f"must be a list of 1 to {MAX_BASIS} rows (one per basis column)",
                          path=f"{path}.weights")
    weights = tuple(_finite_list(r, f"{path}.weights[{i}]") for i, r in enumerate(rows))
    bias = _finite_list(raw.get("bias"), f"{path}.bias")
    for i, row in enumerate((*weights, bias)):
        if len(row) != n_actions:
            at = f"{path}.weights[{i}]" if i < len(weights) else f"{path}.bias"
            raise BundleError(f"has {len(row)} values; the node has {n_actions} actions",
                              path=at)
    return ActionHead(weights=weights, bias=bias)
