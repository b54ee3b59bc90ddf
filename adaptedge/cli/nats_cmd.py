"""``adaptedge cloud nats-config``: configuration files for a NATS cluster under the fleet
(one per node: MQTT listener, JetStream, routes; one shared accounts file; one secret each)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register_nats_config(cmds: Any) -> None:
    n = cmds.add_parser("nats-config", help="write NATS cluster node configs with an MQTT "
                        "listener, JetStream, routes and per-device permissions")
    n.add_argument("--node", action="append", required=True, metavar="NAME=HOST:C:M:R",
                   help="a node: name, host, client port, MQTT port, route port (repeat per "
                   "node, e.g. --node n1=10.0.0.1:4222:1883:6222)")
    n.add_argument("--devices", required=True, help="comma-separated device ids (= user names)")
    n.add_argument("--out", required=True, type=Path, help="output directory")
    n.add_argument("--service-user", default="adaptedge-cloud",
                   help="user name of the cloud workers (default adaptedge-cloud)")
    n.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker accounts to create (default 1)")
    n.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge)")
    n.add_argument("--store-dir", type=Path, metavar="DIR",
                   help="JetStream storage root, one folder per node under it "
                   "(default OUT/jetstream)")
    n.add_argument("--force", action="store_true", help="replace an existing configuration")
    n.set_defaults(handler=nats_config)


def nats_config(args: argparse.Namespace) -> int:
    from adaptedge.cloud.access.nats_config import NodeSpec, write_cluster

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    nodes = [NodeSpec.parse(text) for text in args.node]
    cluster = write_cluster(args.out, nodes, devices, service_user=args.service_user,
                            workers=args.workers, prefix=args.prefix,
                            store_root=args.store_dir, overwrite=args.force)
    print(f"wrote {len(nodes)} node configs and {cluster.accounts_file} "
          f"({len(cluster.passwords)} accounts; all files 0600)")
    for node in nodes:
        print(f"  nats-server -c {cluster.node_files[node.name]}   # on {node.host}")
    print(f"passwords: one 0600 file per account in {cluster.secrets_dir}/")
    print("\ncloud workers (one account each):")
    for worker in cluster.workers:
        print(f"  adaptedge cloud serve --bundle BUNDLE --broker {cluster.worker_url} "
              f"--username {worker} --password-file {cluster.secret_file(worker)}")
    print("\ndevices (MQTT 3.1.1, fail over along the list):")
    print(f"  adaptedge edge run ... --broker {cluster.device_url} --qos 0 --device DEVICE "
          f"--username DEVICE --password-file {cluster.secrets_dir}/DEVICE")
    return 0
