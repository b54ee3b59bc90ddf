"""The trees' histogram pass in C (``trainer/methods/_histograms.c``)."""

from typing import Any

def fill(flat: Any, slot: Any, residual: Any, count: Any, sums: Any, /) -> None:
    """Rows per (node, bin) into ``count`` [n_nodes, B] and their summed residuals into
    ``sums`` [n_nodes * B, K], rows added in row order (``numpy.bincount``'s sums, bit for bit)."""
