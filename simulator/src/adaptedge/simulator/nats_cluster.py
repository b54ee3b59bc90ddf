"""A NATS cluster on 127.0.0.1 for tests and benchmarks: ``nats-server`` nodes with MQTT
listeners, JetStream and routes, configured by ``cloud.nats_config`` (accounts included).

``LocalNatsCluster(n, devices, workers)`` writes the configuration in its own temporary folder,
starts the nodes on free ports and waits until every node's MQTT listener accepts a device
(JetStream has a meta leader and the MQTT session streams exist). ``kill(i)`` ends a node with
SIGKILL; ``stop()`` ends them all.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from adaptedge.cloud.access.nats_config import NatsCluster, NodeSpec, write_cluster
from adaptedge.simulator.brokers import HOST, BrokerError, free_port, wait_for_port
from adaptedge.simulator.processes import terminate


def nats_server_binary() -> str:
    found = shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None)
    if not found:
        raise BrokerError("nats-server is not installed: apt-get install -y nats-server")
    return found


class LocalNatsCluster:
    """``size`` nats-server nodes routed to each other, with accounts for ``devices`` and
    ``workers`` service users (``cloud-1`` ... ``cloud-N``)."""

    def __init__(self, size: int, devices: list[str], *, workers: int = 2,
                 service_user: str = "cloud", workdir: Path | None = None) -> None:
        self.binary = nats_server_binary()
        self._own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="adaptedge-nats-"))
        ports = set[int]()
        while len(ports) < 3 * size:
            ports.add(free_port())
        it = iter(sorted(ports))
        self.nodes = [NodeSpec(f"n{i + 1}", HOST, next(it), next(it), next(it))
                      for i in range(size)]
        self.config: NatsCluster = write_cluster(self.workdir / "conf", self.nodes, devices,
                                                 service_user=service_user, workers=workers)
        self.workers = list(self.config.workers)
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * size

    def password(self, user: str) -> str:
        return self.config.passwords[user]

    def log(self, i: int) -> str:
        path = self.workdir / f"{self.nodes[i].name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout_s: float = 30.0) -> None:
        for i, node in enumerate(self.nodes):
            log = self.workdir / f"{node.name}.log"
            self._procs[i] = subprocess.Popen(
                [self.binary, "-c", str(self.config.node_files[node.name]), "-l", str(log)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        try:
            for node in self.nodes:
                wait_for_port(node.mqtt_port, max(0.1, deadline - time.monotonic()))
                wait_for_port(node.client_port, max(0.1, deadline - time.monotonic()))
            for i in range(len(self.nodes)):
                self.wait_mqtt_ready(i, deadline)
        except BrokerError:
            logs = "\n".join(self.log(i)[-800:] for i in range(len(self.nodes)))
            self.stop()
            raise BrokerError(f"the NATS cluster did not come up in {timeout_s:g} s: "
                              f"{logs}") from None

    def wait_mqtt_ready(self, i: int, deadline: float) -> None:
        """Until an MQTT CONNECT on node ``i`` is accepted (JetStream ready for MQTT)."""
        from adaptedge.cloud.errors import CloudError
        from adaptedge.cloud.transport.connection import connect, make_client, parse_broker_url

        user = self.workers[0]
        while time.monotonic() < deadline:
            client = make_client(f"probe-{self.nodes[i].name}-{time.monotonic_ns()}",
                                 username=user, password=self.password(user))
            try:
                connect(client, parse_broker_url(self.nodes[i].mqtt_url), timeout_s=5.0)
            except CloudError:
                time.sleep(0.1)
                continue
            client.disconnect()
            client.loop(0.01)
            return
        raise BrokerError(f"node {self.nodes[i].name}'s MQTT listener never accepted a client")

    def running(self, i: int) -> bool:
        proc = self._procs[i]
        return proc is not None and proc.poll() is None

    def kill(self, i: int) -> None:
        """End node ``i`` at once (SIGKILL): its connections drop without a goodbye."""
        proc = self._procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)

    def stop(self) -> None:
        for i, proc in enumerate(self._procs):
            if proc is not None:
                terminate(proc)
            self._procs[i] = None
        if self._own_dir:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)

    @property
    def worker_url(self) -> str:
        return self.config.worker_url

    def mqtt_url(self, i: int) -> str:
        return self.nodes[i].mqtt_url

    def __enter__(self) -> LocalNatsCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
