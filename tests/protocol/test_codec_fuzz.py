"""Fuzzing the decoder: random, truncated and bit-flipped inputs raise only ProtocolError, fast."""

from __future__ import annotations

import random
import time

import msgpack
import pytest

from adaptedge.protocol import ProtocolError, decode, encode
from tests.support.message_examples import EXAMPLES

N_INPUTS = 12_000
PER_DECODE_BUDGET_S = 0.05


def _mutations(rng: random.Random, seeds: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    while len(out) < N_INPUTS:
        base = bytearray(rng.choice(seeds))
        kind = len(out) % 6
        if kind == 0:  # random bytes
            out.append(rng.randbytes(rng.randint(0, 300)))
        elif kind == 1:  # truncation
            out.append(bytes(base[: rng.randint(0, len(base))]))
        elif kind == 2:  # bit flips
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(base))
                base[i] ^= 1 << rng.randrange(8)
            out.append(bytes(base))
        elif kind == 3:  # byte overwrite / insertion
            i = rng.randrange(len(base))
            base[i:i] = rng.randbytes(rng.randint(1, 8))
            out.append(bytes(base))
        elif kind == 4:  # structurally valid msgpack of the wrong shape
            obj = rng.choice([[], [257], [257, 1], {"a": 1}, [257, *range(rng.randint(0, 12))],
                              [259, None, "d", "c", "m"], [260, "s", 0.0, {"x": [1]}],
                              [258, 1, "d", "b", 0, b"\0" * 3, "m", 0, 0], "x", 3.5, None,
                              [rng.randint(-5, 1 << 20), "d"], [260, "s", 0.0, {"k": float("nan")}]])
            out.append(msgpack.packb(obj))
        else:  # huge declared lengths
            out.append(rng.choice([b"\xdb\xff\xff\xff\xff", b"\xc6\x7f\xff\xff\xff", b"\xdd\xff\xff\xff\xff",
                                   b"\xdf\xff\xff\xff\xff"]) + rng.randbytes(rng.randint(0, 40)))
    return out


def test_fuzzed_inputs_raise_only_protocol_error(global_random_seed: int) -> None:
    rng = random.Random(global_random_seed)
    inputs = _mutations(rng, [encode(m) for _, m in EXAMPLES])
    assert len(inputs) >= 10_000
    other: list[tuple[bytes, BaseException]] = []
    slowest = 0.0
    accepted = rejected = 0
    for data in inputs:
        start = time.thread_time()
        try:
            decode(data)
            accepted += 1
        except ProtocolError:
            rejected += 1
        except Exception as exc:  # the property under test: this never happens
            other.append((data, exc))
        slowest = max(slowest, time.thread_time() - start)
    assert not other, f"{len(other)} inputs raised something else, first: {other[0]!r}"
    assert rejected > N_INPUTS // 2  # the fuzzer really produced malformed input
    assert accepted + rejected == len(inputs)
    # Bounded work per input: a generous ceiling on this thread's CPU seconds (not wall time,
    # which a loaded machine inflates) against pathological (quadratic, hanging) cases.
    assert slowest < PER_DECODE_BUDGET_S


@pytest.mark.parametrize("depth", [10, 1000, 100_000])
def test_deep_nesting_is_rejected(depth: int) -> None:
    data = b"\x91" * depth + b"\x00"
    with pytest.raises(ProtocolError):
        decode(data)
