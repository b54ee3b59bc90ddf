"""The HPC's answers to replayed rows, computed once per (HPC, rows, feature mask) and reused.

The HPC's label for a row depends only on its model file, the row and which columns were
measured (the rest sent as 0): not on the policy that escalated it. So a replay session keeps,
per key (the HPC file's SHA-256 from the verified manifest, a digest of the rows' float32 bytes
and shape, the packed feature mask), one label per row (-1: not asked yet) and asks the HPC only
about rows no earlier replay asked about. With a ``directory`` the table is also kept on disk
(``<cache_root>/replay``, one ``.npy`` per key, written atomically), so the next process reuses
it; an unreadable or mismatched file is recomputed, never trusted.

A regression HPC's answers are values (``values=True``): one float32 per row (NaN: not asked
yet), kept in files of their own (``-v.npy``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
Labels = Callable[[F32, npt.NDArray[np.bool_]], I64]
"""(rows, feature mask) -> the HPC's label per row (unmeasured columns set to 0)."""
Values = Callable[[F32, npt.NDArray[np.bool_]], F32]
"""(rows, feature mask) -> a regression HPC's value per row (unmeasured columns set to 0)."""
CACHE_VERSION = 1


def rows_digest(X: F32) -> str:
    """SHA-256 of the rows' float32 bytes and shape: what the HPC answers depend on."""
    x = np.ascontiguousarray(X, dtype=np.float32)
    digest = hashlib.sha256(f"v{CACHE_VERSION}{x.shape}".encode())
    digest.update(x.data.cast("B"))
    return digest.hexdigest()


class HpcAnswers:
    """Per (rows digest, mask): the HPC's label (``values``: value) of every row asked about
    so far."""

    def __init__(self, hpc_sha256: str, labels: Labels | Values,
                 directory: Path | None = None, *, values: bool = False) -> None:
        self.hpc_sha256 = hpc_sha256
        self._answer = labels
        self.directory = directory
        self._values = values
        self._tables: dict[tuple[str, bytes], npt.NDArray[np.generic]] = {}
        self.computed = 0
        """Rows the HPC was run on (the rest came from the cache)."""

    def labels(self, X: F32, digest: str, rows: I64, mask: npt.NDArray[np.bool_]) -> I64:
        """The HPC's label of ``X[rows]`` under feature ``mask``; ``digest``: ``rows_digest(X)``."""
        return np.asarray(self._answers(X, digest, rows, mask), dtype=np.int64)

    def values(self, X: F32, digest: str, rows: I64, mask: npt.NDArray[np.bool_]) -> F32:
        """A regression HPC's value of ``X[rows]`` under feature ``mask`` (as ``labels``)."""
        return np.asarray(self._answers(X, digest, rows, mask), dtype=np.float32)

    def _answers(self, X: F32, digest: str, rows: I64, mask: npt.NDArray[np.bool_]
                 ) -> npt.NDArray[np.generic]:
        key = (digest, np.packbits(mask, bitorder="little").tobytes())
        table = self._tables.get(key)
        if table is None:
            table = self._load(key, len(X))
            self._tables[key] = table
        asked = np.asarray(table[rows], dtype=np.float64)
        missing = rows[np.isnan(asked) if self._values else asked < 0]
        if missing.size:
            table[missing] = self._answer(np.ascontiguousarray(X[missing]), mask)
            self.computed += int(missing.size)
            self._save(key, table)
        return table[rows]

    def _path(self, key: tuple[str, bytes]) -> Path | None:
        if self.directory is None:
            return None
        kind = "-v" if self._values else ""
        name = f"{self.hpc_sha256[:24]}-{key[0][:24]}-{key[1].hex()}{kind}.npy"
        return self.directory / name

    def _load(self, key: tuple[str, bytes], n: int) -> npt.NDArray[np.generic]:
        dtype = np.float32 if self._values else np.int64
        path = self._path(key)
        if path is not None and path.is_file():
            try:
                table = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                table = None  # a broken file is recomputed
            if table is not None and table.shape == (n,) and table.dtype == dtype:
                return np.array(table)
        return np.full(n, np.nan if self._values else -1, dtype=dtype)

    def _save(self, key: tuple[str, bytes], table: npt.NDArray[np.generic]) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
        np.save(tmp, table, allow_pickle=False)
        tmp.replace(path)
