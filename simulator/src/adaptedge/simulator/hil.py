"""Hardware in the loop: a real broker, ``adaptedge cloud serve`` and N ``adaptedge edge run``
processes replaying a dataset split, optionally behind the impairment proxy.

Everything runs on 127.0.0.1. The broker is mosquitto when installed (else the embedded
amqtt broker, whose lack of ``$share`` delivery makes the cloud use a plain subscription)
or a given URL. Devices reach the broker through ``ImpairedProxy`` when the scenario asks for
delay or outages (``outage_mode="proxy"``), or the broker itself is paused with SIGSTOP
during the outages (``outage_mode="pause"``, mosquitto only). Every wait is bounded and
every child is stopped on the way out, also on errors.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy.typing as npt

from adaptedge.protocol.bundle import verify
from adaptedge.protocol.manifest import Manifest
from adaptedge.simulator.brokers import AmqttBroker, MosquittoBroker, best_available_broker
from adaptedge.simulator.errors import HilError as HilError
from adaptedge.simulator.hil_records import collect_decisions
from adaptedge.simulator.monitor import RequestMonitor
from adaptedge.simulator.network import Outage
from adaptedge.simulator.processes import ProcessSet, adaptedge_command
from adaptedge.simulator.proxy import ImpairedProxy
from adaptedge.simulator.records import RunResult
from adaptedge.simulator.remote_sensors import RemoteSensorServer
from adaptedge.simulator.scenario import Scenario


@dataclass(frozen=True)
class HilOptions:
    devices: int = 1
    limit: int | None = None
    """Rows per device (None: the scenario's devices.limit, else the whole split)."""
    rate_hz: float | None = None
    """Decisions per second per device (None: the scenario's devices.rate_hz)."""
    broker: str = "auto"
    """auto | mosquitto | amqtt | mqtt://HOST:PORT (an existing broker)."""
    split: str = "test"
    target: str | None = None
    """Label column when ``data`` is a CSV/TSV file (passed on to every device)."""
    outage_mode: Literal["proxy", "pause"] = "proxy"
    timeout_s: float = 300.0
    workdir: Path | None = None
    cloud_ready_s: float = 60.0
    remote_sensors: bool = False
    """Devices read every sensor over MQTT from a ``RemoteSensorServer`` (the simulator serves
    the recorded rows after each sensor's latency) instead of replaying the data themselves."""
    costs: str | None = None
    """Costs file of the data: with a ``[size]`` column each item pays its own size's cost."""
    cloud_args: tuple[str, ...] = ()
    """More ``cloud serve`` options (e.g. ``--db F --metrics-port P``: the fleet loop)."""
    device_args: tuple[str, ...] = ()
    """More ``edge run`` options; ``{device}`` becomes the device's name (``--outbox``)."""


@contextmanager
def broker_for(spec: str) -> Iterator[tuple[str, bool, MosquittoBroker | None]]:
    """(url, supports $share, the mosquitto instance if we started one)."""
    if "://" in spec:
        yield spec, True, None
        return
    broker: MosquittoBroker | AmqttBroker
    if spec == "auto":
        broker = best_available_broker()
    elif spec == "mosquitto":
        broker = MosquittoBroker()
    elif spec == "amqtt":
        broker = AmqttBroker()
    else:
        raise HilError(f"--broker must be auto, mosquitto, amqtt or mqtt://HOST:PORT, not {spec!r}")
    broker.start()
    try:
        yield broker.url, broker.supports_shared_subscriptions, (
            broker if isinstance(broker, MosquittoBroker) else None)
    finally:
        broker.stop()


def _port_of(url: str) -> tuple[str, int]:
    rest = url.split("://", 1)[1]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port)


