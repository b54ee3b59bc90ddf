"""One error family per package, all under ``AdaptedgeError``: the command line catches the root
once, so every error a package raises on purpose must be in it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

from adaptedge.protocol.errors import AdaptedgeError, BundleError, ProtocolError

# package -> (its errors module, the root of its family)
FAMILIES = {
    "adaptedge.protocol": ("adaptedge.protocol.errors", "AdaptedgeError"),
    "adaptedge.edge": ("adaptedge.edge.errors", "EdgeError"),
    "adaptedge.cloud": ("adaptedge.cloud.errors", "CloudError"),
    "adaptedge.trainer": ("adaptedge.trainer.errors", "TrainerError"),
    "adaptedge.simulator": ("adaptedge.simulator.errors", "SimulatorError"),
    "adaptedge.cli": ("adaptedge.cli.errors", "CommandError"),
}

OUTSIDE_THE_FAMILY = {"adaptedge.cloud.service.guard.RunTimeout"}
"""Never leaves its package: the inference turns it into an error reply to the device."""

# The built-in bases that ``except ValueError`` / ``except RuntimeError`` sites (ours, callers',
# scikit-learn's parameter checks) still rely on.
BUILTIN_BASES = {
    "adaptedge.protocol.errors": {"ProtocolError": ValueError, "BundleError": ValueError},
    "adaptedge.edge.errors": {"OperatingPointError": ValueError, "UplinkConfigError": ValueError,
                              "BundleRefused": ValueError},
    "adaptedge.cloud.errors": {"CloudError": RuntimeError},
    "adaptedge.trainer.errors": {
        "DatasetError": ValueError, "CostsError": ValueError, "ParamError": ValueError,
        "BudgetError": ValueError, "TrainError": ValueError, "HpcError": ValueError,
        "RecalibrationError": ValueError, "RowsFileError": ValueError,
        "ClusterError": RuntimeError},
    "adaptedge.simulator.errors": {"ScenarioError": ValueError, "HilError": RuntimeError,
                                   "BrokerError": RuntimeError},
}


def exceptions_of(module: ModuleType) -> list[type[BaseException]]:
    """The exception classes ``module`` defines (not those it imports)."""
    return [c for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == module.__name__]


def modules_of(package: str) -> list[ModuleType]:
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")
                         if not m.name.endswith("__main__")]
    return [importlib.import_module(name) for name in names]


@pytest.mark.parametrize("package", sorted(FAMILIES))
def test_each_package_has_one_family_under_adaptedge_error(package: str) -> None:
    module_name, root_name = FAMILIES[package]
    module = importlib.import_module(module_name)
    root = getattr(module, root_name)
    assert issubclass(root, AdaptedgeError)
    defined = exceptions_of(module)
    assert root in defined
    for cls in defined:
        assert issubclass(cls, root), f"{cls.__qualname__} is not a {root_name}"


@pytest.mark.parametrize("package", sorted(set(FAMILIES) - {"adaptedge.cli"}))
def test_every_error_a_package_defines_is_in_its_family(package: str) -> None:
    module_name, root_name = FAMILIES[package]
    root = getattr(importlib.import_module(module_name), root_name)
    strays = [f"{cls.__module__}.{cls.__qualname__}" for module in modules_of(package)
              for cls in exceptions_of(module)
              if not issubclass(cls, root)
              and f"{cls.__module__}.{cls.__qualname__}" not in OUTSIDE_THE_FAMILY]
    assert strays == [], f"not {root_name}s: {strays} (define them in {module_name})"


@pytest.mark.parametrize("module_name", sorted(BUILTIN_BASES))
def test_the_old_built_in_bases_stay(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name, base in BUILTIN_BASES[module_name].items():
        assert issubclass(getattr(module, name), base), f"{name} is no longer a {base.__name__}"


@pytest.mark.parametrize(("old_home", "name"), [
    ("adaptedge.trainer.data.datasets", "DatasetError"),
    ("adaptedge.trainer.data.dataset_core", "DatasetError"),
    ("adaptedge.trainer.data.costs", "CostsError"),
    ("adaptedge.trainer.methods.params", "ParamError"),
    ("adaptedge.trainer.policy.frontier", "BudgetError"),
    ("adaptedge.trainer.api", "TrainError"),
    ("adaptedge.trainer.hpc", "HpcError"),
    ("adaptedge.trainer.recalibrate", "RecalibrationError"),
    ("adaptedge.trainer.fleet_rows_io", "RowsFileError"),
    ("adaptedge.trainer.parallel", "ClusterError"),
    ("adaptedge.simulator.scenario", "ScenarioError"),
    ("adaptedge.simulator.hil", "HilError"),
    ("adaptedge.simulator.brokers", "BrokerError"),
])
def test_errors_keep_their_old_import_paths(old_home: str, name: str) -> None:
    family = "adaptedge.trainer.errors" if ".trainer." in old_home else "adaptedge.simulator.errors"
    assert getattr(importlib.import_module(old_home), name) is \
        getattr(importlib.import_module(family), name)


def test_protocol_errors_keep_their_fields() -> None:
    wire = ProtocolError("bad_field", "x must be finite")
    assert (wire.code, wire.message, str(wire)) == ("bad_field", "x must be finite",
                                                    "bad_field: x must be finite")
    bundle = BundleError("hash mismatch", path="hpc.onnx")
    assert (bundle.path, str(bundle)) == ("hpc.onnx", "hpc.onnx: hash mismatch")
    assert isinstance(wire, AdaptedgeError) and isinstance(bundle, AdaptedgeError)
