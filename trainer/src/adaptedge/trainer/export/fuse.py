"""Fusing a node's classifier and action scorer into one graph (one runtime call per node).

Both models take input ``x`` (the node's columns). Internal names are prefixed (``p_``/``s_``)
so they cannot clash; opset imports are merged (highest version per domain).
"""

from __future__ import annotations

import onnx

from adaptedge.protocol.onnx_contract import ACTION_OUTPUT, MODEL_INPUT, PROBA_OUTPUT
from adaptedge.trainer.export.graph import REGRESSOR_OUTPUT, assemble


def _prefixed(graph: onnx.GraphProto, prefix: str, keep: dict[str, str]
              ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The graph's nodes and initializers with every name prefixed, except those in ``keep``."""
    def rename(name: str) -> str:
        if not name:
            return name
        return keep.get(name, prefix + name)

    nodes = []
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):
            raise ValueError(f"cannot fuse a model with sub-graphs (node {node.op_type})")
        new = onnx.NodeProto()
        new.CopyFrom(node)
        new.name = prefix + (node.name or node.op_type)
        del new.input[:]
        del new.output[:]
        new.input.extend(rename(n) for n in node.input)
        new.output.extend(rename(n) for n in node.output)
        nodes.append(new)
    inits = []
    for init in graph.initializer:
        t = onnx.TensorProto()
        t.CopyFrom(init)
        t.name = rename(init.name)
        inits.append(t)
    return nodes, inits


def _output_info(graph: onnx.GraphProto, name: str, new_name: str) -> onnx.ValueInfoProto:
    for out in graph.output:
        if out.name == name:
            info = onnx.ValueInfoProto()
            info.CopyFrom(out)
            info.name = new_name
            return info
    raise ValueError(f"model has no output {name!r} (outputs: {[o.name for o in graph.output]})")


def _model_input(graph: onnx.GraphProto) -> onnx.ValueInfoProto:
    real = [i for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    if [i.name for i in real] != [MODEL_INPUT]:
        raise ValueError(f"model inputs must be exactly [{MODEL_INPUT!r}], got "
                         f"{[i.name for i in real]}")
    info: onnx.ValueInfoProto = real[0]
    return info


def fuse_node_model(proba: onnx.ModelProto, scores: onnx.ModelProto | None = None,
                    scores_output: str = REGRESSOR_OUTPUT) -> bytes:
    """One graph computing a node's ``probabilities`` and (if ``scores``) ``action_scores``.

    ``proba`` must output ``probabilities``; ``scores_output`` names the output of ``scores``
    that becomes ``action_scores`` [N, n_actions].
    """
    parts = [(proba, "p_", PROBA_OUTPUT, PROBA_OUTPUT)]
    if scores is not None:
        parts.append((scores, "s_", scores_output, ACTION_OUTPUT))
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    outputs: list[onnx.ValueInfoProto] = []
    opsets: dict[str, int] = {}
    for model, prefix, out_name, final in parts:
        graph = model.graph
        _model_input(graph)
        n, i = _prefixed(graph, prefix, {MODEL_INPUT: MODEL_INPUT, out_name: final})
        nodes += n
        inits += i
        outputs.append(_output_info(graph, out_name, final))
        for op in model.opset_import:
            opsets[op.domain] = max(opsets.get(op.domain, 0), op.version)
    fused = assemble(nodes, inits, _model_input(proba.graph), outputs, opsets)
    data: bytes = fused.SerializeToString()
    return data