def run_hil(bundle_dir: str | Path, data: str, *, scenario: Scenario | None = None,
            options: HilOptions | None = None, truth: npt.NDArray[Any] | None = None,
            rows: npt.NDArray[Any] | None = None, progress: bool = False) -> RunResult:
    """Run the HIL experiment and return its decisions (scored against ``truth``).

    ``rows`` (the split's features) is only needed with ``remote_sensors``; both default to
    ``trainer.data.datasets.load_dataset(data)``'s split.
    """
    run = _plan(bundle_dir, data, scenario or Scenario(), options or HilOptions(), truth, rows)
    opts, outages = run.opts, run.scenario.network.outages
    if run.scenario.network.loss:
        run.notes.append("HIL does not emulate packet loss (TCP would retransmit); replay does")
    started = time.monotonic()
    with ExitStack() as stack:
        url, shares, mosquitto = stack.enter_context(broker_for(opts.broker))
        procs = stack.enter_context(ProcessSet(run.workdir / "logs"))
        proxy = _start_proxy(stack, run, url)
        if outages and opts.outage_mode == "pause" and mosquitto is None:
            raise HilError("outage_mode 'pause' needs a mosquitto broker started here "
                           "(--broker mosquitto)")
        monitor = RequestMonitor(url)
        monitor.start()
        stack.callback(monitor.stop)
        _start_cloud(procs, run, url, shares)
        _start_devices(stack, procs, run, url, url if proxy is None else proxy.url)
        # Outages start when the devices are really deciding: at their first request.
        schedule_t0: list[float] = []
        scheduler = _start_outages_on_first_request(
            monitor, proxy, mosquitto if opts.outage_mode == "pause" else None, outages,
            schedule_t0, opts.timeout_s)
        codes = _wait_devices(procs, run.names, opts.timeout_s, run.rate,
                              _bar(progress, opts.devices * run.limit))
        if scheduler is not None:
            scheduler.join(timeout=max(o.end_s for o in outages) + 5)
        _refuse_failed_devices(procs, codes, opts.timeout_s)
        # Replayed sensors answer from memory: add the bundle's nominal read latency, as replay
        # does. Remote sensors really take that long already.
        sensor_ms = {} if opts.remote_sensors else {spec.name: spec.latency_ms
                                                   for spec in run.manifest.sensors}
        cols, t_origin, run_outages = collect_decisions(
            run.outputs, monitor, run.truth, run.rate, sensor_ms, outages, schedule_t0,
            regression=run.manifest.is_regression)
        cloud_log = procs.log("cloud")
        procs.close()
    if outages and not schedule_t0:
        run.notes.append("no device sent a request, so the outage schedule never started")
    return RunResult(
        mode="hil", bundle_id=run.manifest.bundle_id, operating_point=run.point,
        classes=run.manifest.classes, columns=cols, outages=run_outages,
        duration_s=max(cols.t_start, default=0.0), wall_s=time.monotonic() - started,
        extra=_extra(run, proxy, t_origin, cloud_log),
        regression=run.manifest.is_regression)


@dataclass(frozen=True)
class _Run:
    """One HIL run's inputs, resolved from the scenario and the options."""

    bundle_dir: str | Path
    data: str
    scenario: Scenario
    opts: HilOptions
    manifest: Manifest
    truth: npt.NDArray[Any]
    rows: npt.NDArray[Any] | None
    limit: int
    """Rows per device."""
    rate: float
    """Decisions per second per device."""
    point: str
    workdir: Path
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [f"dev-{d}" for d in range(self.opts.devices)]

    @property
    def outputs(self) -> dict[str, Path]:
        """Each device's ``--json-out`` file."""
        return {name: self.workdir / f"{name}.json" for name in self.names}


def _plan(bundle_dir: str | Path, data: str, scenario: Scenario, opts: HilOptions,
          truth: npt.NDArray[Any] | None, rows: npt.NDArray[Any] | None) -> _Run:
    manifest = verify(bundle_dir)
    if truth is None or (opts.remote_sensors and rows is None):
        from adaptedge.trainer.data.datasets import load_dataset

        dataset = load_dataset(data, target=opts.target, costs=opts.costs,
                               task="regression" if manifest.is_regression else None)
        rows, truth = dataset.split(opts.split)  # type: ignore[arg-type]
        if manifest.is_regression:  # scored on the target, in its unit
            truth = dataset.targets(opts.split)  # type: ignore[arg-type]
    limit = opts.limit if opts.limit is not None else (scenario.devices.limit or len(truth))
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="adaptedge-hil-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return _Run(bundle_dir, data, scenario, opts, manifest, truth, rows,
                limit=min(limit, len(truth)), rate=opts.rate_hz or scenario.devices.rate_hz,
                point=scenario.operating_point or manifest.default_operating_point,
                workdir=workdir)


def _start_proxy(stack: ExitStack, run: _Run, url: str) -> ImpairedProxy | None:
    """The impairment proxy between devices and broker, when the scenario delays the link or
    cuts it (``outage_mode="proxy"``); None when devices connect to the broker directly."""
    net, mode = run.scenario.network, run.opts.outage_mode
    delay_ms = (net.rtt_ms or 0.0) / 2.0
    if not (delay_ms or (net.outages and mode == "proxy")):
        return None
    host, port = _port_of(url)
    proxy = ImpairedProxy(port, target_host=host, delay_ms=delay_ms,
                          jitter_ms=delay_ms * net.jitter,
                          outages=net.outages if mode == "proxy" else (), seed=run.scenario.seed)
    proxy.start()
    stack.callback(proxy.stop)
    return proxy


def _start_cloud(procs: ProcessSet, run: _Run, url: str, shares: bool) -> None:
    args = ["cloud", "serve", "--bundle", str(run.bundle_dir), "--broker", url,
            "--stats-every", "3600", "--log-level", "WARNING"]
    if not shares:
        args.append("--no-share")
    args += run.opts.cloud_args
    procs.start("cloud", adaptedge_command(*args))
    if not procs.wait_for_log("cloud", "ready", run.opts.cloud_ready_s):
        raise HilError(f"the cloud service did not become ready within "
                       f"{run.opts.cloud_ready_s:g} s: {procs.log('cloud')[-800:]}")


