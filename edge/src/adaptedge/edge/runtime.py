"""``EdgeRuntime``: load a verified bundle, walk its policy on live sensors, escalate hard inputs.

The rules of the walk are ``protocol.walk``'s; this module drives its per-row driver (reads
sensors, runs one onnxruntime call per visited node on pre-bound buffers) and hands escalations
to ``edge.escalation``. Costs come from a table keyed by the set of sensors read, filled once per
set by ``protocol.costs.decision_cost`` (the one definition), plus the visited nodes' evaluation
costs when the policy has any. Not thread-safe: use one runtime per thread (bound buffers).
"""

from __future__ import annotations

import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt

from adaptedge.edge.counters import add_spent, new_counters, with_rates
from adaptedge.edge.decision import Decision, Source
from adaptedge.edge.errors import BundleRefused, EdgeError, OperatingPointError
from adaptedge.edge.escalation import SENSOR_FAILURE, Escalation
from adaptedge.edge.outbox import Outbox
from adaptedge.edge.policy import (
    CompiledNode,
    CompiledPolicy,
    ModelStore,
    SessionKey,
    compile_policy,
)
from adaptedge.edge.sensors import Reader, ReaderPool, read_sensor, refuse_names, resolve_timeouts
from adaptedge.edge.sized import BudgetChooser, check_size, point_within_budget, sized_cost
from adaptedge.edge.uplink import Uplink, resolve_device_id
from adaptedge.protocol.audit import AuditPolicy
from adaptedge.protocol.bundle import open_bundle, verify
from adaptedge.protocol.costs import CostBreakdown, decision_cost
from adaptedge.protocol.errors import BundleError
from adaptedge.protocol.manifest import Manifest
from adaptedge.protocol.walk import ESCALATE, STOP, ReadSensor, walk_live, walk_row

F32 = npt.NDArray[np.float32]
_MAX_CACHED_SETS = 4096
_NO_PROBABILITIES: F32 = np.zeros(0, dtype=np.float32)
_NO_PROBABILITIES.flags.writeable = False  # a regression decision's (shared, empty)


