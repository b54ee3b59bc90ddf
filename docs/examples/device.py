"""A device program: live sensors -> adaptedge EdgeRuntime -> local answer or cloud escalation.

One reader per sensor of the bundle (``adaptedge inspect BUNDLE`` lists them): a Python
callable, a command whose output is the values, or a file such as a sysfs node. Edit
``READERS`` for your hardware. Configuration comes from the environment (see
docs/systemd/adaptedge-edge.service) and the password from a file, never the command line.

    python device.py --password-file /run/credentials/adaptedge-edge.service/mqtt-password
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from adaptedge.edge import EdgeRuntime, MqttUplink


def from_file(path: str, scale: float = 1.0) -> Callable[[], list[float]]:
    """A sysfs node or any file holding whitespace-separated numbers."""
    return lambda: [float(v) * scale for v in Path(path).read_text().split()]


def from_command(*argv: str) -> Callable[[], list[float]]:
    """A command printing whitespace-separated numbers (bounded by the sensor timeout)."""
    return lambda: [float(v) for v in subprocess.run(
        argv, capture_output=True, text=True, check=True, timeout=5).stdout.split()]


def cpu_temperature() -> list[float]:
    """A plain Python callable (here: the first thermal zone, in degrees C)."""
    return [int(Path("/sys/class/thermal/thermal_zone0/temp").read_text()) / 1000.0]


READERS: dict[str, Callable[[], list[float]]] = {
    # "<sensor name in the bundle>": reader
    "temperature": cpu_temperature,
    "load": from_file("/proc/loadavg"),
    "uptime": from_command("cat", "/proc/uptime"),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", default=os.environ.get("ADAPTEDGE_BUNDLE"))
    p.add_argument("--broker", default=os.environ.get("ADAPTEDGE_BROKER"))
    p.add_argument("--device", default=os.environ.get("ADAPTEDGE_DEVICE", "edge"))
    p.add_argument("--trust", default=os.environ.get("ADAPTEDGE_TRUST"))
    p.add_argument("--password-file", type=Path)
    p.add_argument("--every", type=float, default=1.0, help="seconds between decisions")
    p.add_argument("--count", type=int, default=0, help="stop after N decisions (0: never)")
    args = p.parse_args()
    if not args.bundle:
        p.error("give --bundle or set ADAPTEDGE_BUNDLE")
    password = (args.password_file.read_text().splitlines()[0].strip()
                if args.password_file else None)
    uplink = (MqttUplink(args.broker, args.device, username=args.device if password else None,
                         password=password).start() if args.broker else None)
    rt = EdgeRuntime.load(args.bundle, uplink=uplink,
                          trust=[args.trust] if args.trust else None)
    stop = {"flag": False}
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.update(flag=True))
    done = 0
    while not stop["flag"] and (args.count == 0 or done < args.count):
        d = rt.predict(READERS)
        print(f"{d.label} ({d.source}{', ' + d.error if d.error else ''}) "
              f"read {','.join(d.sensors_read)} cost {d.cost.scalar:.3g}", flush=True)
        done += 1
        time.sleep(args.every)
    rt.close()
    if uplink is not None:
        uplink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