def _start_devices(stack: ExitStack, procs: ProcessSet, run: _Run, url: str,
                   device_url: str) -> None:
    """The device processes (and the remote sensor server they read from, if asked)."""
    if run.opts.remote_sensors:
        assert run.rows is not None
        sensor_server = RemoteSensorServer(url, run.manifest, run.rows[:run.limit], run.names)
        sensor_server.start()
        stack.callback(sensor_server.stop)
    for name in run.names:
        procs.start(name, _device_argv(run, name, url, device_url))


def _device_argv(run: _Run, name: str, url: str, device_url: str) -> list[str]:
    common = ["--bundle", str(run.bundle_dir), "--broker", device_url, "--device", name]
    pace = ["--rate", f"{run.rate:g}", "--operating-point", run.point,
            "--json-out", str(run.outputs[name])]
    if run.opts.remote_sensors:
        return [sys.executable, "-m", "adaptedge.simulator.remote_device", *common,
                "--sensor-broker", url, "--count", str(run.limit), *pace]
    data = [*(["--target", run.opts.target] if run.opts.target else []),
            *(["--costs", run.opts.costs] if run.opts.costs else [])]
    extra = [a.replace("{device}", name) for a in run.opts.device_args]
    return adaptedge_command("edge", "run", *common, "--replay", run.data, *data,
                             "--split", run.opts.split, "--limit", str(run.limit), *pace, *extra)


def _refuse_failed_devices(procs: ProcessSet, codes: dict[str, int | None],
                           budget_s: float) -> None:
    failed = {n: c for n, c in codes.items() if c != 0}
    if failed:
        detail = "; ".join(f"{n}: {_how_it_ended(c, budget_s)}: {procs.log(n)[-400:].strip()}"
                           for n, c in failed.items())
        raise HilError(f"edge device(s) failed: {detail} (logs in {procs.log_dir})")


def _how_it_ended(code: int | None, budget_s: float) -> str:
    """A device's end in words: its exit status, or the time limit it ran past."""
    return f"still running after {budget_s:g} s (killed)" if code is None else f"exit {code}"


def _extra(run: _Run, proxy: ImpairedProxy | None, t_origin: float,
           cloud_log: str) -> dict[str, Any]:
    """What the run's report shows beside the decisions: set-up, notes, proxy counters."""
    opts = run.opts
    extra: dict[str, Any] = {
        "broker": opts.broker, "devices": opts.devices, "rows_per_device": run.limit,
        "rate_hz": run.rate, "proxy": proxy is not None,
        "outage_mode": opts.outage_mode if run.scenario.network.outages else None,
        "workdir": str(run.workdir), "notes": run.notes, "remote_sensors": opts.remote_sensors,
    }
    if proxy is not None:
        extra["proxy_cuts"] = len(proxy.cuts)
        extra["proxy_cut_spans_s"] = [(a - t_origin, None if b is None else b - t_origin)
                                      for a, b in proxy.cuts]
        extra["proxy_connections"] = proxy.connections
        extra["proxy_refused"] = proxy.refused
    if "Traceback" in cloud_log:
        extra["cloud_log_tail"] = cloud_log[-800:]
    return extra


def _start_outages_on_first_request(monitor: RequestMonitor, proxy: ImpairedProxy | None,
                                    pause: MosquittoBroker | None, outages: tuple[Outage, ...],
                                    t0_out: list[float], timeout_s: float
                                    ) -> threading.Thread | None:
    """A thread that waits for the first request, then runs the outages (proxy cuts or
    broker pauses) relative to it; ``t0_out`` receives the wall time it started."""
    if not outages or (proxy is None and pause is None):
        return None

    def run() -> None:
        if not monitor.first_request.wait(timeout_s):
            return
        t0 = time.time()
        t0_out.append(t0)
        if proxy is not None and pause is None:
            proxy.start_schedule()
            return
        assert pause is not None
        for o in sorted(outages, key=lambda o: o.start_s):
            time.sleep(max(0.0, t0 + o.start_s - time.time()))
            pause.pause()
            time.sleep(max(0.0, t0 + o.end_s - time.time()))
            pause.resume()

    thread = threading.Thread(target=run, name="outage-schedule", daemon=True)
    thread.start()
    return thread


def _bar(enabled: bool, total: int) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="hil", unit="dec", leave=False)


def _wait_devices(procs: ProcessSet, names: list[str], budget_s: float, rate_hz: float,
                  bar: Any) -> dict[str, int | None]:
    started = time.monotonic()
    deadline = started + budget_s
    done = 0
    while time.monotonic() < deadline:
        running = [n for n in names if procs.procs[n].poll() is None]
        if bar is not None:
            elapsed = time.monotonic() - started
            now_done = min(int(elapsed * rate_hz) * len(names), bar.total)
            bar.update(now_done - done)
            done = now_done
        if not running:
            break
        time.sleep(0.1)
    if bar is not None:
        bar.close()
    return {n: procs.procs[n].poll() for n in names}
