"""NATS cluster configuration: one file per node, one shared accounts file, one secret each.

A node has a client listener (workers, nats-py), an MQTT listener (devices, MQTT 3.1.1), a
JetStream store (the MQTT sessions and QoS 1 state live there; nats-server needs it and a
``server_name`` for MQTT) and routes to every other node. Accounts and permissions match the
mosquitto ACL of ``cloud/acl.py`` with MQTT topics ``a/b/c`` as subjects ``a.b.c``: a device
may publish only its own device -> cloud channels and subscribe only to its own cloud -> device
channels; a worker may subscribe to every device's device -> cloud channels (also in a queue
group) and publish every device's cloud -> device channels. The two channel tables below are
the whole policy: a new channel is one entry in one of them.

Every device has an account of its own, its user limited to MQTT connections: nats-server
(2.9) keeps MQTT sessions per account and has no rule binding a client id to a user, so in a
shared account device B connecting with A's client id would close A's connection. The
accounts are joined by stream exports and imports of exactly the subjects above. The cost:
each device account holds its own MQTT JetStream streams (created at its first connection),
and retained MQTT messages are per account too (an announcement published in the workers'
account does not reach a device account's retained store).

Passwords are written in clear into 0600 files (``accounts.conf`` and ``secrets/<user>``):
nats-server accepts bcrypt hashes too, but the standard library has no bcrypt.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from adaptedge.cloud.access.acl import (
    DEFAULT_SERVICE_USER,
    MESSAGE_SIZE_LIMIT,
    _write_private,
    check_user_name,
    prepare_secrets,
    service_users,
)
from adaptedge.cloud.errors import CloudError
from adaptedge.protocol.topics import DEFAULT_PREFIX, TOPIC_VERSION

DEVICE_TO_CLOUD: Final[tuple[str, ...]] = ("req", "telemetry", "fetch", "store")
"""Channels a device publishes on its own topic and workers subscribe to for every device."""
CLOUD_TO_DEVICE: Final[tuple[str, ...]] = ("resp", "update", "chunk", "stored")
"""Channels workers publish for every device and a device reads only on its own topic."""
WORKER_OWN: Final[tuple[str, ...]] = ("telemetry",)
"""A worker's own channels (stats and backlog probes go out and come back on its telemetry)."""
ACCOUNT: Final = "ADAPTEDGE"
ACCOUNTS_FILE: Final = "accounts.conf"
SECRETS_DIR: Final = "secrets"
ROUTE_USER: Final = "route"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One cluster node: ``NAME=HOST:CLIENT_PORT:MQTT_PORT:CLUSTER_PORT``."""

    name: str
    host: str
    client_port: int
    mqtt_port: int
    cluster_port: int

    @classmethod
    def parse(cls, text: str) -> NodeSpec:
        name, sep, rest = text.partition("=")
        parts = rest.rsplit(":", 3)
        try:
            if not sep or not name or len(parts) != 4 or not parts[0]:
                raise ValueError
            ports = [int(p) for p in parts[1:]]
            if not all(0 < p < 65536 for p in ports):
                raise ValueError
        except ValueError:
            raise CloudError(f"node {text!r} is not NAME=HOST:CLIENT_PORT:MQTT_PORT:"
                             "CLUSTER_PORT (e.g. n1=10.0.0.1:4222:1883:6222)") from None
        if not name.replace("-", "").replace("_", "").isalnum():
            raise CloudError(f"node name {name!r} must be letters, digits, '-' or '_'")
        return cls(name, parts[0], *ports)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.client_port}"

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://{self.host}:{self.mqtt_port}"


def _subject(prefix: str, device: str, channel: str) -> str:
    return f"{prefix.replace('/', '.')}.{TOPIC_VERSION}.{device}.{channel}"


def _quoted(subjects: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{s}"' for s in subjects) + "]"


def _with_bundles(subjects: list[str], prefix: str, device: str) -> list[str]:
    """``subjects`` and the bundle-scoped request subject ``<prefix>.v1.<device>.req.*``."""
    return [*subjects, f"{_subject(prefix, device, 'req')}.*"]


def device_permissions(device: str, prefix: str = DEFAULT_PREFIX) -> dict[str, list[str]]:
    return {"publish": _with_bundles([_subject(prefix, device, c) for c in DEVICE_TO_CLOUD],
                                     prefix, device),
            "subscribe": [_subject(prefix, device, c) for c in CLOUD_TO_DEVICE]}


def worker_permissions(worker: str, prefix: str = DEFAULT_PREFIX) -> dict[str, list[str]]:
    reads = _with_bundles([_subject(prefix, "*", c) for c in DEVICE_TO_CLOUD], prefix, "*")
    return {"publish": [_subject(prefix, "*", c) for c in CLOUD_TO_DEVICE]
            + [_subject(prefix, worker, c) for c in WORKER_OWN]
            + [f"{_subject(prefix, '*', 'req')}.*"],  # forwarding to a bundle's workers
            "subscribe": reads + [f"{s} *" for s in reads]  # also as a queue-group member
            + [_subject(prefix, worker, c) for c in WORKER_OWN]}


def device_account(device: str) -> str:
    """The NATS account of one device (``DEV_<device>``): MQTT sessions, hence client ids,
    live per account, so no other account's client can take this device's session over."""
    return f"DEV_{device}"


def _user_line(user: str, password: str, perms: dict[str, list[str]], kinds: str) -> list[str]:
    return [f'      {{user: "{user}", password: "{password}", '
            f"allowed_connection_types: {kinds}, permissions: {{",
            f"        publish: {{allow: {_quoted(perms['publish'])}}}",
            f"        subscribe: {{allow: {_quoted(perms['subscribe'])}}}",
            "      }}"]


def _service_account(passwords: dict[str, str], workers: Sequence[str],
                     devices: Sequence[str], prefix: str) -> list[str]:
    """The workers' account: exports the cloud -> device channels to the device accounts,
    imports each device's device -> cloud channels."""
    lines = [f"  {ACCOUNT}: {{", "    jetstream: enabled", "    users: ["]
    for user in workers:  # MQTT too: probes and retained announcements
        lines += _user_line(user, passwords[user], worker_permissions(user, prefix),
                            '["STANDARD", "MQTT"]')
    accounts = _quoted([device_account(d) for d in devices])
    lines += ["    ]", "    exports: ["]
    lines += [f'      {{stream: "{_subject(prefix, "*", c)}", accounts: {accounts}}}'
              for c in CLOUD_TO_DEVICE]
    lines += ["    ]", "    imports: ["]
    lines += [f'      {{stream: {{account: "{device_account(d)}", subject: "{subject}"}}}}'
              for d in devices for subject in device_permissions(d, prefix)["publish"]]
    return [*lines, "    ]", "  }"]


