"""The cloud service's own failure: something the operator must fix (broker, credentials,
bundle)."""

from __future__ import annotations

from adaptedge.protocol.errors import AdaptedgeError


class CloudError(AdaptedgeError, RuntimeError):
    """The cloud service cannot start or keep running: unreachable broker, refused credentials,
    a bundle whose HPC cannot be loaded. Bad *requests* never raise; they get error replies."""
