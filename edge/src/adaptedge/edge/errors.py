"""The edge runtime's error family. Everything it raises on purpose is an ``EdgeError``."""

from __future__ import annotations

from adaptedge.protocol.errors import AdaptedgeError, BundleError


class EdgeError(AdaptedgeError):
    """Base of every error the edge runtime raises on purpose."""


class BundleRefused(BundleError, EdgeError):
    """The bundle failed verification or breaks the model contract; ``path`` names the file."""


class OperatingPointError(EdgeError, ValueError):
    """An operating point name that does not exist, or a budget no point fits."""


class UplinkConfigError(EdgeError, ValueError):
    """An uplink option that cannot work (bad broker URL, contradictory TLS options)."""


class DeviceError(EdgeError, ValueError):
    """A device run that cannot go as asked (``edge.device``): an option out of range, replay rows
    that do not match the bundle, updates followed without a broker or trusted keys."""
