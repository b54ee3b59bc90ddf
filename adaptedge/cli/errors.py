"""The CLI's error family, in its own module so that ``python -m adaptedge.cli.main`` (which loads
``main`` twice, once as ``__main__``) still catches the same class the commands raise."""


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""
