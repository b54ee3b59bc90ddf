"""The one implementation of the policy-graph walk (numpy only): the rules at a node
(``step``), a graph compiled for walking (``graph``), and two drivers of the same step: one
decision at a time (``rows``: the edge runtime) and a batch of fully measured rows
(``batch``: the trainer's float64 walk, the float32 ONNX oracle, the simulator's replay)."""

from adaptedge.protocol.walk.batch import (
    BatchWalk,
    RunFile,
    RunRows,
    gather,
    node_scores,
    scores_output,
    walk_batch,
    walk_manifest,
)
from adaptedge.protocol.walk.graph import (
    ESCALATE,
    KIND_CODES,
    MOVE,
    STOP,
    WalkAction,
    WalkGraph,
    WalkNode,
    compile_graph,
)
from adaptedge.protocol.walk.rows import ReadSensor, RunNode, Trail, walk_live, walk_row
from adaptedge.protocol.walk.step import best, choose, choose_rows, entering, step, tie_margin

__all__ = [
    "ESCALATE",
    "KIND_CODES",
    "MOVE",
    "STOP",
    "BatchWalk",
    "ReadSensor",
    "RunFile",
    "RunNode",
    "RunRows",
    "Trail",
    "WalkAction",
    "WalkGraph",
    "WalkNode",
    "best",
    "choose",
    "choose_rows",
    "compile_graph",
    "entering",
    "gather",
    "node_scores",
    "scores_output",
    "step",
    "tie_margin",
    "walk_batch",
    "walk_live",
    "walk_manifest",
    "walk_row",
]
