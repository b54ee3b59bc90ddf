"""C helpers of the wire codec (``protocol/_speedups.c``)."""

def request_ok(features: bytes, mask: bytes, /) -> bool:
    """Whole float32 features, one mask bit per feature with clear padding, every measured
    feature finite."""

def sizeless(encoded: bytes, /) -> bytes:
    """An encoded 11-element request in the 10-element layout (header 0x9a, nil dropped)."""