class EdgeRuntime:
    """The device half of adaptedge. Build it with ``EdgeRuntime.load``."""

    def __init__(self, manifest: Manifest, models: ModelStore, *, uplink: Uplink | None,
                 clock: Callable[[], float], device_id: str,
                 sensor_timeouts_ms: Mapping[str, float] | None, outbox: Outbox | None,
                 max_reader_threads: int, request_id_start: int | None,
                 max_resident_policies: int, cleanup: ExitStack | None = None,
                 audit: AuditPolicy | None = None) -> None:
        if max_resident_policies < 1:
            raise EdgeError(f"max_resident_policies must be >= 1, got {max_resident_policies}")
        self.manifest = manifest
        self.device_id = device_id
        self._models = models
        self._resident: OrderedDict[str, CompiledPolicy] = OrderedDict()
        self._max_resident = max_resident_policies
        self._cleanup = cleanup
        self._clock = clock
        self._classes = manifest.classes
        self._regression = manifest.is_regression
        self._n_features = len(manifest.feature_names)
        self._sensor_names = tuple(s.name for s in manifest.sensors)
        self._sensor_set = frozenset(self._sensor_names)
        self._sensor_cols = [np.asarray(s.features, dtype=np.intp) for s in manifest.sensors]
        self._sensor_timeouts = resolve_timeouts(manifest.sensors, sensor_timeouts_ms or {})
        self._buf: F32 = np.zeros(self._n_features, dtype=np.float32)
        self._pool = ReaderPool(max_reader_threads)
        self._costs: dict[int, CostBreakdown] = {}
        self._sized = manifest.size_dependent
        self._chooser: BudgetChooser | None = None
        self._counters = new_counters()
        self._tally: dict[tuple[str, int], int] = {}
        """(source, cost key) -> decisions: the per-decision counters, summed when read."""
        self._compute_spent = CostBreakdown()  # nodes' evaluation costs (protocol.costs)
        self._escalation = Escalation(manifest, uplink=uplink, outbox=outbox,
                                      counters=self._counters, clock=clock, device_id=device_id,
                                      request_id_start=request_id_start, audit=audit)
        self._point = manifest.default_operating_point
        self._policy = self._activate(manifest.operating_point(self._point).policy)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def load(cls, bundle_dir: str | os.PathLike[str], *, uplink: Uplink | None = None,
             operating_point: str | float | None = None,
             clock: Callable[[], float] = time.monotonic, device_id: str | None = None,
             sensor_timeouts_ms: Mapping[str, float] | None = None,
             outbox: Outbox | None = None, max_reader_threads: int = 4,
             request_id_start: int | None = None, preload_all: bool = False,
             max_resident_policies: int = 2, audit: AuditPolicy | None = None,
             trust: Sequence[str | os.PathLike[str]] | None = None) -> EdgeRuntime:
        """Verify every file hash of a bundle (directory or ``.tar``), then build the sessions
        of the operating point in use.

        A bundle may hold dozens of operating points; only the policies in use stay resident
        (at most ``max_resident_policies``, least recently used dropped first). Switching to a
        point loads its models then, re-checking each file's hash. ``preload_all`` builds (and
        so checks) every policy's sessions now; they stay resident if ``max_resident_policies``
        allows. ``sensor_timeouts_ms`` overrides the bundle's per-sensor ``timeout_ms``; the key
        ``"*"`` sets the timeout of every sensor the bundle gives none (default
        ``edge.sensors.DEFAULT_TIMEOUT_MS``, 1 s; ``math.inf``: no timeout). ``request_id_start``
        fixes the first request id (default: a random 63-bit base, so a restarted device does
        not reuse ids the cloud may still remember, whatever its clock says). ``trust``: public keys (``signing.pub``
        paths); when given, only a bundle signed by one of them loads. ``device_id`` defaults
        to the uplink's own ``device_id`` (an ``MqttUplink``'s), else ``"edge"``; a different
        one is refused, since the cloud answers on the uplink's topics only.
        """
        device_id = resolve_device_id(device_id, uplink)
        cleanup = ExitStack()
        try:
            root = Path(cleanup.enter_context(open_bundle(bundle_dir)))  # a .tar stays extracted
            manifest = verify(root, trust=trust)  # hashes and signer, before any session
            runtime = cls(manifest, ModelStore(manifest, root), uplink=uplink, clock=clock,
                          device_id=device_id, sensor_timeouts_ms=sensor_timeouts_ms,
                          outbox=outbox, max_reader_threads=max_reader_threads,
                          request_id_start=request_id_start, audit=audit,
                          max_resident_policies=max_resident_policies, cleanup=cleanup)
            if preload_all:
                for name in manifest.policies:
                    runtime._activate(name)
            if operating_point is not None:
                runtime.set_operating_point(operating_point)
            elif preload_all:
                runtime._policy = runtime._activate(runtime._policy.name)
        except BundleRefused:
            cleanup.close()
            raise
        except BundleError as exc:
            cleanup.close()
            raise BundleRefused(exc.message, path=exc.path) from exc
        except BaseException:
            cleanup.close()
            raise
        return runtime

    def _activate(self, policy: str) -> CompiledPolicy:
        """The compiled policy, built now if it is not resident; drops the least recent."""
        compiled = self._resident.get(policy)
        if compiled is None:
            compiled = compile_policy(self.manifest, policy, self.manifest.policies[policy],
                                      self._models)
            self._resident[policy] = compiled
            while len(self._resident) > self._max_resident:
                self._resident.popitem(last=False)
            self._models.keep_only(set[SessionKey]().union(
                *(resident.session_keys() for resident in self._resident.values())))
        self._resident.move_to_end(policy)
        return compiled

    @property
    def uplink(self) -> Uplink | None:
        return self._escalation.uplink

    @property
    def outbox(self) -> Outbox | None:
        return self._escalation.outbox

    @property
    def resident_policies(self) -> tuple[str, ...]:
        """Policies whose sessions are loaded, least recently used first."""
        return tuple(self._resident)

    # -- operating points --------------------------------------------------------------------
    @property
    def operating_point(self) -> str:
        return self._point

    def set_operating_point(self, name_or_budget: str | float) -> None:
        """Switch by name, or by budget: the most accurate point whose cost is <= the budget."""
        points = self.manifest.operating_points
        if isinstance(name_or_budget, str):
            names = [p.name for p in points]
            if name_or_budget not in names:
                raise OperatingPointError(f"no operating point {name_or_budget!r}; the bundle "
                                          f"has {names}")
            point = self.manifest.operating_point(name_or_budget)
        else:
            point = point_within_budget(points, float(name_or_budget))
        self._policy = self._activate(point.policy)
        self._point = point.name

    # -- counters ------------------------------------------------------------------------------
    @property
    def counters(self) -> dict[str, float]:
        """Decisions by source, escalations, faults, cost spent, and the uplink's own counters."""
        totals = dict(self._counters)
        for (source, key), n in self._tally.items():
            cost = self._costs.get(key) or self._cost(key)
            totals["decisions"] += n
            totals["decisions_" + source] += n
            add_spent(totals, cost, n)
        add_spent(totals, self._compute_spent)
        out = with_rates(totals)
        extra = getattr(self.uplink, "counters", None)
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                out[key] = out.get(key, 0.0) + float(value) if key in out else float(value)
        return out

    # -- prediction ----------------------------------------------------------------------------
    def predict(self, sensors: Mapping[str, Reader], *, size: float | None = None,
                budget: float | None = None) -> Decision:
        """Walk the policy reading live sensors (only those it asks for, in order). ``size``:
        the item's size (its own cost is charged); ``budget``: see ``edge.sized``; a reader
        named for no sensor of the bundle: ``SensorNameError``."""
        if not self._sensor_set.issuperset(sensors):
            refuse_names(sensors, self._sensor_names, self.manifest.bundle_id)
        if budget is not None:
            return self._within(budget, size, lambda: self.predict(sensors, size=size))
        buf = self._buf
        buf.fill(0.0)
        names, cols, timeouts, pool = (self._sensor_names, self._sensor_cols,
                                       self._sensor_timeouts, self._pool)
        counters = self._counters

        def read(s: int) -> str | None:
            values, why = read_sensor(sensors.get(names[s]), len(cols[s]), timeouts[s], pool)
            if values is None:
                counters["sensor_failures"] += 1
                return why
            buf[cols[s]] = values
            return None

        return self._decide(buf, read, size)

    def predict_row(self, x: npt.ArrayLike, *, size: float | None = None,
                    budget: float | None = None) -> Decision:
        """Replay a fully-measured row: the walk still "reads" only the sensors it asks for.

        A sensor whose columns hold NaN or infinity counts as a failed read (``size``,
        ``budget``: as in ``predict``)."""
        if budget is not None:
            return self._within(budget, size, lambda: self.predict_row(x, size=size))
        row = np.asarray(x, dtype=np.float32)
        if row.ndim != 1:
            row = row.reshape(-1)
        if row.shape[0] != self._n_features:
            names = self.manifest.feature_names
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise EdgeError(f"a row has {row.shape[0]} values; this bundle takes "
                            f"{self._n_features} features ({shown})")
        # A Python float sum of float32 values cannot overflow and raises no numpy warning:
        # it is finite iff every value is (faster than np.isfinite for short rows).
        if (math.isfinite(sum(row.tolist())) if self._n_features <= 64
                else bool(np.isfinite(row).all())):
            return self._decide(row, None, size)
        row = row.copy()
        cols, counters = self._sensor_cols, self._counters

        def read(s: int) -> str | None:
            values = row[cols[s]]
            if np.isfinite(values).all():
                return None
            row[cols[s]] = 0.0
            counters["sensor_failures"] += 1
            return "row holds non-finite values (NaN or infinity) for this sensor"

        return self._decide(row, read, size)

    def _decide(self, values: F32, read: ReadSensor | None, size: float | None = None
                ) -> Decision:
        if size is not None:
            size = check_size(size)
        clock = self._clock
        t0 = clock()
        root, names = self._policy.graph.root, self._sensor_names
        node, action, trail = (walk_row(root, values, _run, names) if read is None
                               else walk_live(root, values, _run, read, names))
        proba = node.model.proba_row
        t_local = clock() - t0
        kind = -1 if action is None else action.kind
        self._escalation.decided(self._point, values, trail, read, proba, kind == STOP)
        request_id: int | None = None
        t_cloud = 0.0
        sent = False
        error: str | None = None
        source: Source = "local"
        value: float | None = None  # a regression bundle's answer
        if kind == ESCALATE:
            answer = self._escalation.ask(values, trail, read, proba, size)
            probabilities, label_index, source = (answer.probabilities, answer.label_index,
                                                  answer.source)
            error, request_id, sent, t_cloud, value = (answer.error, answer.request_id,
                                                       answer.sent, answer.seconds, answer.value)
        else:
            probabilities = proba.copy()
            label_index = int(proba.argmax())
            if self._regression:
                value = float(proba[0])
            if kind != STOP:
                source, error = "degraded", SENSOR_FAILURE
        key = trail.read_bits << 1 | sent
        if size is not None and self._sized:
            cost = sized_cost(self.manifest, self._sensor_names, key, size, self._counters,
                              source)
        else:
            cost = self._costs.get(key) or self._cost(key)
            tally_key = (source, key)
            tally = self._tally
            tally[tally_key] = tally.get(tally_key, 0) + 1
        if self._policy.visit_cost:  # running the visited nodes' models
            extra = self._policy.visits_cost(trail.nodes)
            cost, self._compute_spent = cost + extra, self._compute_spent + extra
        if value is None:
            label = self._classes[label_index]
        else:
            label, label_index, probabilities = "", -1, _NO_PROBABILITIES
        return Decision(
            label=label, label_index=label_index,
            probabilities=probabilities, source=source, sensors_read=tuple(trail.order),
            failed_sensors=trail.failed, nodes=tuple(trail.nodes), escalated=kind == ESCALATE,
            cost=cost, request_id=request_id, bundle_id=self.manifest.bundle_id,
            timings={"total": clock() - t0, "local": t_local, "cloud": t_cloud}, error=error,
            value=value)

    def _within(self, budget: float, size: float | None, run: Callable[[], Decision]
                ) -> Decision:
        """``run`` one decision on the budget index's pick (``edge.sized``)."""
        self._chooser = self._chooser or BudgetChooser(self.manifest)
        saved, point = self._policy, self._chooser.point(size, budget)
        self._policy = self._activate(self.manifest.operating_point(point).policy)
        try:
            return run()
        finally:
            self._policy = saved

    # -- helpers -------------------------------------------------------------------------------
    def _cost(self, key: int) -> CostBreakdown:
        """Cost of reading sensor set ``key >> 1`` (bit i = sensor i); escalated if ``key & 1``."""
        read_bits = key >> 1
        names = [n for i, n in enumerate(self._sensor_names) if read_bits >> i & 1]
        cost = decision_cost(self.manifest, names, bool(key & 1))
        if len(self._costs) < _MAX_CACHED_SETS:
            self._costs[key] = cost
        return cost

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the reader threads and a ``.tar`` bundle's copy (the uplink is the caller's)."""
        self._pool.close()
        if self._cleanup is not None:
            self._cleanup.close()

    def __enter__(self) -> EdgeRuntime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"EdgeRuntime(bundle={self.manifest.bundle_id!r}, "
                f"operating_point={self._point!r}, device={self.device_id!r})")


def _run(node: CompiledNode, values: F32) -> F32:
    """Run ``node``'s model on a decision's feature values; its action scores (bound buffer)."""
    session = node.model
    if node.all_inputs:
        session.x_row[...] = values  # cheaper than take for the identity
    else:
        values.take(node.inputs, out=session.x_row, mode="clip")
    session.run()
    if node.head_row is not None:  # the model gave its action basis (protocol.action_head)
        return node.head_row(session.scores_row)
    return session.scores_row
