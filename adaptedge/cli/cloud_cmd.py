"""``adaptedge cloud serve`` (the HPC worker behind MQTT) and ``adaptedge cloud acl`` (broker
credentials and ACL for a deployment)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from contextlib import ExitStack
from types import FrameType
from typing import Any

from adaptedge.cli import fleet_serve
from adaptedge.cli.cloud_pool import serve_pool
from adaptedge.cli.nats_cmd import register_nats_config


def register(sub: Any) -> None:
    p = sub.add_parser("cloud", help="run the cloud HPC service, or generate broker credentials")
    cmds = p.add_subparsers(dest="cloud_command", metavar="ACTION", required=True)

    s = cmds.add_parser("serve", help="answer escalated requests with the bundle's HPC over MQTT")
    s.add_argument("--bundle", action="append", default=[], help="bundle directory or .tar "
                   "(repeatable: one worker answers every bundle given; the first is the default)")
    s.add_argument("--bundle-dir", action="append", default=[], metavar="DIR",
                   help="serve every bundle (folder or .tar) in DIR too (repeatable)")
    s.add_argument("--max-loaded", type=int, default=4, metavar="N",
                   help="keep at most N bundles' HPC models loaded (default 4; loaded at start "
                        "in order, then on first use; LRU)")
    s.add_argument("--serve-updates", action="store_true",
                   help="also serve the bundles' chunks to devices downloading an update")
    s.add_argument("--trust", action="append", metavar="PUBKEY",
                   help="serve only a bundle signed by this public key (repeatable)")
    s.add_argument("--broker", required=True, help="mqtt://HOST:PORT or mqtts://HOST:PORT, or "
                   "a NATS cluster: nats://HOST:PORT[,nats://HOST:PORT...] (the nats extra)")
    s.add_argument("--group", default="adaptedge", help="shared-subscription group (MQTT) or "
                   "queue group (NATS) of the workers (default: adaptedge)")
    s.add_argument("--share", choices=("auto", "on", "off"), default="auto",
                   help="use $share subscriptions: auto = probe the broker (default)")
    s.add_argument("--no-share", dest="share", action="store_const", const="off",
                   help="same as --share off")
    s.add_argument("--max-batch", type=int, default=32, help="flush at N requests (default 32)")
    s.add_argument("--max-wait-ms", type=float, default=2.0,
                   help="flush when the oldest request waited T ms (default 2)")
    s.add_argument("--max-queue-ms", type=float, default=None, metavar="MS",
                   help="shed a request as 'overloaded' once it waited this long (default: "
                   "half its deadline); past its deadline it is shed as 'expired'")
    s.add_argument("--collect-telemetry", action="store_true",
                   help="read device telemetry (only from the device its topic names) and "
                   "count it in the stats")
    s.add_argument("--username", help="broker user name")
    s.add_argument("--password-file", help="file holding the broker password (first line)")
    s.add_argument("--tls-ca", help="CA bundle to verify the broker (implies TLS)")
    s.add_argument("--tls-cert", help="client certificate (with --tls-key)")
    s.add_argument("--tls-key", help="client private key")
    s.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge)")
    s.add_argument("--stats-every", type=float, default=10.0, metavar="S",
                   help="publish stats telemetry and log them every S seconds (default 10)")
    s.add_argument("--client-id", help="MQTT client id and worker name (default cloud-HOST-PID)")
    s.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    fleet_serve.add_options(s)
    s.set_defaults(handler=serve)

    a = cmds.add_parser("acl", help="write a mosquitto password file and ACL for the devices")
    a.add_argument("--devices", required=True, help="comma-separated device ids (= user names)")
    a.add_argument("--out", required=True, help="output directory")
    a.add_argument("--service-user", default="adaptedge-cloud",
                   help="user name of the cloud worker (default adaptedge-cloud)")
    a.add_argument("--workers", type=int, default=1, metavar="N",
                   help="service accounts to create, one per worker: client ids are bound to "
                   "user names, so workers cannot share one (default 1)")
    a.add_argument("--prefix", default="adaptedge", help="topic prefix (default adaptedge)")
    a.add_argument("--broker-user", metavar="USER",
                   help="chown the password, ACL and mosquitto.conf files to the account the broker runs as "
                   "(mosquitto: 'mosquitto'); they are 0600")
    a.add_argument("--force", action="store_true", help="replace existing credentials")
    a.set_defaults(handler=acl)
    register_nats_config(cmds)


def serve(args: argparse.Namespace) -> int:
    from adaptedge.cli.errors import CommandError
    from adaptedge.cloud import CloudService, TlsFiles
    from adaptedge.cloud.access.acl import read_password_file

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.password_file and not args.username:
        raise CommandError("--password-file needs --username")
    if args.max_batch < 1 or args.max_wait_ms < 0 or args.stats_every <= 0 or (
            args.max_queue_ms is not None and not args.max_queue_ms > 0):
        raise CommandError("--max-batch must be >= 1, --max-wait-ms >= 0, --stats-every > 0, "
                           "--max-queue-ms > 0")
    try:
        password = read_password_file(args.password_file) if args.password_file else None
        tls = None
        if args.tls_ca or args.tls_cert or args.tls_key:
            tls = TlsFiles(args.tls_ca, args.tls_cert, args.tls_key)
    except ValueError as exc:  # TlsFiles: a certificate without its key
        raise CommandError(str(exc)) from exc
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with ExitStack() as stack:
        root = serve_pool(args, stack, password, tls)
        svc = CloudService(root, args.broker, group=args.group, max_batch=args.max_batch,
                           max_wait_ms=args.max_wait_ms, username=args.username,
                           password=password, tls=tls, prefix=args.prefix,
                           stats_every_s=args.stats_every, client_id=args.client_id,
                           share=args.share, max_queue_ms=args.max_queue_ms,
                           collect_telemetry=args.collect_telemetry)
        svc.start()
        stops = fleet_serve.start(args, svc, root, tls)
        print(f"adaptedge cloud: worker {svc.worker_id} ready", file=sys.stderr, flush=True)
        while not stop.is_set() and svc.running:
            stop.wait(0.5)
        crashed = not svc.running
        svc.stop()
        for stop_part in stops:
            stop_part()
    if svc.failure is not None:
        print(f"adaptedge: error: {svc.failure}", file=sys.stderr)
    return 1 if crashed else 0


def acl(args: argparse.Namespace) -> int:
    from adaptedge.cloud.access.acl import give_to, store_user_of, system_account, write_credentials

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if args.broker_user:
        system_account(args.broker_user)  # refuse before writing anything
    creds = write_credentials(args.out, devices, service_user=args.service_user,
                              prefix=args.prefix, overwrite=args.force, workers=args.workers)
    if args.broker_user:
        give_to(args.broker_user, creds.password_file, creds.acl_file, creds.conf_file)
    print(f"wrote {creds.password_file} ({len(creds.passwords)} accounts), {creds.acl_file} "
          f"and {creds.conf_file}")
    if not args.broker_user:
        print("all three are 0600: mosquitto reads them as its own user, so `chown mosquitto: "
              "passwd acl mosquitto.conf` there (or pass --broker-user mosquitto)")
    print(f"passwords: one 0600 file per account in {creds.secrets_dir}/ "
          "(give each device its own; they are not shown again)")
    print(f"\nmosquitto.conf settings (in {creds.conf_file}; paste them right after your "
          "listener line, not through include_dir, which gives listener settings to a "
          "default listener on port 1883 instead):\n")
    print(creds.mosquitto_conf())
    print("cloud workers (one account each):\n")
    for worker in creds.workers:
        print(f"  adaptedge cloud serve --bundle BUNDLE --broker mqtt://HOST:1883 "
              f"--username {worker} --password-file {creds.secret_file(worker)}")
    print(f"\nwith --db, a worker's store ingest logs in as its user + '-store' (e.g. "
          f"{store_user_of(creds.workers[0])}; its password file is found next to "
          "--password-file)")
    return 0
