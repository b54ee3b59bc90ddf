"""``adaptedge fleet``: commands about a fleet of devices (here: over-the-air rollouts).

Minimal on this branch: the group and the rollout commands of ``fleet_rollout``.
"""

from __future__ import annotations

from typing import Any

from adaptedge.cli.fleet_rollout import register_rollout


def register(sub: Any) -> None:
    p = sub.add_parser("fleet", help="manage a fleet of devices: over-the-air rollouts")
    fleet_sub = p.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    register_rollout(fleet_sub)
