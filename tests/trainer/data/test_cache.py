"""``data.cache.hash_arrays``: content keys tell arrays apart by dtype, shape and bytes."""

from __future__ import annotations

import hashlib

import numpy as np

from adaptedge.trainer.data.cache import hash_arrays


def _key(*arrays: np.ndarray) -> str:
    digest = hashlib.sha256()
    hash_arrays(digest, arrays)
    return digest.hexdigest()


def test_equal_content_gives_the_same_key_and_any_difference_another() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _key(x) == _key(x.copy()) == _key(np.asfortranarray(x))  # layout is not content
    others = [x.astype(np.float64), x.reshape(4, 3), x + np.float32(1), x[:2]]
    keys = {_key(x), *(_key(o) for o in others)}
    assert len(keys) == 1 + len(others)
    assert _key(x, x[:1]) != _key(x[:1], x)  # order matters
