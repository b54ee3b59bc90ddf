"""The trainer's error family: everything it raises on purpose is a ``TrainerError``.

Each class keeps the built-in base its callers (and scikit-learn's parameter checks) catch it by:
``ValueError`` for bad input, ``RuntimeError`` for a cluster that cannot be used. The modules that
raise them import them from here and re-export them under their old names.
"""

from __future__ import annotations

from adaptedge.protocol.errors import AdaptedgeError


class TrainerError(AdaptedgeError):
    """Base of every error the trainer raises on purpose."""


class DatasetError(TrainerError, ValueError):
    """A dataset that cannot be loaded: unknown name, missing column, bad value, bad grouping."""


class CostsError(TrainerError, ValueError):
    """A costs file that cannot be used; the message names the file and the field."""


class ParamError(TrainerError, ValueError):
    """A method parameter that is unknown or has the wrong type or value."""


class BudgetError(TrainerError, ValueError):
    """No operating point fits the budget."""


class TrainError(TrainerError, ValueError):
    """Training produced nothing usable (e.g. a method returned no candidate policies)."""


class HpcError(TrainerError, ValueError):
    """An HPC that cannot be fitted or loaded (bad kind, ONNX model of the wrong shape)."""


class RecalibrationError(TrainerError, ValueError):
    """Recalibration cannot run on these rows; the message says what is missing."""


class RowsFileError(TrainerError, ValueError):
    """A rows file that cannot be read; the message names the file and the line."""


class ClusterError(TrainerError, RuntimeError):
    """The Dask cluster cannot be used: extra missing, scheduler unreachable or lost."""


class ExportError(TrainerError, ValueError):
    """A bundle feature an exporter cannot express (e.g. an ONNX op the C exporter does not
    translate); the one-line message names it. Nothing is written wrong instead."""


class MissingExtraError(TrainerError, ImportError):
    """A method whose library is an optional extra that is not installed; the one-line
    message says what to ``pip install``."""


class SearchBudgetSpent(TrainerError):
    """A search would spend more than its budget (e.g. PolyDom's progressive ε,
    ``methods.polydom.progressive``); raised and caught inside the search, never to the user."""
