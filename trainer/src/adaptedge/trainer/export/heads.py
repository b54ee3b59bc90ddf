"""Decision heads: turn raw scores into the model contract's ``probabilities`` and
``action_scores`` (input ``x`` float32 [N, n_inputs], see ``protocol.manifest``).

- probabilities: one logit -> ``[1 - sigmoid(z), sigmoid(z)]``; several -> ``softmax(z)``;
- ``gate``: ``[-g, g]`` for (stop, escalate); a tie (g == 0) stops, as ``g > 0`` escalates in
  Python. Optionally ``g = g_raw - w * margin`` with the LPC's logit margin (``|z|`` binary,
  top-1 minus top-2 logit otherwise) and ``w`` a power of two, so it stays exact;
- ``gate_basis``: the gate's ``action_basis = [g_raw, margin]`` for a node whose manifest
  action head applies the threshold and ``w`` (one model shared by every threshold);
- ``confidence``: stop when the LPC is confident. Binary: ``[|z| - t, t - |z|]`` on the exact
  logit (``max prob >= thr`` <=> ``|z| >= logit(thr)``); multi-class: ``[m - thr, thr - m]``
  with ``m`` the max softmax probability;
- linear policy: ``action_scores = x @ A + c``;
- ranked policy (Graph-Reduce): a linear policy on ``[x, probabilities, top-1, margin]``
  whose scores within a tie band of the best become ranks, so the first of them wins;
- filter-tree policy (Graph-Reduce, ``--param policy=paper``): the same inputs through the
  paper's filter tree of logistic regressions on polynomial features, ranked the same way.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
from onnx import TensorProto

from adaptedge.protocol.action_head import BASIS_OUTPUT
from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.export.graph import GraphBuilder
from adaptedge.trainer.export.linear import linear

Transform = Literal["none", "softmax", "binary"]


def binary_probabilities(b: GraphBuilder, logit: str, output: str = PROBA_OUTPUT) -> int:
    """``output = [1 - sigmoid(logit), sigmoid(logit)]`` from one logit column; returns 2."""
    b.const("one", [1.0])
    b.add("Sigmoid", [logit], ["p1"])
    b.add("Sub", ["one", "p1"], ["p0"])
    b.add("Concat", ["p0", "p1"], [output], axis=1)
    return 2


def transform(b: GraphBuilder, raw: str, output: str, kind: Transform, width: int) -> int:
    """Map ``raw`` [N, width] to ``output``: unchanged, softmax, or the binary sigmoid of its
    single column; returns the output's width."""
    if kind == "none":
        b.add("Identity", [raw], [output])
        return width
    if kind == "softmax":
        b.add("Softmax", [raw], [output], axis=1)
        return width
    if kind == "binary":
        if width != 1:
            raise ValueError("transform 'binary' needs exactly one logit per row")
        return binary_probabilities(b, raw, output)
    raise ValueError(f"unknown transform {kind!r} (none, softmax, binary)")


def probabilities(b: GraphBuilder, logits: str, n_classes: int) -> None:
    """``probabilities`` [N, n_classes] from the logits of ``n_logits(n_classes)`` columns."""
    transform(b, logits, PROBA_OUTPUT, "binary" if n_classes == 2 else "softmax",
              1 if n_classes == 2 else n_classes)
    b.output(PROBA_OUTPUT, n_classes)


def _two_actions(b: GraphBuilder, first: str, second: str) -> None:
    b.add("Concat", [first, second], [ACTION_OUTPUT], axis=1)
    b.output(ACTION_OUTPUT, 2)


def _logit_margin(b: GraphBuilder, logits: str, n_classes: int) -> str:
    """``|z|`` (binary) or top-1 minus top-2 logit."""
    if n_classes == 2:
        b.add("Abs", [logits], ["margin"])
        return "margin"
    b.const("m_zero", [0], np.int64)
    b.const("m_one", [1], np.int64)
    b.const("m_two", [2], np.int64)
    b.add("TopK", [logits, "m_two"], ["top2", "top2_idx"], axis=1)
    b.add("Slice", ["top2", "m_zero", "m_one", "m_one"], ["top1"])
    b.add("Slice", ["top2", "m_one", "m_two", "m_one"], ["second"])
    b.add("Sub", ["top1", "second"], ["margin"])
    return "margin"


def gate(b: GraphBuilder, gate_score: str, logits: str, n_classes: int,
         margin_weight: float = 0.0) -> None:
    """(stop, escalate) = ``[-g, g]`` with ``g = gate_score - margin_weight * margin``."""
    g = gate_score
    if margin_weight:
        b.const("w_margin", [margin_weight])
        margin = _logit_margin(b, logits, n_classes)
        b.add("Mul", [margin, "w_margin"], ["w_m"])
        b.add("Sub", [gate_score, "w_m"], ["g"])
        g = "g"
    b.add("Neg", [g], ["neg_g"])
    _two_actions(b, "neg_g", g)


def gate_basis(b: GraphBuilder, gate_score: str, logits: str, n_classes: int) -> None:
    """``action_basis = [g, margin]`` [N, 2] for a node whose action head
    (``protocol.action_head``) holds the threshold and the margin weight: ``gate`` with
    ``W = [[-1, 1], [w, -w]]`` and ``bias = [t, -t]`` (the threshold ``t`` left out of g)."""
    margin = _logit_margin(b, logits, n_classes)
    b.add("Concat", [gate_score, margin], [BASIS_OUTPUT], axis=1)
    b.output(BASIS_OUTPUT, 2)


