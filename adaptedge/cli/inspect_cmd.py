"""``adaptedge inspect BUNDLE``: show a bundle's manifest after verifying every file hash and,
if present, its signature, and loading its HPC with the loader ``cloud serve`` uses (when the
cloud extra is installed). Exits 0 only for a bundle that verifies (with ``--trust``: and is
signed by one of those keys) and whose HPC ``cloud serve`` would take. The default operating
point's policy is also printed as its root-to-exit paths (``policy_paths``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from adaptedge.cli.errors import CommandError
from adaptedge.cli.policy_paths import policy_paths
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
        hpc_line = check_hpc(root, args.trust) if manifest.carries_hpc else (
            f"hpc: not held (a device bundle): the cloud answers it with "
            f"{manifest.hpc.cloud_bundle}/{manifest.hpc.file}, SHA-256 {manifest.hpc_sha256}")
    if args.json:
        print(json.dumps(manifest.to_dict(), indent=2, sort_keys=True))
    else:
        print(render(manifest))
        trusted = " (trusted)" if args.trust else ""
        print(f"signature: key {signer}{trusted}" if signer else "signature: none (unsigned)")
        print(hpc_line)
    return 0


def check_hpc(root: Path, trust: list[str] | None) -> str:
    """Load the HPC exactly as ``cloud serve`` does (``HpcInference.load``: session, contract,
    one row within the run limit); ``CommandError`` if it would refuse it."""
    try:
        from adaptedge.cloud.errors import CloudError
        from adaptedge.cloud.service.inference import HpcInference
    except ModuleNotFoundError:
        return "hpc: not loaded (install adaptedge[cloud] to check it as cloud serve does)"
    try:
        HpcInference.load(root, trust=trust).guard.close()
    except CloudError as exc:
        raise CommandError(f"cloud serve would refuse this bundle: {exc}") from None
    return "hpc: loads and answers a row, as cloud serve does"


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
        task_line(m),
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
        f"{len(m.hpc.sensors)} sensors, {hpc_score(m)}",
        "",
        "policies:",
    ]
    for name, graph in m.policies.items():
        depth = max(len(n.sensors) for n in graph.nodes.values())
        lines.append(f"  {name}: {len(graph.nodes)} nodes, root {graph.root!r}, "
                     f"up to {depth} sensors")
    lines += ["", *point_table(m)]
    default = next(p for p in m.operating_points if p.name == m.default_operating_point)
    lines += ["", f"default policy {default.policy!r} as paths (each node: the sensors it "
                  "adds):", *(f"  {line}" for line in policy_paths(m.policies[default.policy]))]
    if m.split is not None:
        lines += ["", f"split: {m.split.dataset}, seed {m.split.seed}, fractions "
                      f"{', '.join(f'{f:.3f}' for f in m.split.fractions)}, digest "
                      f"{m.split.digest[:16]}"]
    lines += ["", "files (sha256):"]
    lines += [f"  {name:<28}{digest}" for name, digest in sorted(m.files.items())]
    return "\n".join(lines)


def task_line(m: Manifest) -> str:
    """The classes, or for a regression bundle its target and unit."""
    if m.is_regression:
        unit = f" ({m.target_unit})" if m.target_unit else ""
        return f"task: regression, target {m.target or '?'}{unit}, metric mse"
    return f"classes ({len(m.classes)}): {', '.join(m.classes)}"


def hpc_score(m: Manifest) -> str:
    if m.is_regression:
        return f"validation MSE {m.hpc.mse:.4g}, MAE {m.hpc.mae:.4g}"
    return f"validation accuracy {m.hpc.accuracy:.4f}"


def _scores(m: Manifest, p: Any) -> tuple[str, ...]:
    """A point's score columns: accuracy and its interval, or MSE, MAE and paired bound."""
    if m.is_regression:
        bound = "-" if p.paired_lower_bound is None else f"{p.paired_lower_bound:+.4g}"
        return f"{p.mse:.4g}", f"{p.mae:.4g}", bound
    return f"{p.accuracy:.4f}", ("-" if p.accuracy_interval is None else
                                 "[{:.4f}, {:.4f}]".format(*p.accuracy_interval))


def cost_unit(m: Manifest) -> str:
    """What the scalar cost adds up, from the bundle's cost weights: "mJ", or e.g.
    "mJ + 0.05*ms" (1 per mJ plus 0.05 per ms; it read "1/mJ + 0.05/ms", like a rate)."""
    w = m.cost_weights
    terms = [(w.energy_mj, "mJ"), (w.latency_ms, "ms"), (w.money, "money"),
             (w.uniform, "features read")]
    used = [(k, unit) for k, unit in terms if k]
    return " + ".join(unit if k == 1 else f"{k:g}*{unit}" for k, unit in used) or "none"


def point_table(m: Manifest) -> list[str]:
    """The operating points: short label (P1.. by cost), name, policy and metrics, in columns
    two spaces apart, with the cost's unit."""
    from adaptedge.protocol.operating_points import short_labels

    labels = dict(zip([p.name for p in m.operating_points], short_labels(m.operating_points),
                      strict=True))
    unit = cost_unit(m)
    methods = any(p.method for p in m.operating_points)  # auto: which method each came from
    scores = (("MSE", "MAE", "paired bound vs HPC") if m.is_regression
              else ("accuracy", "validation 95% interval"))
    head = ("", "operating point", "policy", *(("method",) if methods else ()), scores[0],
            f"cost ({unit})", "escalate", "sensors read", *scores[1:])
    rows = []
    for p in m.operating_points:
        first, *rest = _scores(m, p)
        rows.append((labels[p.name], p.name + (" *" if p.name == m.default_operating_point
                                               else ""),
                     p.policy, *((p.method or "-",) if methods else ()), first,
                     f"{p.cost:.4g}", f"{p.escalation_rate:.3f}", f"{p.avg_sensors_read:.2f}",
                     *rest))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    left = 4 if methods else 3  # label, name, policy (and method) align left; numbers right

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    metric = "validation MSE and MAE (target units)" if m.is_regression else \
        "validation accuracy"
    return [fmt(head), *map(fmt, rows),
            f"* default operating point; {metric}, mean cost per decision in {unit}"]
