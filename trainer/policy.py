"""What a training method hands to the exporter: policy graphs whose node models are ONNX bytes.

Every method (ADAPT-GBRT, ADAPT-LIN, baselines, Graph-Reduce) returns ``PolicyExport``s;
``trainer.export.bundle`` turns them plus the HPC into a bundle. Node models follow the model
contract in ``protocol.manifest`` (input ``x`` = the node's ``inputs`` columns; outputs
``probabilities`` and, with more than one action, ``action_scores``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptedge.protocol.manifest import Action


@dataclass(frozen=True)
class NodeExport:
    sensors: tuple[str, ...]
    inputs: tuple[int, ...]
    onnx_model: bytes
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Metrics:
    """Accuracy and mean costs of a policy on one split (cost = training scalar)."""

    accuracy: float
    cost: float
    escalation_rate: float = 0.0
    avg_sensors_read: float = 0.0


@dataclass(frozen=True)
class PolicyExport:
    name: str
    root: str
    nodes: dict[str, NodeExport]
    validation: Metrics
    params: dict[str, float | str] = field(default_factory=dict)
    method: str = ""
