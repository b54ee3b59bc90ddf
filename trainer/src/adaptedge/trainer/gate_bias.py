"""The gate threshold of any policy as one knob: a bias added to every ``escalate`` score.

A node picks the first highest ``action_scores`` entry; adding ``b`` to the escalate column
escalates more (``b > 0``) or less (``b < 0``) without touching the rest of the model — for
ADAPT's one-node gate ``[-g, g]`` it moves the gate threshold by ``b / 2``. ``biased_policy``
appends one ``Add`` to each gated node's ONNX (the edge runs it unchanged) and returns the new
graph and files; a node with an action head (``protocol.action_head``) keeps its model file
and gets the bias added to its head's escalate bias instead (in float32). ``bias_grid``
proposes biases from the escalation margins of given rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

from adaptedge.protocol.action_head import BASIS_OUTPUT, apply_head
from adaptedge.protocol.manifest import ACTION_OUTPUT, Manifest
from adaptedge.protocol.policy_graph import ModelRef, PolicyGraph, PolicyNode
from adaptedge.trainer.export.bundle import model_file_name
from adaptedge.trainer.policy.oracle import BundleRunner

_RAW = "action_scores_before_bias"
_BIAS = "escalation_bias"


def escalate_column(node: PolicyNode) -> int | None:
    """Index of the node's escalate action among its action scores (None: not gated)."""
    kinds = [a.kind for a in node.actions]
    if "escalate" not in kinds or len(kinds) < 2:
        return None
    return kinds.index("escalate")


def add_escalation_bias(model_bytes: bytes, n_actions: int, column: int, bias: float) -> bytes:
    """The ONNX model with ``action_scores`` + ``bias`` on column ``column``."""
    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    if ACTION_OUTPUT not in [o.name for o in graph.output]:
        raise ValueError(f"the model has no {ACTION_OUTPUT!r} output to bias")
    for node in graph.node:
        node.output[:] = [_RAW if name == ACTION_OUTPUT else name for name in node.output]
        node.input[:] = [_RAW if name == ACTION_OUTPUT else name for name in node.input]
    vector = np.zeros((1, n_actions), dtype=np.float32)
    vector[0, column] = np.float32(bias)
    graph.initializer.append(numpy_helper.from_array(vector, _BIAS))
    graph.node.append(helper.make_node("Add", [_RAW, _BIAS], [ACTION_OUTPUT],
                                       name="escalation_bias_add"))
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def biased_policy(graph: PolicyGraph, files: Mapping[str, bytes], bias: float
                  ) -> tuple[PolicyGraph, dict[str, bytes]]:
    """``graph`` with ``bias`` added to the escalate score of every gated node: the new graph
    and the new model files it names (unchanged nodes keep their files)."""
    if bias == 0.0:
        return graph, {}
    nodes: dict[str, PolicyNode] = {}
    new_files: dict[str, bytes] = {}
    for node_id, node in graph.nodes.items():
        column = escalate_column(node)
        if column is None:
            nodes[node_id] = node
            continue
        head = node.model.action_head
        if head is not None:
            moved = list(head.bias)
            moved[column] = float(np.float32(moved[column]) + np.float32(bias))
            model = replace(node.model, action_head=replace(head, bias=tuple(moved)))
            nodes[node_id] = replace(node, model=model)
            continue
        data = add_escalation_bias(files[node.model.file], len(node.actions), column, bias)
        name = model_file_name(data)
        new_files[name] = data
        nodes[node_id] = replace(node, model=ModelRef(name, node.model.inputs))
    return PolicyGraph(root=graph.root, nodes=nodes), new_files


def escalation_margins(runner: BundleRunner, graph: PolicyGraph,
                       X: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Per row and gated node: the best other action's score minus the escalate score (> 0:
    the node would not escalate; a bias above it would). Rows are scored at every gated node,
    reached or not: a grid heuristic, each candidate is then walked exactly."""
    out: list[npt.NDArray[np.float64]] = []
    for node in graph.nodes.values():
        column = escalate_column(node)
        if column is None:
            continue
        x = np.ascontiguousarray(X[:, list(node.model.inputs)], dtype=np.float32)
        head = node.model.action_head
        raw = runner.run(node.model.file, x, [ACTION_OUTPUT if head is None else BASIS_OUTPUT])[0]
        scores = (raw if head is None else apply_head(head, raw)).astype(np.float64)
        others = np.delete(scores, column, axis=1).max(axis=1)
        out.append(others - scores[:, column])
    return np.concatenate(out) if out else np.zeros(0)


def bias_grid(margins: npt.NDArray[np.float64], levels: Sequence[float] = (
        0.1, 0.25, 0.5, 0.75, 0.9)) -> list[float]:
    """0, then biases just past quantiles of the positive margins (escalate more) and of the
    negative ones (escalate less), smallest first."""
    positive = margins[margins > 0]
    negative = -margins[margins < 0]
    values = {0.0}
    if positive.size:
        values |= {float(q) * 1.0001 + 1e-6 for q in np.quantile(positive, list(levels))}
    if negative.size:
        values |= {-(float(q) * 1.0001 + 1e-6) for q in np.quantile(negative, list(levels))}
    return sorted(values)


def candidate_bundle(manifest: Manifest, files: Mapping[str, bytes], policy: str,
                     biases: Sequence[float]) -> tuple[dict[str, PolicyGraph], dict[str, bytes]]:
    """``policy`` at each bias, named ``<policy>@b<bias>`` (``<policy>`` itself at 0)."""
    graphs: dict[str, PolicyGraph] = {}
    extra: dict[str, bytes] = {}
    for bias in biases:
        graph, new = biased_policy(manifest.policies[policy], files, bias)
        graphs[policy if bias == 0.0 else f"{policy}@b{bias:+.4g}"] = graph
        extra.update(new)
    return graphs, extra
