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

from protocol.bundle import verify
from simulator.brokers import AmqttBroker, MosquittoBroker, best_available_broker
from simulator.network import Outage
from simulator.processes import ProcessSet, adaptedge_command
from simulator.proxy import ImpairedProxy
from simulator.records import DecisionColumns, RunResult
from simulator.scenario import Scenario


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
            progress: bool = False) -> RunResult:
    """Run the HIL experiment and return its decisions (scored against ``truth``)."""
    scenario = scenario or Scenario()
    opts = options or HilOptions()
    manifest = verify(bundle_dir)
    if truth is None:
        from trainer.datasets import load_dataset

        truth = load_dataset(data).split(opts.split)[1]  # type: ignore[arg-type]
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
        cloud_args = ["cloud", "serve", "--bundle", str(bundle_dir), "--broker", url,
                      "--stats-every", "3600", "--log-level", "WARNING"]
        if not shares:
            cloud_args.append("--no-share")
        procs.start("cloud", adaptedge_command(*cloud_args))
        if not procs.wait_for_log("cloud", "ready", opts.cloud_ready_s):
            raise HilError(f"the cloud service did not become ready within "
                           f"{opts.cloud_ready_s:g} s: {procs.log('cloud')[-800:]}")
        names = []
        outputs = {}
        for d in range(opts.devices):
            name = f"dev-{d}"
            out = workdir / f"{name}.json"
            outputs[name] = out
            procs.start(name, adaptedge_command(
                "edge", "run", "--bundle", str(bundle_dir), "--broker", device_url,
                "--device", name, "--replay", data, "--split", opts.split,
                "--limit", str(limit), "--rate", f"{rate:g}", "--operating-point", point,
                "--json-out", str(out)))
            names.append(name)
        if proxy is not None:
            proxy.start_schedule()
        pauser = None
        if outages and opts.outage_mode == "pause" and mosquitto is not None:
            pauser = _pause_schedule(mosquitto, outages)
        budget = opts.timeout_s
        bar = _bar(progress, opts.devices * limit)
        codes = _wait_devices(procs, names, budget, rate, bar)
        if pauser is not None:
            pauser.join(timeout=max(o.end_s for o in outages) + 5)
        failed = {n: c for n, c in codes.items() if c != 0}
        if failed:
            detail = "; ".join(f"{n}: exit {c}: {procs.log(n)[-400:]}" for n, c in failed.items())
            raise HilError(f"edge device(s) failed or timed out after {budget:g} s: {detail} "
                           f"(logs in {procs.log_dir})")
        cols = DecisionColumns()
        for name in names:
            _append_records(cols, name, outputs[name], truth, rate)
        cloud_log = procs.log("cloud")
        procs.close()
    extra: dict[str, Any] = {
        "broker": opts.broker, "devices": opts.devices, "rows_per_device": limit,
        "rate_hz": rate, "proxy": use_proxy, "outage_mode": opts.outage_mode if outages else None,
        "workdir": str(workdir), "notes": notes,
    }
    if proxy is not None:
        extra["proxy_cuts"] = len(proxy.cuts)
        extra["proxy_refused"] = proxy.refused
    if "Traceback" in cloud_log:
        extra["cloud_log_tail"] = cloud_log[-800:]
    return RunResult(
        mode="hil", bundle_id=manifest.bundle_id, operating_point=point,
        classes=manifest.classes, columns=cols,
        outages=[(o.start_s, o.end_s) for o in outages],
        duration_s=max(cols.t_start, default=0.0), wall_s=time.monotonic() - started,
        extra=extra)


def _pause_schedule(broker: MosquittoBroker, outages: tuple[Outage, ...]) -> threading.Thread:
    def run() -> None:
        t0 = time.monotonic()
        for o in sorted(outages, key=lambda o: o.start_s):
            time.sleep(max(0.0, t0 + o.start_s - time.monotonic()))
            broker.pause()
            time.sleep(max(0.0, t0 + o.end_s - time.monotonic()))
            broker.resume()

    thread = threading.Thread(target=run, name="broker-pauser", daemon=True)
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


def _append_records(cols: DecisionColumns, device: str, path: Path,
                    truth: npt.NDArray[Any], rate_hz: float) -> None:
    """Add a device's records; a decision's start time is its scheduled time, row / rate."""
    truth_list = np.asarray(truth).tolist()
    for i, r in enumerate(read_records(path)):
        row = int(r.get("index", r.get("row", i)))
        latency = r.get("latency_ms")
        cols.device.append(device)
        cols.row.append(row)
        cols.t_start.append(row / rate_hz)
        cols.latency_ms.append(float("nan") if latency is None else float(latency))
        cols.label.append(int(r["label_index"]))
        cols.truth.append(int(truth_list[row]))
        cols.source.append(str(r["source"]))
        cols.escalated.append(bool(r.get("escalated", False)))
        cols.sensors.append(tuple(r.get("sensors", r.get("sensors_read", ()))))
        rid = r.get("request_id")
        cols.request_id.append(-1 if rid is None else int(rid))
        cols.sent.append(rid is not None)
        cols.energy_mj.append(float((r.get("cost") or {}).get("energy_mj", float("nan"))))
