"""adaptedge: budgeted prediction at the edge.

One import name for the whole distribution. The subpackages live at the repository's top level
(``protocol/``, ``trainer/``, ``edge/``, ``cloud/``, ``simulator/``) and appear here as
``adaptedge.protocol`` and so on; ``adaptedge.cli`` is the ``adaptedge`` command.
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    __version__: str = _metadata.version("adaptedge")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
