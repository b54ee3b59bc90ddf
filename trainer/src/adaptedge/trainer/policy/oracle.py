"""The reference walk of a policy graph over a batch of rows, run on the exported ONNX models.

numpy + onnxruntime only (the edge parity tests use it). The walk is ``protocol.walk.
walk_manifest`` in float32 (also the simulator's batched replay): every row starts at the root;
at each node the node's model runs once on all rows there (columns = ``model.inputs``); the
first highest ``action_scores`` entry picks the action (a single-action node needs no scores):
stop -> answer argmax ``probabilities``; acquire or route -> the next node, whose sensors the
row then holds; escalate -> the HPC on the row (its sensors read, unmeasured columns 0)
answers. A row pays each sensor it read once, however many nodes hold it; costs follow ``protocol.costs`` (``decision_cost`` semantics, vectorised).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.bundle import read_manifest
from adaptedge.protocol.costs import cost_columns, decision_costs, visit_columns
from adaptedge.protocol.device_bundle import require_hpc
from adaptedge.protocol.manifest import (
    MODEL_INPUT,
    PROBA_OUTPUT,
    VALUE_OUTPUT,
    Manifest,
)
from adaptedge.protocol.model_file import model_bytes
from adaptedge.protocol.walk import (
    BatchWalk,
    WalkNode,
    compile_graph,
    gather,
    node_scores,
    scores_output,
    walk_manifest,
)
from adaptedge.trainer.policy.failed_reads import (
    bits_mask,
    failed_sensors,
    graph_bits,
    patch_batch,
    walk_live_rows,
    zero_filled,
)


@dataclass(frozen=True)
class PolicyResult:
    """Per-row outcomes of one policy on a batch, and their means."""

    policy: str
    labels: npt.NDArray[np.int64]
    probabilities: npt.NDArray[np.float32]
    escalated: npt.NDArray[np.bool_]
    sensors_read: npt.NDArray[np.bool_]
    """[N, n_sensors], columns in ``Manifest.sensors`` order (escalation's HPC sensors included)."""
    sensor_names: tuple[str, ...]
    nodes_visited: npt.NDArray[np.int64]
    final_node: npt.NDArray[np.str_]
    cost: npt.NDArray[np.float64]
    """The training scalar (``Manifest.cost_weights``)."""
    energy_mj: npt.NDArray[np.float64]
    latency_ms: npt.NDArray[np.float64]
    money: npt.NDArray[np.float64]
    bytes: npt.NDArray[np.int64]
    y: npt.NDArray[np.int64] | None = None
    targets: npt.NDArray[np.float64] | None = None
    """Regression: the numeric target per row (``y`` is then None); ``probabilities`` then
    holds each row's answered value [N, 1] (the stop node's, or the HPC's when escalated)."""

    @property
    def values(self) -> npt.NDArray[np.float32]:
        """A regression run's answer per row (``probabilities[:, 0]``)."""
        return np.asarray(self.probabilities[:, 0], dtype=np.float32)

    @property
    def mse(self) -> float:
        """Mean squared error of ``values`` against ``targets`` (NaN without targets)."""
        if self.targets is None:
            return float("nan")
        return float(np.mean((self.values.astype(np.float64) - self.targets) ** 2))

    @property
    def mae(self) -> float:
        if self.targets is None:
            return float("nan")
        return float(np.mean(np.abs(self.values.astype(np.float64) - self.targets)))

    @property
    def source(self) -> npt.NDArray[np.str_]:
        """"local" or "cloud" per row."""
        return np.where(self.escalated, "cloud", "local")

    @property
    def accuracy(self) -> float:
        if self.y is None:
            return float("nan")
        return float(np.mean(self.labels == self.y))

    @property
    def mean_cost(self) -> float:
        return float(self.cost.mean())

    @property
    def mean_energy_mj(self) -> float:
        return float(self.energy_mj.mean())

    @property
    def mean_latency_ms(self) -> float:
        return float(self.latency_ms.mean())

    @property
    def mean_money(self) -> float:
        return float(self.money.mean())

    @property
    def mean_bytes(self) -> float:
        return float(self.bytes.mean())

    @property
    def escalation_rate(self) -> float:
        return float(self.escalated.mean())

    @property
    def avg_sensors_read(self) -> float:
        return float(self.sensors_read.sum(axis=1).mean())


class BundleRunner:
    """A manifest plus its ONNX models (sessions created once, one thread each).

    ``reuse_runs``: keep every model's outputs per input rows, so that the points sharing a
    model (an ADAPT-GBRT fit's thresholds) run it once on the same rows (the export walks 47
    letter-binary points on 10 models); the outputs are read-only arrays."""

    def __init__(self, manifest: Manifest, load: Callable[[str], bytes], *,
                 reuse_runs: bool = False) -> None:
        self.manifest = manifest
        self._load = load
        self._sessions: dict[str, object] = {}
        self._runs: dict[tuple[object, ...], list[npt.NDArray[np.float32]]] | None = (
            {} if reuse_runs else None)
        self.sensor_names = tuple(s.name for s in manifest.sensors)
        self._sensor_index = {n: i for i, n in enumerate(self.sensor_names)}
        self._sensor_costs, self._link_cost = cost_columns(manifest.sensors, manifest.link,
                                                           manifest.cost_weights)

    @classmethod
    def from_dir(cls, bundle_dir: str | Path) -> BundleRunner:
        root = Path(bundle_dir)
        manifest = read_manifest(root)

        def read(name: str) -> bytes:
            if name == manifest.hpc.file:
                require_hpc(manifest, root, "an evaluation against the HPC")
            return (root / name).read_bytes()

        return cls(manifest, read)

    @classmethod
    def from_files(cls, manifest: Manifest, files: Mapping[str, bytes], *,
                   reuse_runs: bool = False) -> BundleRunner:
        return cls(manifest, lambda name: files[name], reuse_runs=reuse_runs)

    def session(self, file: str) -> object:
        if file not in self._sessions:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            self._sessions[file] = ort.InferenceSession(
                model_bytes(file, self._load(file)), opts, providers=["CPUExecutionProvider"])
        return self._sessions[file]

    def run(self, file: str, x: npt.NDArray[np.float32], outputs: list[str]
            ) -> list[npt.NDArray[np.float32]]:
        x = np.ascontiguousarray(x)
        key: tuple[object, ...] = ()
        if self._runs is not None:
            key = (file, tuple(outputs), x.dtype.str, x.shape,
                   hashlib.blake2b(x.data, digest_size=16).digest())  # no copy
            if (done := self._runs.get(key)) is not None:
                return done
        session = self.session(file)
        result = session.run(outputs, {MODEL_INPUT: x})  # type: ignore[attr-defined]
        out = [np.asarray(r, dtype=np.float32) for r in result]
        if self._runs is not None:
            for array in out:
                array.setflags(write=False)
            self._runs[key] = out
        return out

    def _run_node(self, file: str, x: npt.NDArray[np.float32], scores: str | None
                  ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
        """``protocol.walk.RunFile``: the answer and, when asked, output ``scores``."""
        answer = self.answer_output
        out = self.run(file, x, [answer, scores] if scores else [answer])
        return out[0], (out[1] if scores else None)

    @property
    def answer_output(self) -> str:
        """``value`` for a regression bundle, else ``probabilities``."""
        return VALUE_OUTPUT if self.manifest.is_regression else PROBA_OUTPUT

    def _truth(self, y: npt.ArrayLike | None
               ) -> tuple[npt.NDArray[np.int64] | None, npt.NDArray[np.float64] | None]:
        """``(y, targets)`` of a result: labels for classification, numbers for regression."""
        if y is None:
            return None, None
        if self.manifest.is_regression:
            return None, np.asarray(y, dtype=np.float64).reshape(-1)
        return np.asarray(y, dtype=np.int64), None

    def hpc_proba(self, X: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """HPC probabilities on rows with only the HPC's sensors' columns kept (others 0)."""
        x = np.asarray(X, dtype=np.float32)
        keep = np.zeros(x.shape[1], dtype=bool)
        for name in self.manifest.hpc.sensors:
            keep[list(self.manifest.sensors[self._sensor_index[name]].features)] = True
        x = np.where(keep, x, np.float32(0)).astype(np.float32)
        return self.run(self.manifest.hpc.file, x, [self.answer_output])[0]

    def hpc_sensor_mask(self) -> npt.NDArray[np.bool_]:
        mask = np.zeros(len(self.sensor_names), dtype=bool)
        mask[[self._sensor_index[n] for n in self.manifest.hpc.sensors]] = True
        return mask

    def costs(self, sensors_read: npt.NDArray[np.bool_], escalated: npt.NDArray[np.bool_],
              sizes: npt.ArrayLike | None = None) -> npt.NDArray[np.float64]:
        """[N, 5] scalar, energy_mj, latency_ms, money, bytes — ``decision_cost`` per row (each
        row at its own size when ``sizes`` is given and costs grow with the size)."""
        per_sensor = self._sensor_costs
        if sizes is not None and self.manifest.size_dependent:
            m = self.manifest
            per_sensor = cost_columns(m.sensors, m.link, m.cost_weights, sizes)[0]
        return decision_costs(sensors_read, escalated, per_sensor, self._link_cost)

    def evaluate(self, policy_name: str, X: npt.ArrayLike, y: npt.ArrayLike | None = None,
                 sizes: npt.ArrayLike | None = None) -> PolicyResult:
        """Walk ``policy_name`` on every row of ``X`` (full feature rows) in one batch; with
        ``sizes`` (one per row) each row pays its own size's costs."""
        m = self.manifest
        if policy_name not in m.policies:
            raise KeyError(f"no policy {policy_name!r} in the bundle (it has "
                           f"{sorted(m.policies)})")
        x = np.asarray(X, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != len(m.feature_names):
            raise ValueError(f"X must be [N, {len(m.feature_names)}] (the bundle's features), "
                             f"got shape {x.shape}")
        truth = self._truth(y)
        walk = walk_manifest(m, policy_name, x, self._run_node)
        failed, live_bits = self._failed_reads(policy_name, x, walk)
        escalated = walk.escalated
        labels = walk.local_label
        proba_out = walk.probabilities
        read = walk.read_mask(len(self.sensor_names))
        visited = walk.visited
        final = np.asarray(walk.node_ids, dtype=object)[walk.final]
        hpc_mask = self.hpc_sensor_mask()
        esc = np.flatnonzero(escalated)
        if failed is not None:  # the cloud refuses a row lacking an HPC sensor (degraded)
            esc = esc[failed[esc] & int((hpc_mask << np.arange(hpc_mask.size)).sum()) == 0]
        if esc.size:
            hpc = self.hpc_proba(x[esc])
            labels[esc] = np.argmax(hpc, axis=1)
            proba_out[esc] = hpc
        read[escalated] |= hpc_mask
        if failed is not None:
            read &= ~bits_mask(failed, read.shape[1])
            rows, bits = live_bits
            read[rows] = bits_mask(bits, read.shape[1])
        c = self.costs(read, escalated, sizes)
        if walk.compute is not None:
            c = c + walk.compute
        return PolicyResult(
            policy=policy_name, labels=labels, probabilities=proba_out, escalated=escalated,
            sensors_read=read, sensor_names=self.sensor_names, nodes_visited=visited,
            final_node=final.astype(str), cost=c[:, 0], energy_mj=c[:, 1], latency_ms=c[:, 2],
            money=c[:, 3], bytes=np.rint(c[:, 4]).astype(np.int64),
            y=truth[0], targets=truth[1])

    def _failed_reads(self, policy: str, x: npt.NDArray[np.float32], walk: BatchWalk
                      ) -> tuple[npt.NDArray[np.int64] | None,
                                 tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Rows with missing cells walked as on a device (``trainer.policy.failed_reads``),
        patched into ``walk``: each row's failed sensors (None: no missing cell) and the live
        rows with the sensors they read."""
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if np.isfinite(x).all():
            return None, none
        m = self.manifest
        failed = failed_sensors(x, [s.features for s in m.sensors])
        graph = m.policies[policy]
        compiled = compile_graph(graph, self.sensor_names, len(m.feature_names),
                                 lambda _, node: node.model.file)
        rows = np.flatnonzero(failed & graph_bits(compiled) != 0).astype(np.int64)
        if not rows.size:
            return failed, none
        filled = zero_filled(x)

        def run(node: WalkNode[str], at: npt.NDArray[np.int64]
                ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
            answer, out = self._run_node(node.model, gather(filled, at, node.inputs),
                                         scores_output(node))
            return answer, node_scores(node, out)

        hpc = tuple(int(i) for i in np.flatnonzero(self.hpc_sensor_mask()))
        live = walk_live_rows(compiled, rows, failed, run, len(m.classes), self.sensor_names,
                              hpc)
        patch_batch(walk, live, visit_columns(graph, m.cost_weights))
        return failed, (rows, live.read_bits)

    def evaluate_hpc(self, X: npt.ArrayLike, y: npt.ArrayLike | None = None,
                     sizes: npt.ArrayLike | None = None) -> PolicyResult:
        """Always-cloud: the HPC on every row, its sensors read and the link paid each time."""
        x = np.asarray(X, dtype=np.float32)
        n = len(x)
        proba = self.hpc_proba(x)
        truth = self._truth(y)
        read = np.tile(self.hpc_sensor_mask(), (n, 1))
        escalated = np.ones(n, dtype=bool)
        c = self.costs(read, escalated, sizes)
        return PolicyResult(
            policy="hpc", labels=np.argmax(proba, axis=1).astype(np.int64), probabilities=proba,
            escalated=escalated, sensors_read=read, sensor_names=self.sensor_names,
            nodes_visited=np.zeros(n, dtype=np.int64), final_node=np.full(n, "hpc"),
            cost=c[:, 0], energy_mj=c[:, 1], latency_ms=c[:, 2], money=c[:, 3],
            bytes=np.rint(c[:, 4]).astype(np.int64),
            y=truth[0], targets=truth[1])


def evaluate_policy(bundle: str | Path | Manifest, policy_name: str, X: npt.ArrayLike,
                    y: npt.ArrayLike | None = None, *, root: str | Path | None = None,
                    sizes: npt.ArrayLike | None = None) -> PolicyResult:
    """Evaluate one policy of a bundle directory (or of ``Manifest`` + ``root``) on ``X``."""
    if isinstance(bundle, Manifest):
        if root is None:
            raise ValueError("pass root= (the bundle directory) with a Manifest")
        base = Path(root)
        runner = BundleRunner(bundle, lambda name: (base / name).read_bytes())
    else:
        runner = BundleRunner.from_dir(bundle)
    return runner.evaluate(policy_name, X, y, sizes)
