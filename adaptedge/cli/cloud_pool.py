"""``cloud serve`` with several bundles (``--bundle`` repeated, ``--bundle-dir``) and, with
``--serve-updates``, the chunk server of over-the-air rollouts beside the worker."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any


def serve_pool(args: argparse.Namespace, stack: ExitStack, password: str | None,
               tls: Any) -> Any:
    """What ``CloudService`` serves: one verified bundle directory (one ``--bundle``, as
    before) or a ``BundlePool``; starts a ``ChunkServer`` for ``--serve-updates``. Everything
    opened here closes with ``stack``."""
    from adaptedge.cli.errors import CommandError
    from adaptedge.cloud.service.bundle_pool import BundlePool, bundle_paths
    from adaptedge.protocol.bundle import open_bundle, verify

    if args.max_loaded < 1:
        raise CommandError(f"--max-loaded must be >= 1, got {args.max_loaded}")
    if len(args.bundle) == 1 and not args.bundle_dir and not args.serve_updates:
        root = stack.enter_context(open_bundle(args.bundle[0]))
        if args.trust is not None:
            verify(root, trust=args.trust)  # the signer, before any connection
        return root
    paths: list[str | os.PathLike[str]] = list(bundle_paths(args.bundle, args.bundle_dir))
    pool = BundlePool(paths, prefix=args.prefix, trust=args.trust, max_loaded=args.max_loaded)
    stack.callback(pool.close)
    if args.serve_updates:
        _serve_updates(args, stack, pool, password, tls)
    devices = len(pool.bundle_ids) - len(pool.entries)
    print(f"adaptedge cloud: serving {len(pool.entries)} bundle(s) and {devices} device "
          f"bundle(s) cut from them: {', '.join(pool.bundle_ids)}", file=sys.stderr, flush=True)
    return pool


def _serve_updates(args: argparse.Namespace, stack: ExitStack, pool: Any,
                   password: str | None, tls: Any) -> None:
    from adaptedge.cloud.rollout.announce import ChunkServer, build_image
    from adaptedge.protocol.bundle_digest import SIGNATURE_NAME

    work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="adaptedge-images-")))
    server = ChunkServer(args.broker, prefix=args.prefix, username=args.username,
                         password=password, tls=tls,
                         client_id=f"{args.client_id}-updates" if args.client_id else None)
    for entry in pool.entries.values():
        server.add(build_image(entry.root, work / entry.bundle_id, trust=args.trust))
        if args.trust is None and not (entry.root / SIGNATURE_NAME).exists():
            server.add(build_image(entry.root, work / entry.bundle_id, device_only=True))
    for bundle_id, root in pool.device_roots.items():  # given device bundles ship as they are
        server.add(build_image(root, work / bundle_id, trust=args.trust))
    server.start()
    stack.callback(server.stop)
