"""The codec's C helpers (``protocol/_speedups.c``) equal their Python fallbacks, and the codec
works without them (a device installed with no C compiler)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptedge.protocol import InferenceRequest, codec, encode, pack_features

try:
    from adaptedge.protocol import _speedups as speedups
except ImportError:  # not built here: the parity tests skip, the install test says why
    speedups = None  # type: ignore[assignment]
needs_speedups = pytest.mark.skipif(speedups is None, reason="the C helpers were not built")

# Float32 bit patterns that matter: NaN (quiet, signalling, negative), +-infinity, the largest
# finite values, zero, and values whose lower bytes are 0x7f/0xff (the top-byte prefilter).
_SPECIAL = [0x7FC00000, 0x7F800001, 0xFFC00000, 0x7F800000, 0xFF800000, 0x7F7FFFFF,
            0xFF7FFFFF, 0x00000000, 0x3F7FFF7F, 0x00FF00FF, 0x7F000000, 0xFF000000]
_words = st.one_of(st.sampled_from(_SPECIAL), st.integers(0, 2**32 - 1))


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Feature bytes and a mask: mostly well formed, sometimes off by a byte or with padding."""
    n = draw(st.integers(1, 40))
    features = np.array(draw(st.lists(_words, min_size=n, max_size=n)), "<u4").tobytes()
    mask = np.packbits(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))),
                       bitorder="little").tobytes()
    match draw(st.integers(0, 5)):
        case 0:
            features = features[: draw(st.integers(1, len(features)))]
        case 1:
            mask += bytes([draw(st.integers(0, 255))])
        case 2 if n % 8:
            mask = mask[:-1] + bytes([mask[-1] | draw(st.integers(1, 255)) << (n % 8) & 0xFF])
        case _:
            pass
    return features, mask or b"\0"


@pytest.mark.slow
@needs_speedups
@settings(max_examples=400, deadline=None)
@given(_layouts())
def test_request_ok_equals_the_python_checks(layout: tuple[bytes, bytes]) -> None:
    features, mask = layout
    assert speedups.request_ok(features, mask) is codec._request_ok_py(features, mask)


def _grid_layouts() -> list[tuple[bytes, bytes]]:
    """Every special bit pattern at every place of 1, 7, 8, 9 and 17 features, measured or
    not, then each fault of ``_layouts`` applied to it: the cases the random draws above
    reach only by chance, enumerated (3,840)."""
    cases = []
    for n in (1, 7, 8, 9, 17):
        for word in _SPECIAL:
            for at in range(n):
                words = np.full(n, 0x3F800000, "<u4")  # 1.0
                words[at] = word
                features = words.tobytes()
                for measured in (np.ones(n, bool), np.arange(n) != at):
                    mask = np.packbits(measured, bitorder="little").tobytes()
                    cases += [(features, mask), (features[:-1], mask), (features, mask + b"\0")]
                    if n % 8:
                        cases.append((features, mask[:-1] + bytes([mask[-1] | 1 << (n % 8)])))
    return cases


@needs_speedups
def test_request_ok_equals_the_python_checks_on_a_grid() -> None:
    layouts = _grid_layouts()
    answers = [codec._request_ok_py(f, m) for f, m in layouts]
    assert 0 < sum(answers) < len(answers)  # the grid holds accepted and refused layouts
    bad = [(f.hex(), m.hex()) for (f, m), ok in zip(layouts, answers, strict=True)
           if speedups.request_ok(f, m) is not ok]
    assert not bad, f"{len(bad)} layouts differ, first {bad[0]}"


@needs_speedups
def test_request_ok_rejects_each_fault() -> None:
    values = np.ones(9, "<f4")
    measured = np.ones(9, bool)
    features, mask = pack_features(values, measured)
    assert speedups.request_ok(features, mask)
    assert not speedups.request_ok(features[:-1], mask)  # not whole float32 values
    assert not speedups.request_ok(features, mask + b"\0")  # a mask byte too many
    assert not speedups.request_ok(features, mask[:1] + b"\x02")  # a padding bit set
    values[8] = np.inf
    assert not speedups.request_ok(pack_features(values, measured)[0], mask)  # measured inf
    measured[8] = False
    assert speedups.request_ok(*pack_features(values, measured))  # unmeasured inf is fine
    with pytest.raises(TypeError):
        speedups.request_ok(bytearray(features), mask)  # type: ignore[arg-type]


@needs_speedups
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 300), st.binary(max_size=40))
def test_sizeless_equals_the_python_layout(n_features: int, device_tail: bytes) -> None:
    device = "d-" + device_tail.hex()[:100]
    features, mask = pack_features(np.arange(n_features, dtype=np.float32),
                                   np.ones(n_features, bool))
    full = codec._encode(InferenceRequest(7, device, "b", 1.0, 5.0, features, mask))
    assert speedups.sizeless(full) == codec._sizeless_py(full)
    with pytest.raises(ValueError, match="11-element"):
        speedups.sizeless(full[:-1])


def test_the_install_built_the_c_helpers() -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the codec runs its Python fallbacks")
    assert speedups is not None, "a C compiler is here but `pip install` did not build " \
        "protocol/_speedups.c: see the install log"
    assert codec._request_ok is speedups.request_ok
    assert codec._sizeless is speedups.sizeless


def test_codec_without_the_c_helpers() -> None:
    # A device installed without a compiler: the same answers from the Python fallbacks.
    script = textwrap.dedent("""
        import sys
        sys.modules["adaptedge.protocol._speedups"] = None  # import fails as when not built
        import numpy as np
        from adaptedge.protocol import InferenceRequest, ProtocolError, codec, decode, encode
        from adaptedge.protocol import pack_features
        assert codec._request_ok is codec._request_ok_py
        values = np.ones(10, np.float32)
        features, mask = pack_features(values, np.ones(10, bool))
        request = InferenceRequest(1, "dev", "b", 1.0, 5.0, features, mask)
        assert decode(encode(request)) == request
        values[3] = np.nan
        bad = InferenceRequest(1, "dev", "b", 1.0, 5.0, values.astype("<f4").tobytes(), mask)
        try:
            decode(encode(bad))
        except ProtocolError as exc:
            print(exc.code)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "non_finite"


def test_encode_uses_the_sizeless_layout() -> None:
    features, mask = pack_features(np.ones(3, np.float32), np.ones(3, bool))
    data = encode(InferenceRequest(1, "dev", "b", 1.0, 5.0, features, mask))
    assert data[0] == 0x9A and data[-1] != 0xC0
