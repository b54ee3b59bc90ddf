"""Exact C99 literals: float32 and double values as hexadecimal floating constants, so the
compiled library holds bit for bit what the ONNX model and the manifest hold."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from adaptedge.trainer.errors import ExportError


def f32(value: float | np.floating) -> str:
    """A float32 constant (``0x1.8p+1f``); refuses NaN and infinity, which C99 cannot spell
    without ``math.h``."""
    v = float(np.float32(value))
    if not math.isfinite(v):
        raise ExportError(f"the model holds the non-finite constant {v}, which the C exporter "
                          "cannot express")
    return _hex(v) + "f"


def _hex(v: float) -> str:
    """``float.hex`` without the mantissa's trailing zeros (``0x1.8p+1``)."""
    mantissa, exponent = v.hex().split("p")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return f"{mantissa}p{exponent}"


def f64(value: float) -> str:
    """A double constant, exact."""
    v = float(value)
    if not math.isfinite(v):
        raise ExportError(f"the bundle holds the non-finite cost {v}, which the C exporter "
                          "cannot express")
    return _hex(v)


def c_string(text: str) -> str:
    """A C string literal (printable ASCII kept, everything else escaped as octal)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def array_body(items: Iterable[str], per_line: int = 8, indent: str = "    ") -> str:
    """Items as the body of a C initializer list, ``per_line`` per line."""
    values = list(items)
    if not values:
        return indent + "0"
    lines = [", ".join(values[i:i + per_line]) for i in range(0, len(values), per_line)]
    return ",\n".join(indent + line for line in lines)