def _device_account(device: str, password: str, prefix: str) -> list[str]:
    """One device's account: its user (MQTT connections only), its device -> cloud subjects
    exported to the workers' account, its own cloud -> device subjects imported."""
    perms = device_permissions(device, prefix)
    lines = [f'  "{device_account(device)}": {{', "    jetstream: enabled", "    users: ["]
    lines += _user_line(device, password, perms, '["MQTT"]')
    lines += ["    ]", "    exports: ["]
    lines += [f'      {{stream: "{subject}", accounts: ["{ACCOUNT}"]}}'
              for subject in perms["publish"]]
    lines += ["    ]", "    imports: ["]
    lines += [f'      {{stream: {{account: "{ACCOUNT}", subject: "{subject}"}}}}'
              for subject in perms["subscribe"]]
    return [*lines, "    ]", "  }"]


def accounts_text(passwords: dict[str, str], workers: Sequence[str],
                  prefix: str = DEFAULT_PREFIX) -> str:
    """The ``accounts { ... }`` block every node includes: one account for the workers and
    one per device (``device_account``), joined by stream exports and imports of exactly the
    channels of the two tables above."""
    devices = [user for user in passwords if user not in workers]
    lines = ["# adaptedge NATS accounts: generated by `adaptedge cloud nats-config`.",
             "# A device publishes only its own device->cloud subjects and reads only its own",
             "# cloud->device subjects; workers read every device's requests and answer them.",
             "# Each device has its own account: MQTT client ids are per account, so no device",
             "# can take another's session over (knock it offline) with its client id.",
             "accounts {", *_service_account(passwords, workers, devices, prefix)]
    for device in devices:
        lines += _device_account(device, passwords[device], prefix)
    return "\n".join([*lines, "}"]) + "\n"


