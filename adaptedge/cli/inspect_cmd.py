"""``adaptedge inspect BUNDLE``: show a bundle's manifest after verifying every file hash and,
if present, its signature. Exits 0 only for a bundle that verifies (with ``--trust``: and is
signed by one of those keys)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from adaptedge.protocol.bundle import open_bundle, verify
from adaptedge.protocol.manifest import Manifest


def register(sub: Any) -> None:
    p = sub.add_parser("inspect", help="verify a bundle and print its manifest")
    p.add_argument("bundle", help="bundle directory or .tar")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.add_argument("--trust", action="append", metavar="PUBKEY",
                   help="require a signature by this public key (signing.pub; repeatable)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with open_bundle(args.bundle) as root:
        manifest = verify(root, trust=args.trust)
        signer = signed_by(root)
    if args.json:
        print(json.dumps(manifest.to_dict(), indent=2, sort_keys=True))
    else:
        print(render(manifest))
        trusted = " (trusted)" if args.trust else ""
        print(f"signature: key {signer}{trusted}" if signer else "signature: none (unsigned)")
    return 0


def signed_by(root: Path) -> str | None:
    """Key id of a bundle's (already verified) signature, or None when it is unsigned."""
    from adaptedge.protocol.bundle import read_manifest_body
    from adaptedge.protocol.signing import read_signature

    found = read_signature(root, read_manifest_body(root))
    return found[0].key_id if found else None


def render(m: Manifest) -> str:
    lines = [
        f"bundle {m.bundle_id}  (schema v{m.schema_version})",
        f"method: {m.metadata.get('method', '?')}  dataset: {m.metadata.get('dataset', '?')}",
        f"classes ({len(m.classes)}): {', '.join(m.classes)}",
        f"features: {len(m.feature_names)}",
        "",
        f"{'sensor':<16}{'features':>9}{'energy mJ':>11}{'latency ms':>12}{'money':>9}",
    ]
    for s in m.sensors:
        lines.append(f"{s.name:<16}{len(s.features):>9}{s.energy_mj:>11.3g}"
                     f"{s.latency_ms:>12.3g}{s.money:>9.3g}")
    link = m.link
    lines += [
        "",
        f"link: {link.request_bytes} B up / {link.reply_bytes} B down, rtt {link.rtt_ms:g} ms, "
        f"deadline {link.deadline_ms:g} ms, cloud cost {link.cloud_cost_per_call:g}/call",
        f"hpc: {m.hpc.file} ({m.hpc.description or 'no description'}), needs "
        f"{len(m.hpc.sensors)} sensors, validation accuracy {m.hpc.accuracy:.4f}",
        "",
        "policies:",
    ]
    for name, graph in m.policies.items():
        depth = max(len(n.sensors) for n in graph.nodes.values())
        lines.append(f"  {name}: {len(graph.nodes)} nodes, root {graph.root!r}, "
                     f"up to {depth} sensors")
    lines += ["", f"{'operating point':<24}{'policy':<14}{'accuracy':>9}{'cost':>10}"
                  f"{'escalate':>10}{'sensors':>9}  validation 95% interval"]
    for p in m.operating_points:
        mark = " *" if p.name == m.default_operating_point else ""
        interval = ("-" if p.accuracy_interval is None
                    else "[{:.4f}, {:.4f}]".format(*p.accuracy_interval))
        lines.append(f"{p.name + mark:<24}{p.policy:<14}{p.accuracy:>9.4f}{p.cost:>10.4g}"
                     f"{p.escalation_rate:>10.3f}{p.avg_sensors_read:>9.2f}  {interval}")
    if m.split is not None:
        lines += ["", f"split: {m.split.dataset}, seed {m.split.seed}, fractions "
                      f"{', '.join(f'{f:.3f}' for f in m.split.fractions)}, digest "
                      f"{m.split.digest[:16]}"]
    lines += ["", "files (sha256):"]
    lines += [f"  {name:<28}{digest}" for name, digest in sorted(m.files.items())]
    return "\n".join(lines)
