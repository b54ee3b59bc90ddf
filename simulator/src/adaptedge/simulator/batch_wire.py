"""Wire sizes for the batched replay under a bandwidth limit: per escalation, the bytes of the
request the runtime encodes and of the reply the simulated cloud encodes.

A bandwidth limit adds ``(request bytes + reply estimate) / bytes_per_s`` to each round trip
(``NetworkModel.round_trip_s``), where the per-row uplink's reply estimate is the size of the
last reply it received. Every field of both messages has a fixed encoded size (floats are
always float64 on the wire; features, mask and probabilities have fixed lengths per bundle)
except the request id and the labels, so each distinct (request id width, label) pair is
encoded once, with the real codec, and its length reused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.codec import encode
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.messages import (
    NO_LABEL,
    InferenceReply,
    InferenceRequest,
    Message,
    ValueReply,
)

I64 = npt.NDArray[np.int64]
_WIDTH_BOUNDS = np.array([128, 256, 1 << 16, 1 << 32], dtype=np.uint64)
"""msgpack unsigned integers take 1, 2, 3, 5 or 9 bytes: the bounds between those widths."""


def _representative(ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Per id, the smallest id of its msgpack width (so equal widths encode equally long)."""
    width = np.searchsorted(_WIDTH_BOUNDS, ids, side="right")
    lows = np.concatenate([[0], _WIDTH_BOUNDS]).astype(np.uint64)
    out: npt.NDArray[np.uint64] = lows[width]
    return out


def _lengths(ids: npt.NDArray[np.uint64], labels: I64, make: Callable[[int, int], Message]
             ) -> I64:
    """``len(encode(make(id, label)))`` per escalation, one encode per distinct pair."""
    keys = np.stack([_representative(ids).astype(np.int64), labels.astype(np.int64)], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    sizes = np.array([len(encode(make(int(i), int(lab)))) for i, lab in unique.tolist()],
                     dtype=np.int64)
    out: I64 = sizes[inverse.reshape(-1)]
    return out


def wire_sizes(manifest: Manifest, device_id: str, local_label: I64, hpc_label: I64,
               sized: bool, *, regression: bool = False) -> tuple[I64, I64]:
    """Bytes of escalation ``j``'s request (request id ``j + 1``, the runtime's local label,
    the item's size on the wire when ``sized``) and of the cloud's reply (the HPC's label).
    ``regression``: the request offers no label and the reply is a ``ValueReply`` (a float,
    always 8 bytes on the wire)."""
    n = len(local_label)
    ids = np.arange(1, n + 1, dtype=np.uint64)
    n_features = len(manifest.feature_names)
    features, mask = bytes(4 * n_features), bytes((n_features + 7) // 8)
    bundle_id, deadline = manifest.bundle_id, float(manifest.link.deadline_ms)
    size = 0.0 if sized else None
    probabilities = bytes(4 * len(manifest.classes))
    model_id = f"{bundle_id}/{manifest.hpc.file}"  # what cloud.HpcInference answers with

    def request(rid: int, label: int) -> InferenceRequest:
        return InferenceRequest(rid, device_id, bundle_id, 0.0, deadline, features, mask,
                                label, 0.0, size)

    def reply(rid: int, label: int) -> InferenceReply:
        return InferenceReply(rid, device_id, bundle_id, label, probabilities, model_id, 0.0,
                              0.0)

    def value_reply(rid: int, label: int) -> ValueReply:
        return ValueReply(rid, device_id, bundle_id, 0.0, model_id, 0.0, 0.0)

    if regression:
        none = np.full(n, NO_LABEL, dtype=np.int64)
        return _lengths(ids, none, request), _lengths(ids, none, value_reply)
    return _lengths(ids, local_label, request), _lengths(ids, hpc_label, reply)
