"""A tree node's rows in C, their split and their sums (``trainer/methods/_node_rows.c``)."""

from typing import Any

def split(column: Any, rows: Any, bin: int, out: Any, /) -> int:
    """The rows of ``rows`` with ``column[row] <= bin``, then the others, into ``out``, each in
    the order of ``rows``; returns how many went left."""

def sums(values: Any, nodes: list[Any], out: Any, /) -> None:
    """Each node's ``values[rows].sum(axis=0)`` into its row of ``out`` [len(nodes), K], bit
    for bit numpy's."""
