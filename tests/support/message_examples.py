"""One central list of example wire messages: every round-trip test iterates over it."""

from __future__ import annotations

import numpy as np

from adaptedge.protocol import (
    ErrorReply,
    InferenceReply,
    InferenceRequest,
    Telemetry,
    pack_features,
)
from adaptedge.protocol.messages import NO_LABEL, Message, ValueReply


def _request(n: int, measured_every: int = 1, label: int = 1) -> InferenceRequest:
    values = np.linspace(-3.0, 3.0, n, dtype=np.float32)
    mask = (np.arange(n) % measured_every) == 0
    features, packed = pack_features(values, mask)
    return InferenceRequest(
        request_id=12345 + n, device="dev-1", bundle_id="5e1b2aadb5d164f33bed8c5a",
        sent_at=1_763_000_000.25, deadline_ms=250.0, features=features, mask=packed,
        local_label=label, local_confidence=0.75,
    )


EXAMPLES: list[tuple[str, Message]] = [
    ("request-50-features", _request(50)),
    ("request-1-feature", _request(1)),
    ("request-partial-mask", _request(13, measured_every=3, label=NO_LABEL)),
    ("request-max-id", InferenceRequest(2**64 - 1, "d", "b", 0.0, 1.0, b"\0\0\0\0", b"\x01")),
    ("reply", InferenceReply(7, "dev-1", "bundle", 1, np.array([0.25, 0.75], "<f4").tobytes(),
                             "hpc-abc", 1_763_000_000.5, 0.42)),
    ("error-with-id", ErrorReply(7, "dev-1", "bad_features", "mask has 2 bytes, expected 7", 1.5)),
    ("error-without-id", ErrorReply(None, "dev-1", "decode_failed", "not msgpack", 2.0)),
    ("telemetry", Telemetry("worker-1", 3.0, {"requests": 10, "p50_ms": 0.4, "p99_ms": float("inf")})),
    ("telemetry-empty", Telemetry("dev-1", 4.0, {})),
    ("value-reply", ValueReply(7, "dev-1", "bundle", -21.375, "hpc-abc", 1_763_000_000.5, 0.42)),
    ("value-reply-max-id", ValueReply(2**64 - 1, "d", "b", 1e300, "", 0.0, 0.0)),
]
