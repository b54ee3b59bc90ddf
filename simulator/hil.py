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

import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from adaptedge.protocol.bundle import verify
from adaptedge.simulator.brokers import AmqttBroker, MosquittoBroker, best_available_broker
from adaptedge.simulator.monitor import RequestMonitor
from adaptedge.simulator.network import Outage
from adaptedge.simulator.processes import ProcessSet, adaptedge_command
from adaptedge.simulator.proxy import ImpairedProxy
from adaptedge.simulator.records import DecisionColumns, RunResult
from adaptedge.simulator.remote_sensors import RemoteSensorServer
from adaptedge.simulator.scenario import Scenario


class HilError(RuntimeError):
    """The HIL run could not be completed; the message says which process and where its log is."""


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
    outage_mode: Literal["proxy", "pause"] = "proxy"
    timeout_s: float = 300.0
    workdir: Path | None = None
    cloud_ready_s: float = 60.0
    remote_sensors: bool = False
    """Devices read every sensor over MQTT from a ``RemoteSensorServer`` (the simulator serves
    the recorded rows after each sensor's latency) instead of replaying the data themselves."""


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
    ``trainer.datasets.load_dataset(data)``'s split.
    """
    scenario = scenario or Scenario()
    opts = options or HilOptions()
    manifest = verify(bundle_dir)
    if truth is None or (opts.remote_sensors and rows is None):
        from adaptedge.trainer.datasets import load_dataset

        rows, truth = load_dataset(data).split(opts.split)  # type: ignore[arg-type]
    limit = opts.limit if opts.limit is not None else (scenario.devices.limit or len(truth))
    limit = min(limit, len(truth))
    rate = opts.rate_hz or scenario.devices.rate_hz
    net = scenario.network
    outages = net.outages
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="adaptedge-hil-"))
    workdir.mkdir(parents=True, exist_ok=True)
    point = scenario.operating_point or manifest.default_operating_point
    notes: list[str] = []
    if net.loss:
        notes.append("HIL does not emulate packet loss (TCP would retransmit); replay does")
    started = time.monotonic()
    with ExitStack() as stack:
        url, shares, mosquitto = stack.enter_context(broker_for(opts.broker))
        procs = stack.enter_context(ProcessSet(workdir / "logs"))
        device_url = url
        proxy = None
        delay_ms = (net.rtt_ms or 0.0) / 2.0
        jitter_ms = delay_ms * net.jitter
        use_proxy = bool(delay_ms or (outages and opts.outage_mode == "proxy"))
        if use_proxy:
            host, port = _port_of(url)
            proxy = ImpairedProxy(port, target_host=host, delay_ms=delay_ms, jitter_ms=jitter_ms,
                                  outages=outages if opts.outage_mode == "proxy" else (),
                                  seed=scenario.seed)
            proxy.start()
            stack.callback(proxy.stop)
            device_url = proxy.url
        if outages and opts.outage_mode == "pause" and mosquitto is None:
            raise HilError("outage_mode 'pause' needs a mosquitto broker started here "
                           "(--broker mosquitto)")
        monitor = RequestMonitor(url)
        monitor.start()
        stack.callback(monitor.stop)
        cloud_args = ["cloud", "serve", "--bundle", str(bundle_dir), "--broker", url,
                      "--stats-every", "3600", "--log-level", "WARNING"]
        if not shares:
            cloud_args.append("--no-share")
        procs.start("cloud", adaptedge_command(*cloud_args))
        if not procs.wait_for_log("cloud", "ready", opts.cloud_ready_s):
            raise HilError(f"the cloud service did not become ready within "
                           f"{opts.cloud_ready_s:g} s: {procs.log('cloud')[-800:]}")
        names = [f"dev-{d}" for d in range(opts.devices)]
        outputs = {name: workdir / f"{name}.json" for name in names}
        if opts.remote_sensors:
            assert rows is not None
            sensor_server = RemoteSensorServer(url, manifest, rows[:limit], names)
            sensor_server.start()
            stack.callback(sensor_server.stop)
        for name in names:
            if opts.remote_sensors:
                argv = [sys.executable, "-m", "adaptedge.simulator.remote_device", "--bundle",
                        str(bundle_dir), "--broker", device_url, "--sensor-broker", url,
                        "--device", name, "--count", str(limit), "--rate", f"{rate:g}",
                        "--operating-point", point, "--json-out", str(outputs[name])]
            else:
                argv = adaptedge_command(
                    "edge", "run", "--bundle", str(bundle_dir), "--broker", device_url,
                    "--device", name, "--replay", data, "--split", opts.split,
                    "--limit", str(limit), "--rate", f"{rate:g}", "--operating-point", point,
                    "--json-out", str(outputs[name]))
            procs.start(name, argv)
        # Outages start when the devices are really deciding: at their first request.
        schedule_t0: list[float] = []
        scheduler = _start_outages_on_first_request(
            monitor, proxy, mosquitto if opts.outage_mode == "pause" else None, outages,
            schedule_t0, opts.timeout_s)
        budget = opts.timeout_s
        bar = _bar(progress, opts.devices * limit)
        codes = _wait_devices(procs, names, budget, rate, bar)
        if scheduler is not None:
            scheduler.join(timeout=max(o.end_s for o in outages) + 5)
        failed = {n: c for n, c in codes.items() if c != 0}
        if failed:
            detail = "; ".join(f"{n}: exit {c}: {procs.log(n)[-400:]}" for n, c in failed.items())
            raise HilError(f"edge device(s) failed or timed out after {budget:g} s: {detail} "
                           f"(logs in {procs.log_dir})")
        cols = DecisionColumns()
        # Replayed sensors answer from memory: add the bundle's nominal read latency, as replay
        # does. Remote sensors really take that long already.
        sensor_ms = {} if opts.remote_sensors else {spec.name: spec.latency_ms
                                                   for spec in manifest.sensors}
        starts: dict[str, float] = {}
        for name in names:
            records = read_records(outputs[name])
            starts[name] = _device_start(monitor, name, records, rate)
        t_origin = min([v for v in starts.values() if v == v] + schedule_t0, default=0.0)
        for name in names:
            offset = starts[name] - t_origin if starts[name] == starts[name] else 0.0
            _append_records(cols, name, read_records(outputs[name]), truth, rate, offset,
                            sensor_ms)
        run_outages = [(o.start_s + (schedule_t0[0] - t_origin if schedule_t0 else 0.0),
                        o.end_s + (schedule_t0[0] - t_origin if schedule_t0 else 0.0))
                       for o in outages] if schedule_t0 else []
        cloud_log = procs.log("cloud")
        procs.close()
    extra: dict[str, Any] = {
        "broker": opts.broker, "devices": opts.devices, "rows_per_device": limit,
        "rate_hz": rate, "proxy": use_proxy, "outage_mode": opts.outage_mode if outages else None,
        "workdir": str(workdir), "notes": notes, "remote_sensors": opts.remote_sensors,
    }
    if outages and not schedule_t0:
        notes.append("no device sent a request, so the outage schedule never started")
    if proxy is not None:
        extra["proxy_cuts"] = len(proxy.cuts)
        extra["proxy_cut_spans_s"] = [(a - t_origin, None if b is None else b - t_origin)
                                      for a, b in proxy.cuts]
        extra["proxy_connections"] = proxy.connections
        extra["proxy_refused"] = proxy.refused
    if "Traceback" in cloud_log:
        extra["cloud_log_tail"] = cloud_log[-800:]
    return RunResult(
        mode="hil", bundle_id=manifest.bundle_id, operating_point=point,
        classes=manifest.classes, columns=cols,
        outages=run_outages,
        duration_s=max(cols.t_start, default=0.0), wall_s=time.monotonic() - started,
        extra=extra)


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


def _device_start(monitor: RequestMonitor, device: str, records: list[dict[str, Any]],
                  rate_hz: float) -> float:
    """Wall time a device started deciding: min over its requests of arrival - row / rate."""
    best = float("nan")
    for i, r in enumerate(records):
        rid = r.get("request_id")
        if rid is None:
            continue
        at = monitor.arrival(device, int(rid))
        if at is None:
            continue
        start = at - int(r.get("index", i)) / rate_hz
        if not best <= start:
            best = start
    return best


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


def read_records(path: Path) -> list[dict[str, Any]]:
    """Per-decision records of ``adaptedge edge run --json-out`` (``{"summary", "decisions"}``;
    a plain array or JSON lines are accepted too)."""
    text = path.read_text() if path.exists() else ""
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            loaded = None
        if isinstance(loaded, dict):
            loaded = loaded.get("decisions", [])
        if isinstance(loaded, list):
            return [r for r in loaded if isinstance(r, dict)]
    records = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            obj = json.loads(line)
            if isinstance(obj, dict) and "source" in obj:
                records.append(obj)
    return records


def _append_records(cols: DecisionColumns, device: str, records: list[dict[str, Any]],
                    truth: npt.NDArray[Any], rate_hz: float, offset_s: float,
                    sensor_ms: dict[str, float]) -> None:
    """Add a device's records. The device starts row i at ``row / rate`` or when the previous
    decision finished, whichever is later (``edge run --rate`` paces that way), so each
    decision's start is rebuilt from the latencies, plus the device's offset from the origin.
    Replayed sensors answer from memory, so each decision's latency gets the bundle's nominal
    latency of the sensors it read, as in replay."""
    truth_list = np.asarray(truth).tolist()
    free_at = 0.0
    for i, r in enumerate(records):
        row = int(r.get("index", r.get("row", i)))
        latency = r.get("latency_ms")
        cols.device.append(device)
        cols.row.append(row)
        begin = max(row / rate_hz, free_at)
        if latency is not None and latency == latency:
            free_at = begin + float(latency) / 1000.0
        cols.t_start.append(offset_s + begin)
        sensors = tuple(r.get("sensors", r.get("sensors_read", ())))
        nominal = sum(sensor_ms.get(s, 0.0) for s in sensors)
        cols.latency_ms.append(float("nan") if latency is None else float(latency) + nominal)
        cols.label.append(int(r["label_index"]))
        cols.truth.append(int(truth_list[row]))
        cols.source.append(str(r["source"]))
        cols.escalated.append(bool(r.get("escalated", False)))
        cols.sensors.append(sensors)
        rid = r.get("request_id")
        cols.request_id.append(-1 if rid is None else int(rid))
        cols.sent.append(rid is not None)
        cols.energy_mj.append(float((r.get("cost") or {}).get("energy_mj", float("nan"))))
