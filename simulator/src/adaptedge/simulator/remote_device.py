"""A device under test on remote sensors: the real ``EdgeRuntime`` + ``MqttUplink``, reading
every sensor over MQTT from a ``RemoteSensorServer`` (``simulator.remote_sensors``) instead of
from a local dataset. It knows nothing of rows: the server decides what each read returns.

``python -m simulator.remote_device --bundle DIR --broker URL --device ID --count N
[--rate HZ] [--json-out FILE]`` makes N decisions and writes them in the record format of
``adaptedge edge run --json-out`` (``{"summary": ..., "decisions": [...]}``), where
``index`` is the decision's sequence number (= the server's row when each decision reads a
sensor). HIL starts it for ``remote_sensors=True``; real hardware does the same with its own
sensor readers swapped for ``RemoteSensors``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulator.remote_device", description=__doc__)
    p.add_argument("--bundle", required=True)
    p.add_argument("--broker", required=True, help="mqtt://HOST:PORT for the uplink")
    p.add_argument("--sensor-broker", help="broker of the sensor server (default: --broker)")
    p.add_argument("--device", required=True)
    p.add_argument("--count", type=int, required=True, help="decisions to make")
    p.add_argument("--rate", type=float, default=0.0, help="decisions per second (0: no pacing)")
    p.add_argument("--operating-point")
    p.add_argument("--read-timeout", type=float, default=2.0, metavar="S")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)

    from adaptedge.edge import EdgeRuntime, MqttUplink
    from adaptedge.simulator.remote_sensors import RemoteSensors

    stop = {"flag": False}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    uplink = MqttUplink(args.broker, args.device).start()
    rt = EdgeRuntime.load(args.bundle, uplink=uplink, device_id=args.device,
                          operating_point=args.operating_point)
    remote = RemoteSensors(args.sensor_broker or args.broker, args.device,
                           [s.name for s in rt.manifest.sensors], timeout_s=args.read_timeout)
    records: list[dict[str, Any]] = []
    try:
        remote.start()
        if not uplink.wait_connected(10.0):
            print(f"remote device {args.device}: uplink not connected", file=sys.stderr)
        started = time.monotonic()
        for i in range(args.count):
            if stop["flag"]:
                break
            if args.rate > 0:
                wait = started + i / args.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            d = rt.predict(remote.readers)
            records.append({
                "index": i, "label_index": d.label_index, "source": d.source,
                "escalated": d.escalated, "sensors": list(d.sensors_read),
                "failed_sensors": d.failed_sensors, "request_id": d.request_id,
                "latency_ms": d.timings["total"] * 1000.0,
                "cost": {"energy_mj": d.cost.energy_mj, "latency_ms": d.cost.latency_ms,
                         "money": d.cost.money, "bytes": d.cost.bytes,
                         "scalar": d.cost.scalar},
                "error": d.error})
    finally:
        remote.stop()
        uplink.close()
        rt.close()
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({"summary": {"decisions": len(records)},
                                             "decisions": records}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
