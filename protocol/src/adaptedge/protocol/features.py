"""Feature vectors on the wire: float32 little-endian bytes plus a packed mask of what was measured."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.errors import BAD_FEATURES, ProtocolError


def pack_features(
    values: npt.ArrayLike, measured: npt.ArrayLike
) -> tuple[bytes, bytes]:
    """Encode a feature vector and its measured-mask; unmeasured slots are written as 0.0."""
    vec = np.asarray(values, dtype="<f4").reshape(-1)
    mask = np.asarray(measured, dtype=bool).reshape(-1)
    if vec.shape != mask.shape:
        raise ProtocolError(
            BAD_FEATURES, f"{vec.size} feature values but a mask of {mask.size} entries"
        )
    if not mask.all():
        vec = np.where(mask, vec, np.float32(0.0)).astype("<f4")
    return vec.tobytes(), np.packbits(mask, bitorder="little").tobytes()


def mask_bytes_length(n_features: int) -> int:
    return (n_features + 7) // 8


def all_finite(buf: bytes) -> bool:
    """Every little-endian float32 in ``buf`` finite. NaN and infinity have all exponent bits
    set, so their top byte is 0x7f or 0xff: a C-speed scan of the top bytes (int needles:
    memchr) first, the exact check only when it finds one (a float64 sum of float32 values
    cannot overflow: finite iff every value is)."""
    top = buf[3::4]
    if 0x7F not in top and 0xFF not in top:
        return True
    with np.errstate(invalid="ignore"):  # NaN, or inf + -inf: an answer here, not a warning
        return math.isfinite(np.frombuffer(buf, dtype="<f4").sum(dtype=np.float64))
