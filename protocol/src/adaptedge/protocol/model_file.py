"""How a bundle stores a node's ONNX model: as is (``*.onnx``) or compressed, xz
(``*.onnx.xz``, what the trainer writes) or zlib (``*.onnx.zlib``); schema version 3 only.

The manifest hashes (and a signature covers) the stored bytes, so a reader checks a file before
it decompresses it; ``model_bytes`` then gives the ONNX bytes, refusing a stream that is damaged
or that would grow past ``MAX_MODEL_BYTES``. xz rather than zlib (both stdlib): on the default
800-tree letter-binary ADAPT-GBRT model (1,071,670 bytes) xz -9e is 81,508 bytes against zlib's
97,095, which puts the one-point device bundle under 100 KB, and it decompresses in ~5 ms
against ~1 ms on an idle 2-core x86 machine. The xz dictionary is the smallest power of two
that holds the model (at least 64 KiB), so a reader needs about that much memory, not the
64 MiB of ``xz -9``.
"""

from __future__ import annotations

import lzma
import zlib

from adaptedge.protocol.errors import BundleError

XZ_SUFFIX = ".xz"
ZLIB_SUFFIX = ".zlib"
MODEL_SUFFIX = XZ_SUFFIX
"""The suffix of the compressed model files the trainer writes."""
MAX_MODEL_BYTES = 256 * 1024 * 1024
"""Largest decompressed model accepted (a zip bomb stops here)."""
ZLIB_LEVEL = 9
XZ_PRESET = 9 | lzma.PRESET_EXTREME


def is_compressed(name: str) -> bool:
    return name.endswith((XZ_SUFFIX, ZLIB_SUFFIX))


def _dictionary_size(n: int) -> int:
    size = 1 << 16
    while size < n:
        size <<= 1
    return size


def compress_model(data: bytes, suffix: str = MODEL_SUFFIX) -> bytes:
    """The stored bytes of a ``*.onnx`` + ``suffix`` file (deterministic for one xz or zlib
    build)."""
    if suffix == ZLIB_SUFFIX:
        return zlib.compress(data, ZLIB_LEVEL)
    if suffix != XZ_SUFFIX:
        raise ValueError(f"unknown model compression {suffix!r} (use {XZ_SUFFIX!r} or "
                         f"{ZLIB_SUFFIX!r})")
    filters = [{"id": lzma.FILTER_LZMA2, "preset": XZ_PRESET,
                "dict_size": _dictionary_size(len(data))}]
    return lzma.compress(data, format=lzma.FORMAT_XZ, filters=filters)


def model_bytes(name: str, stored: bytes) -> bytes:
    """The ONNX bytes of bundle file ``name`` whose (hash-checked) content is ``stored``."""
    if name.endswith(XZ_SUFFIX):
        return _inflate_xz(name, stored)
    if not name.endswith(ZLIB_SUFFIX):
        return stored
    inflate = zlib.decompressobj()
    try:
        out = inflate.decompress(stored, MAX_MODEL_BYTES)
    except zlib.error as exc:
        raise BundleError(f"is not a zlib stream ({exc}); the bundle is damaged: export it "
                          "again", path=name) from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise _too_big_or_cut(name)
    return out


def _inflate_xz(name: str, stored: bytes) -> bytes:
    inflate = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        out = inflate.decompress(stored, MAX_MODEL_BYTES)
    except lzma.LZMAError as exc:
        raise BundleError(f"is not an xz stream ({exc}); the bundle is damaged: export it "
                          "again", path=name) from None
    if not inflate.eof or inflate.unused_data:
        raise _too_big_or_cut(name)
    return out


def _too_big_or_cut(name: str) -> BundleError:
    return BundleError(f"does not decompress to one model of at most {MAX_MODEL_BYTES} "
                       "bytes; the bundle is damaged: export it again", path=name)
