"""The ``adaptedge`` command. Each subcommand lives in its own module with ``register(subparsers)``.

Command modules import heavy libraries (scikit-learn, matplotlib) inside their handlers only,
so ``adaptedge edge run`` and ``adaptedge cloud serve`` stay as light as the device install.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from adaptedge.cli.errors import CommandError
from adaptedge.protocol.errors import AdaptedgeError

__all__ = ["CommandError", "build_parser", "main"]

# Every subcommand module, in --help order.
COMMAND_MODULES = (
    "demo",
    "train",
    "evaluate",
    "inspect_cmd",
    "keys_cmd",
    "sign_cmd",
    "export_cmd",
    "edge_cmd",
    "cloud_cmd",
    "fleet_cmd",
    "simulate",
    "cache_cmd",
    "recalibrate_cmd",
)


# Libraries of the optional extras (pyproject.toml) -> the extra that installs them.
EXTRA_OF_MODULE = {
    "sklearn": "train", "skl2onnx": "train", "onnx": "train", "scipy": "train",
    "joblib": "train", "threadpoolctl": "train", "tqdm": "train", "google": "train",
    "matplotlib": "sim", "amqtt": "broker", "sqlalchemy": "fleet", "prometheus_client": "fleet",
    "psycopg": "fleet", "nats": "nats", "lightgbm": "train",
}


def missing_extra(exc: ModuleNotFoundError, command: str | None) -> str | None:
    """One line naming the extra to install, when ``exc`` is a library of one; else None."""
    module = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return (f"adaptedge {command or ''} needs {module}, which is not installed: "
            f"pip install 'adaptedge[{extra}]'")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("adaptedge")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptedge",
        description="Budgeted prediction at the edge: train gated low-cost models and sensor "
        "policies, export ONNX bundles, run them on devices with MQTT escalation to a cloud HPC.",
    )
    parser.add_argument("--version", action="version", version=f"adaptedge {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"adaptedge.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"adaptedge.cli.{name}":
                continue  # that subcommand is not part of this build
            raise
        module.register(sub)
    return parser


def one_line(exc: BaseException) -> str:
    """``exc``'s message as one line (its own lines joined), for ``adaptedge: error: ...``."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or \
        type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every ``AdaptedgeError`` (any package's family, the command line's
    ``CommandError`` too) and a missing file end as one line on stderr and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    try:
        return int(args.handler(args) or 0)
    except (AdaptedgeError, FileNotFoundError) as exc:
        print(f"adaptedge: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        message = missing_extra(exc, getattr(args, "command", None))
        if message is None:
            raise
        print(f"adaptedge: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``adaptedge inspect B | head``): stop quietly, as cat does.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("adaptedge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
