"""The C tables of one policy: sensors (columns, costs), the link, the nodes and their actions.

Sensor ids are positions in ``Manifest.sensors`` (bit ``s`` of a ``uint32_t`` mask), node ids
positions in the graph's node order; costs are the rows of ``protocol.costs.cost_row``
(scalar, energy_mj, latency_ms, money, bytes) as exact double constants.
"""

from __future__ import annotations

from collections.abc import Sequence

from adaptedge.protocol.costs import compute_cost, cost_row, link_cost, sensor_cost
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.policy_graph import PolicyGraph
from adaptedge.trainer.errors import ExportError
from adaptedge.trainer.export.c.literals import array_body, f64

MAX_SENSORS = 32
MAX_NODES = 255
_KINDS = {"stop": "AE_STOP", "acquire": "AE_MOVE", "route": "AE_MOVE", "escalate": "AE_ESCALATE"}


def _bytes_array(name: str, values: Sequence[int]) -> str:
    return (f"static const unsigned char {name}[{max(len(values), 1)}] = {{\n"
            f"{array_body((str(v) for v in values), per_line=16)}\n}};")


def _cost_array(name: str, row: Sequence[float]) -> str:
    return f"static const double {name}[5] = {{ {', '.join(f64(v) for v in row)} }};"


def sensor_tables(manifest: Manifest) -> list[str]:
    """Columns per sensor (start offsets), each sensor's cost row, the link's, the HPC's
    sensors."""
    sensors = manifest.sensors
    if len(sensors) > MAX_SENSORS:
        raise ExportError(f"the bundle has {len(sensors)} sensors; the C exporter handles at "
                          f"most {MAX_SENSORS}")
    starts, cols = [0], []
    for s in sensors:
        cols += list(s.features)
        starts.append(len(cols))
    weights = manifest.cost_weights
    index = {s.name: i for i, s in enumerate(sensors)}
    rows = ",\n".join("    { " + ", ".join(f64(v) for v in cost_row(sensor_cost(s, weights)))
                      + " }" for s in sensors)
    return [
        f"const uint16_t adaptedge_sensor_first[{len(starts)}] = {{\n"
        f"{array_body(map(str, starts), per_line=16)}\n}};",
        f"const uint16_t adaptedge_sensor_columns[{max(len(cols), 1)}] = {{\n"
        f"{array_body(map(str, cols), per_line=16)}\n}};",
        f"static const double ae_sensor_cost[{len(sensors)}][5] = {{\n{rows}\n}};",
        _cost_array("ae_link_cost", cost_row(link_cost(manifest.link, weights))),
        _bytes_array("ae_hpc_sensors", [index[n] for n in manifest.hpc.sensors]),
    ]


def cost_columns_used(manifest: Manifest, graph: PolicyGraph) -> int:
    """Bit k set when cost column k (``cost_row`` order) is non-zero for some sensor, the link
    or a node visit: the others are never added."""
    weights = manifest.cost_weights
    rows = [cost_row(sensor_cost(s, weights)) for s in manifest.sensors]
    rows.append(cost_row(link_cost(manifest.link, weights)))
    rows += [cost_row(compute_cost(n.compute, weights)) for n in graph.nodes.values()]
    return sum(1 << k for k in range(5) if any(row[k] != 0.0 for row in rows))


def node_tables(manifest: Manifest, graph: PolicyGraph, functions: Sequence[str]
                ) -> tuple[list[str], int]:
    """Per-node sensor lists, action kinds and targets, visit costs, and ``ae_nodes``;
    ``functions[k]`` is the C model function of the k-th node. Returns the lines and the
    root's index."""
    ids = list(graph.nodes)
    if len(ids) > MAX_NODES:
        raise ExportError(f"the policy has {len(ids)} nodes; the C exporter handles at most "
                          f"{MAX_NODES}")
    position = {nid: k for k, nid in enumerate(ids)}
    sensor_index = {s.name: i for i, s in enumerate(manifest.sensors)}
    lines: list[str] = []
    entries: list[str] = []
    for k, nid in enumerate(ids):
        node = graph.nodes[nid]
        sensors = [sensor_index[s] for s in node.sensors]
        kinds = [_KINDS[a.kind] for a in node.actions]
        nexts = [position[a.next] if a.next is not None else 0 for a in node.actions]
        escalate = next((i for i, a in enumerate(node.actions) if a.kind == "escalate"), -1)
        lines += [_bytes_array(f"ae_n{k}_sensors", sensors),
                  f"static const unsigned char ae_n{k}_kinds[{len(kinds)}] = "
                  f"{{ {', '.join(kinds)} }};",
                  _bytes_array(f"ae_n{k}_next", nexts)]
        visit = "0"
        if node.compute is not None:
            lines.append(_cost_array(f"ae_n{k}_visit",
                                     cost_row(compute_cost(node.compute, manifest.cost_weights))))
            visit = f"ae_n{k}_visit"
        bits = sum(1 << s for s in sensors)
        entries.append(f"    {{ {functions[k]}, ae_n{k}_sensors, {len(sensors)}, {bits}u, "
                       f"{len(kinds)}, ae_n{k}_kinds, ae_n{k}_next, {escalate}, {visit} }}")
    lines.append(f"static const ae_node ae_nodes[{len(ids)}] = {{\n" + ",\n".join(entries)
                 + "\n};")
    return lines, position[graph.root]
