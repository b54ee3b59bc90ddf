"""The fleet parts ``cloud serve`` starts beside its worker: ``--db`` (the store ingest,
``cloud.ingest``) and ``--metrics-port`` (Prometheus, ``cloud.metrics``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adaptedge.cli.db_options import add_option as add_db_password
from adaptedge.cli.db_options import db_password


def add_options(s: Any) -> None:
    """The ``cloud serve`` options of the fleet parts."""
    s.add_argument("--db", nargs="?", const="fleet.db", metavar="URL",
                   help="label and store the devices' outbox records and telemetry in this "
                   "database: sqlite:///FILE, a file path, or postgresql://USER@HOST/DB "
                   "(--db alone: ./fleet.db); needs the 'fleet' extra")
    add_db_password(s)
    s.add_argument("--store-username", help="broker user of the store ingest (default: "
                   "--username + '-store', the account `cloud acl` creates)")
    s.add_argument("--store-password-file", help="its password file (default: the file named "
                   "like that user next to --password-file)")
    s.add_argument("--device-row-quota", type=int, default=200_000, metavar="N",
                   help="store at most N records per device per --quota-window; more are "
                   "refused and counted (default 200000: above the 180000 an hour the default "
                   "drain rate can send; 0: no quota)")
    s.add_argument("--quota-window", type=float, default=3600.0, metavar="S",
                   help="the row quota's window in seconds (default 3600)")
    s.add_argument("--metrics-port", type=int, metavar="P",
                   help="serve Prometheus metrics on http://127.0.0.1:P/metrics")
    s.add_argument("--metrics-host", default="127.0.0.1",
                   help="address of the metrics endpoint (default 127.0.0.1)")


def _store_login(args: argparse.Namespace) -> tuple[str | None, str | None]:
    from adaptedge.cloud.access.acl import read_password_file, store_user_of

    if args.username is None:
        return args.store_username, None
    user = args.store_username or store_user_of(args.username)
    path = args.store_password_file
    if path is None and args.password_file:
        path = str(Path(args.password_file).with_name(user))
    return user, read_password_file(path) if path else None


def start(args: argparse.Namespace, svc: Any, root: Any, tls: Any) -> list[Callable[[], None]]:
    """Start what the options ask for; the functions that stop them (call in order)."""
    stops: list[Callable[[], None]] = []
    ingest, store = None, None
    if args.db is not None:
        from adaptedge.cli.errors import CommandError
        from adaptedge.cloud.fleet.ingest import StoreIngest

        if str(args.broker).startswith("nats://"):
            raise CommandError("--db reads the devices' records over MQTT: give cloud serve an "
                               "mqtt:// --broker (the store ingest has no NATS transport yet)")
        from adaptedge.cloud.fleet.store import FleetStore

        store = FleetStore(args.db, quota=_quota(args), password=db_password(args))
        stops.append(store.close)
        labeller = _labeller(args, root)
        if hasattr(labeller, "close"):
            stops.append(labeller.close)
        username, password = _store_login(args)
        ingest = StoreIngest(labeller, store, args.broker, drift=_live_drift(store, labeller),
                             client_id=username or f"{svc.worker_id}-store", username=username,
                             password=password, tls=tls, prefix=args.prefix,
                             group=f"{args.group}-store" if svc.shared_subscription else None)
        ingest.start()
        stops.insert(0, ingest.stop)
        print(f"adaptedge cloud: storing records in {store.engine.url.render_as_string()}",
              file=sys.stderr, flush=True)
    if args.metrics_port is not None:
        stops.insert(0, _start_metrics(args, svc, ingest, store))
    return stops


def _quota(args: argparse.Namespace) -> Any:
    from adaptedge.cli.errors import CommandError
    from adaptedge.cloud.fleet.store import RowQuota

    if args.device_row_quota == 0:
        return None
    try:
        return RowQuota(args.device_row_quota, args.quota_window)
    except ValueError as exc:
        raise CommandError(f"--device-row-quota/--quota-window: {exc}") from None


def _live_drift(store: Any, labeller: Any) -> Any:
    """Drift alarms on the stored rows and telemetry, against the served bundles' figures."""
    from adaptedge.cloud.fleet.live_drift import LiveDrift

    return LiveDrift(store, labeller.manifest_of)  # device bundles' own points too


def _labeller(args: argparse.Namespace, root: Any) -> Any:
    """The ingest's own HPC(s): the worker's bundle, or every bundle of its pool."""
    from adaptedge.cloud.service.bundle_pool import BundlePool
    from adaptedge.cloud.service.inference import HpcInference

    if isinstance(root, BundlePool):
        return BundlePool([*(e.root for e in root.entries.values()),
                           *root.device_roots.values()], prefix=args.prefix,
                          trust=args.trust, max_loaded=args.max_loaded)
    return HpcInference.load(root, prefix=args.prefix)


def _start_metrics(args: argparse.Namespace, svc: Any, ingest: Any, store: Any
                   ) -> Callable[[], None]:
    from prometheus_client import CollectorRegistry

    from adaptedge.cloud.fleet.metrics import FleetCollector, ServiceObserver, serve_metrics
    from adaptedge.cloud.service.stats import ServiceStats

    registry = CollectorRegistry()
    bundle = svc.inference.bundle_id
    # The worker's ServiceStats feeds the histograms (on the service, or its transport-free core).
    stats = getattr(svc, "_stats", None) or getattr(getattr(svc, "core", None), "stats", None)
    if isinstance(stats, ServiceStats):
        stats.observer = ServiceObserver(registry, bundle)
    inbox = ingest.telemetry if ingest is not None else svc.telemetry

    def telemetry() -> dict[str, dict[str, float]]:
        return {d: dict(t.counters) for d, t in list(inbox.latest.items())}

    collector = FleetCollector(bundle, svc.stats, telemetry,
                               ingest.bundle_of if ingest is not None else {}, store)
    server = serve_metrics(args.metrics_port, collector, registry, host=args.metrics_host)
    print(f"adaptedge cloud: metrics on http://{args.metrics_host}:{server.server_port}/metrics",
          file=sys.stderr, flush=True)
    return server.shutdown  # type: ignore[no-any-return]
