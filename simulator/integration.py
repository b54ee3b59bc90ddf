"""Where the simulator finds the real edge runtime and cloud inference (imported lazily)."""

from __future__ import annotations

import importlib
from typing import Any


def _find(candidates: tuple[tuple[str, str], ...], what: str) -> Any:
    errors = []
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            errors.append(f"{module_name}: {exc}")
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
        errors.append(f"{module_name} has no {attr}")
    raise RuntimeError(f"cannot find {what} ({'; '.join(errors)}): is this adaptedge complete?")


def edge_runtime_class() -> Any:
    """``EdgeRuntime``: ``.load(bundle_dir, *, uplink, operating_point, clock, device_id)``."""
    return _find((("adaptedge.edge", "EdgeRuntime"), ("adaptedge.edge.runtime", "EdgeRuntime")), "the edge runtime")


def hpc_inference_class() -> Any:
    """``HpcInference`` (``HpcInference.load(bundle_dir).handle_batch(requests, now=None)``)."""
    return _find((("adaptedge.cloud", "HpcInference"), ("adaptedge.cloud.inference", "HpcInference"),
                  ("adaptedge.cloud.hpc", "HpcInference")), "the cloud HPC inference")
