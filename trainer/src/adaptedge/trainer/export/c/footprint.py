"""How much flash an exported point needs on a Cortex-M0+, estimated before compiling, and the
refusal of a point over a limit that names the point that fits.

The estimate is linear in what the generated code holds: tree nodes (splits and leaves: a
compare and branch, or a leaf index store plus its float32 weight) and linear weights, plus the
walk and tables, plus the soft-float and ``expf`` routines the library links. Coefficients
measured with arm-none-eabi-gcc 12.2 ``-Os -mcpu=cortex-m0plus -mfloat-abi=soft`` on 13
letter-binary points (96 to 800 trees, 1 to 13 nodes): within 2% of the compiled size.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
from onnx import numpy_helper

from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.model_file import model_bytes
from adaptedge.trainer.errors import ExportError

BASE_BYTES = 3_200
"""The walk, the sensor and node tables, the helpers (measured intercept)."""
BYTES_PER_TREE_NODE = 7.93
BYTES_PER_WEIGHT = 4
RUNTIME_BYTES = 9_300
"""Soft-float (float and double add/sub/mul/div) and ``expf`` from newlib and libgcc."""


def _model_size(path: Path) -> int:
    """Tree nodes times their cost plus linear weights times theirs, for one model file."""
    model = onnx.load_model_from_string(model_bytes(path.name, path.read_bytes()))
    nodes = 0
    for node in model.graph.node:
        if node.op_type == "TreeEnsembleRegressor":
            nodes += next((len(a.strings) for a in node.attribute if a.name == "nodes_modes"), 0)
    weights = sum(numpy_helper.to_array(t).size for t in model.graph.initializer)
    return int(nodes * BYTES_PER_TREE_NODE + weights * BYTES_PER_WEIGHT)


def estimator(manifest: Manifest, root: Path) -> Callable[[str], int]:
    """``point name -> estimated flash bytes`` (model files are read once each)."""
    sizes: dict[str, int] = {}

    def estimate(point: str) -> int:
        graph = manifest.policies[manifest.operating_point(point).policy]
        models = {(n.model.file, n.model.inputs, len(n.actions)) for n in graph.nodes.values()}
        total = BASE_BYTES + RUNTIME_BYTES
        for file, _, _ in models:
            if file not in sizes:
                sizes[file] = _model_size(root / file)
            total += sizes[file]
        return total

    return estimate


def check_fits(manifest: Manifest, root: Path, point: str, limit: int) -> int:
    """The estimate for ``point``; ``ExportError`` (one line) when it is over ``limit`` bytes,
    naming the most accurate point that fits and how big each is, or the smallest point."""
    estimate = estimator(manifest, root)
    need = estimate(point)
    if need <= limit:
        return need
    sized = [(p.name, p.accuracy, estimate(p.name)) for p in manifest.operating_points]
    fitting = [s for s in sized if s[2] <= limit]
    over = (f"point {point!r} needs about {need / 1024:.0f} KB of flash on a Cortex-M0+ "
            f"(estimate), over the {limit / 1024:.0f} KB limit")
    if fitting:
        name, accuracy, size = max(fitting, key=lambda s: (s[1], -s[2]))
        raise ExportError(f"{over}; the most accurate point that fits is {name!r} (about "
                          f"{size / 1024:.0f} KB, validation accuracy {accuracy:.4f}): pass "
                          "--point")
    name, _, size = min(sized, key=lambda s: s[2])
    raise ExportError(f"{over}; no point of the bundle fits: the smallest, {name!r}, needs about "
                      f"{size / 1024:.0f} KB (train with a smaller budget or fewer trees)")
