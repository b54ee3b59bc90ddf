"""The simulator's error family: everything it raises on purpose is a ``SimulatorError``.

Each class keeps its built-in base (``ValueError`` for a bad scenario file, ``RuntimeError`` for
a run or broker that failed); the modules that raise them re-export them under their old names.
"""

from __future__ import annotations

from adaptedge.protocol.errors import AdaptedgeError


class SimulatorError(AdaptedgeError):
    """Base of every error the simulator raises on purpose."""


class ScenarioError(SimulatorError, ValueError):
    """A scenario file that cannot be used; the message names the file and the key."""


class HilError(SimulatorError, RuntimeError):
    """The HIL run could not be completed; the message says which process and where its log is."""


class BrokerError(SimulatorError, RuntimeError):
    """A broker could not be started or reached."""
