"""The CLI's error family, in its own module so that ``python -m adaptedge.cli.main`` (which loads
``main`` twice, once as ``__main__``) still catches the same class the commands raise."""

from adaptedge.protocol.errors import AdaptedgeError


class CommandError(AdaptedgeError):
    """A user-facing failure of the command line itself (a bad option, a missing file): printed
    as one line, exit status 2, as every other ``AdaptedgeError``."""
