"""The root of every adaptedge error (``AdaptedgeError``) and the protocol's own: the wire
(``ProtocolError``) and bundles (``BundleError``).

Each package has one family under ``AdaptedgeError``: ``ProtocolError`` and ``BundleError`` here,
``EdgeError``, ``CloudError``, ``TrainerError``, ``SimulatorError`` and the command line's
``CommandError`` in their packages' ``errors`` modules. The command line catches the root once and
prints the message as one line, so every message says what was wrong and what to do.
"""

from __future__ import annotations


class AdaptedgeError(Exception):
    """Base of every error adaptedge raises on purpose; a bug raises anything else."""


class ProtocolError(AdaptedgeError, ValueError):
    """A wire message or topic that cannot be accepted.

    ``code`` is machine-readable (stable across releases, sent back in error replies);
    the message says what was wrong and, where it helps, what to do.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class BundleError(AdaptedgeError, ValueError):
    """A bundle (manifest + model files) that is invalid, incomplete or tampered with.

    ``path`` names the offending file or manifest field when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message if path is None else f"{path}: {message}")
        self.path = path
        self.message = message


# Error codes on the wire. One table, so the cloud's counters and the tests agree.
DECODE_FAILED = "decode_failed"
TOO_LARGE = "too_large"
BAD_SCHEMA_VERSION = "bad_schema_version"
BAD_TYPE = "bad_type"
BAD_FIELD = "bad_field"
NON_FINITE = "non_finite"
BAD_FEATURES = "bad_features"
BAD_TOPIC = "bad_topic"
UNKNOWN_BUNDLE = "unknown_bundle"
MISSING_FEATURES = "missing_features"
INTERNAL = "internal"
ID_REUSED = "id_reused"
"""A request id still being answered for other content from the same device."""
OVERLOADED = "overloaded"
"""The worker is behind its input and shed the request without computing it."""
EXPIRED = "expired"
"""The request reached the worker past its deadline and was not computed."""

ERROR_CODES: tuple[str, ...] = (
    DECODE_FAILED,
    TOO_LARGE,
    BAD_SCHEMA_VERSION,
    BAD_TYPE,
    BAD_FIELD,
    NON_FINITE,
    BAD_FEATURES,
    BAD_TOPIC,
    UNKNOWN_BUNDLE,
    MISSING_FEATURES,
    INTERNAL,
    ID_REUSED,
    OVERLOADED,
    EXPIRED,
)
