"""A tree node's row split in C (``trainer/methods/_row_split.c``)."""

from typing import Any

def split(column: Any, rows: Any, bin: int, out: Any, /) -> int:
    """The rows of ``rows`` with ``column[row] <= bin``, then the others, into ``out``, each in
    the order of ``rows``; returns how many went left."""
