"""The histogram trees' inner loops in C (``trainer/methods/_tree_loops.c``)."""

from typing import Any

def fill(flat: Any, slot: Any, residual: Any, count: Any, sums: Any, /) -> None:
    """Rows per (node, bin) into ``count`` [n_nodes, B] and their summed residuals into
    ``sums`` [n_nodes * B, K], rows added in row order (``numpy.bincount``'s sums, bit for bit)."""

def split(column: Any, rows: Any, bin: int, out: Any, /) -> int:
    """The rows of ``rows`` with ``column[row] <= bin``, then the others, into ``out``, each in
    the order of ``rows``; returns how many went left."""

def sums(values: Any, nodes: list[Any], out: Any, /) -> None:
    """Each node's ``values[rows].sum(axis=0)`` into its row of ``out`` [len(nodes), K], bit
    for bit numpy's."""