def node_text(node: NodeSpec, nodes: Sequence[NodeSpec], store_dir: Path, accounts: Path,
              route_password: str, cluster: str = "adaptedge") -> str:
    """One node's configuration: listeners, JetStream store, routes to the other nodes."""
    routes = [f"nats-route://{ROUTE_USER}:{route_password}@{n.host}:{n.cluster_port}"
              for n in nodes if n.name != node.name]
    lines = [
        f"# adaptedge NATS node {node.name}: generated by `adaptedge cloud nats-config`.",
        f'server_name: "{node.name}"',
        f'listen: "{node.host}:{node.client_port}"',
        f"max_payload: {MESSAGE_SIZE_LIMIT}",
        f'jetstream {{ store_dir: "{store_dir}", max_memory_store: 64MB, max_file_store: 1GB }}',
        "mqtt {",
        f'  listen: "{node.host}:{node.mqtt_port}"',
        "  # Devices are MQTT 3.1.1 clients of this listener; a topic a/b/c is the subject a.b.c.",
        f"  stream_replicas: {min(3, len(nodes))}",
        "}",
    ]
    if routes:  # a single node is no cluster (JetStream refuses a cluster without routes)
        lines += [
            "cluster {",
            f'  name: "{cluster}"',
            f'  listen: "{node.host}:{node.cluster_port}"',
            f'  authorization {{ user: "{ROUTE_USER}", password: "{route_password}" }}',
            f"  routes: {_quoted(routes)}",
            "}",
        ]
    return "\n".join([*lines, f'include "{accounts.name}"', ""])


@dataclass(frozen=True, slots=True)
class NatsCluster:
    node_files: dict[str, Path]
    accounts_file: Path
    secrets_dir: Path
    passwords: dict[str, str]
    workers: tuple[str, ...]
    nodes: tuple[NodeSpec, ...]

    def secret_file(self, user: str) -> Path:
        return self.secrets_dir / user

    @property
    def worker_url(self) -> str:
        """Every node's client URL, for ``cloud serve --broker``."""
        return ",".join(n.url for n in self.nodes)

    @property
    def device_url(self) -> str:
        """Every node's MQTT URL, for ``edge run --broker`` (failover in this order)."""
        return ",".join(n.mqtt_url for n in self.nodes)


def write_cluster(out_dir: str | os.PathLike[str], nodes: Sequence[NodeSpec],
                  devices: Sequence[str], *, service_user: str = DEFAULT_SERVICE_USER,
                  workers: int = 1, prefix: str = DEFAULT_PREFIX, store_root: Path | None = None,
                  overwrite: bool = False) -> NatsCluster:
    """Write ``<node>.conf`` per node, ``accounts.conf`` and ``secrets/<user>`` (all 0600)."""
    service = service_users(service_user, workers)
    users = [*service, *devices]
    for user in users:
        check_user_name(user)
        if "." in user or "*" in user or ">" in user:
            raise CloudError(f"user name {user!r} must not contain '.', '*' or '>' on NATS "
                             "(a device id is one subject token)")
    if not devices or not nodes:
        raise CloudError("give at least one device (--devices) and one node (--node)")
    if len(set(users)) != len(users) or len({n.name for n in nodes}) != len(nodes):
        raise CloudError("user names and node names must be distinct")
    out = Path(out_dir)
    accounts, secrets_dir = out / ACCOUNTS_FILE, out / SECRETS_DIR
    node_files = {n.name: out / f"{n.name}.conf" for n in nodes}
    targets = [accounts, *node_files.values(), *(secrets_dir / u for u in users)]
    prepare_secrets(out, secrets_dir, targets, overwrite=overwrite,
                    holds="a NATS configuration")
    passwords = {user: secrets.token_urlsafe(24) for user in users}
    route_password = secrets.token_urlsafe(24)
    _write_private(accounts, accounts_text(passwords, service, prefix))
    root = (store_root or out / "jetstream").resolve()
    for node in nodes:
        _write_private(node_files[node.name],
                       node_text(node, nodes, root / node.name, accounts, route_password))
    for user, password in passwords.items():
        _write_private(secrets_dir / user, password + "\n")
    return NatsCluster(node_files, accounts, secrets_dir, passwords, tuple(service), tuple(nodes))
