"""``adaptedge inspect`` prints the default policy as root-to-exit paths (``policy_paths``):
the tree a CSTC bundle found, each node with the sensors it adds."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.cli.policy_paths import MAX_PATHS, policy_paths
from adaptedge.protocol.bundle import verify
from adaptedge.protocol.policy_graph import Action, ModelRef, PolicyGraph, PolicyNode
from adaptedge.trainer.data.quadrant_decoys import decoy_quadrants


def _node(sensors: tuple[str, ...], *actions: Action) -> PolicyNode:
    return PolicyNode(sensors=sensors, model=ModelRef("m.onnx", (0,)), actions=actions)


def test_a_tree_prints_one_line_per_exit_with_the_sensors_each_node_adds() -> None:
    """Depth first in action order; a node's own exits before its children's paths."""
    graph = PolicyGraph("n0", {
        "n0": _node(("sx",), Action("route", next="n1"), Action("route", next="n2")),
        "n1": _node(("sx", "e1"), Action("stop")),
        "n2": _node(("sx", "sz"), Action("route", next="n3"), Action("stop")),
        "n3": _node(("sx", "sz", "e2"), Action("stop"), Action("escalate")),
    })
    assert policy_paths(graph) == [
        "n0 [+sx] -> n1 [+e1]: stop",
        "n0 [+sx] -> n2 [+sz]: stop",
        "n0 [+sx] -> n2 [+sz] -> n3 [+e2]: stop",
        "n0 [+sx] -> n2 [+sz] -> n3 [+e2]: escalate",
    ]


def test_many_paths_are_cut_with_a_count() -> None:
    n = MAX_PATHS + 5
    nodes = {"r": _node((), *(Action("route", next=f"l{i}") for i in range(n)))}
    nodes |= {f"l{i}": _node((f"s{i}",), Action("stop")) for i in range(n)}
    lines = policy_paths(PolicyGraph("r", nodes))
    assert len(lines) == MAX_PATHS + 1 and lines[-1] == "... and 5 more paths"


@pytest.mark.slow
def test_inspect_prints_the_cstc_tree_of_a_trained_bundle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = decoy_quadrants("even", n=800, seed=0)
    rows = [",".join([*d.feature_names, "label"])]
    rows += [",".join([*(f"{v:.4f}" for v in x), str(int(y))])
             for x, y in zip(d.X_train, d.y_train, strict=True)]
    (tmp_path / "q.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "bundle"
    assert main(["train", "--data", str(tmp_path / "q.csv"), "--target", "label", "--method",
                 "cstc", "--quick", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    m = verify(out)
    policy = next(p.policy for p in m.operating_points if p.name == m.default_operating_point)
    shown = text.split("as paths (each node: the sensors it adds):\n")[1].split("\n\n")[0]
    assert f"default policy {policy!r}" in text
    assert [line.strip() for line in shown.splitlines()] == policy_paths(m.policies[policy])