def confidence(b: GraphBuilder, logits: str, n_classes: int, threshold: float) -> None:
    """(stop, escalate) = ``[s, -s]`` with ``s = |z| - t`` (binary, ``t`` a logit) or
    ``s = max probability - t``."""
    b.const("t", [threshold])
    if n_classes == 2:
        b.add("Abs", [logits], ["abs_z"])
        b.add("Sub", ["abs_z", "t"], ["s"])
    else:
        b.add("ReduceMax", [PROBA_OUTPUT], ["m"], axes=[1], keepdims=1)
        b.add("Sub", ["m", "t"], ["s"])
    b.add("Neg", ["s"], ["neg_s"])
    _two_actions(b, "s", "neg_s")


def linear_policy(b: GraphBuilder, weights: npt.ArrayLike, bias: npt.ArrayLike) -> None:
    """``action_scores = x @ weights + bias`` (weights [n_inputs, n_actions])."""
    width = linear(b, weights, bias, output=ACTION_OUTPUT, name="a_")
    b.output(ACTION_OUTPUT, width)


def _policy_inputs(b: GraphBuilder, n_classes: int) -> str:
    """``a_feats = [x, probabilities, top-1, margin]`` (``probabilities`` already computed)."""
    k = min(2, n_classes)
    mix = np.zeros((k, 2), np.float32)
    mix[0, 0], mix[0, 1] = 1.0, 1.0
    if k == 2:
        mix[1, 1] = -1.0
    b.const("a_k", [k], np.int64)
    b.const("a_mix", mix)
    b.add("TopK", [PROBA_OUTPUT, "a_k"], ["a_top", "a_top_idx"], axis=1, largest=1, sorted=1)
    b.add("MatMul", ["a_top", "a_mix"], ["a_conf"])
    b.add("Concat", [MODEL_INPUT, PROBA_OUTPUT, "a_conf"], ["a_feats"], axis=1)
    return "a_feats"


def _ranked(b: GraphBuilder, scores: str, n_actions: int, tie_band: float) -> None:
    """``action_scores[j] = (n - j) if scores[j] >= max(scores) - tie_band else 0``."""
    b.const("a_band", tie_band)
    b.const("a_rank", np.arange(n_actions, 0, -1))
    b.add("ReduceMax", [scores], ["a_max"], axes=[1], keepdims=1)
    b.add("Sub", ["a_max", "a_band"], ["a_floor"])
    b.add("GreaterOrEqual", [scores, "a_floor"], ["a_tied"])
    b.add("Cast", ["a_tied"], ["a_tied_f"], to=TensorProto.FLOAT)
    b.add("Mul", ["a_tied_f", "a_rank"], [ACTION_OUTPUT])
    b.output(ACTION_OUTPUT, n_actions)


def ranked_policy(b: GraphBuilder, weights: npt.ArrayLike, bias: npt.ArrayLike,
                  n_classes: int, tie_band: float) -> None:
    """Graph-Reduce's policy after a classifier (``probabilities`` already computed):
    ``raw = [x, p, top1, margin] @ weights + bias``, ranked within ``tie_band``."""
    W = np.asarray(weights, np.float32)
    linear(b, W, bias, source=_policy_inputs(b, n_classes), output="a_scores", name="a_")
    _ranked(b, "a_scores", W.shape[1], tie_band)


def filter_tree_policy(b: GraphBuilder, scale: npt.ArrayLike, shift: npt.ArrayLike,
                       degree: int, weights: npt.ArrayLike, bias: npt.ArrayLike,
                       right: npt.ArrayLike, left: npt.ArrayLike, n_classes: int,
                       tie_band: float) -> None:
    """The paper's filter tree (``trainer.methods.dag.filter_tree``) after a classifier:
    ``u = [x, p, top1, margin] @ scale + shift`` (standardised, constant 1 last), its
    ``degree``-th tensor power ``phi``, ``z = phi @ weights + bias`` and
    ``raw = -(relu(-z) @ right + relu(z) @ left)``, ranked within ``tie_band``."""
    linear(b, scale, shift, source=_policy_inputs(b, n_classes), output="t_u", name="t_u")
    b.const("t_ax1", [1], np.int64)
    b.const("t_ax2", [2], np.int64)
    b.const("t_flat", [0, -1], np.int64)
    b.add("Unsqueeze", ["t_u", "t_ax1"], ["t_row"])
    power = "t_u"
    for d in range(1, degree):
        b.add("Unsqueeze", [power, "t_ax2"], [f"t_col{d}"])
        b.add("Mul", [f"t_col{d}", "t_row"], [f"t_outer{d}"])
        b.add("Reshape", [f"t_outer{d}", "t_flat"], [f"t_pow{d}"])
        power = f"t_pow{d}"
    linear(b, weights, bias, source=power, output="t_z", name="t_z")
    b.add("Relu", ["t_z"], ["t_pos"])
    b.add("Neg", ["t_z"], ["t_negz"])
    b.add("Relu", ["t_negz"], ["t_neg"])
    b.add("MatMul", ["t_neg", b.const("t_right", np.asarray(right, np.float32))], ["t_r"])
    b.add("MatMul", ["t_pos", b.const("t_left", np.asarray(left, np.float32))], ["t_l"])
    b.add("Add", ["t_r", "t_l"], ["t_cost"])
    b.add("Neg", ["t_cost"], ["a_scores"])
    _ranked(b, "a_scores", int(np.shape(right)[1]), tie_band)
