"""Scenario files (TOML): the network, its outages, the devices, the energy model and the seed.

Example::

    seed = 7
    [devices]
    count = 3          # devices replaying the split
    rate_hz = 20       # decisions per second per device
    limit = 500        # rows per device (0 = the whole split)
    [network]
    rtt_ms = 40        # median round trip (default: the bundle's link.rtt_ms)
    jitter = 0.3       # sigma of log(rtt)
    loss = 0.01
    bandwidth_kbps = 250
    [[network.outages]]
    start_s = 5
    duration_s = 3
    [energy]
    idle_mw = 1.5
    tx_mj_per_byte = 0.002

Times are seconds from the start of the run: simulated in replay, wall clock in HIL.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from adaptedge.simulator.energy import EnergyConfig
from adaptedge.simulator.errors import ScenarioError as ScenarioError
from adaptedge.simulator.network import NetworkConfig, Outage


@dataclass(frozen=True, slots=True)
class DevicesConfig:
    count: int = 1
    rate_hz: float = 20.0
    limit: int = 0
    """Rows replayed per device; 0 = the whole split."""

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"devices.count must be >= 1, got {self.count}")
        if self.rate_hz <= 0:
            raise ValueError(f"devices.rate_hz must be > 0, got {self.rate_hz}")
        if self.limit < 0:
            raise ValueError(f"devices.limit must be >= 0 (0 = all rows), got {self.limit}")


@dataclass(frozen=True, slots=True)
class Scenario:
    seed: int = 0
    devices: DevicesConfig = field(default_factory=DevicesConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    operating_point: str | None = None
    name: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "operating_point": self.operating_point,
            "devices": {f.name: getattr(self.devices, f.name) for f in fields(DevicesConfig)},
            "network": {
                "rtt_ms": self.network.rtt_ms, "jitter": self.network.jitter,
                "loss": self.network.loss, "bandwidth_kbps": self.network.bandwidth_kbps,
                "outages": [{"start_s": o.start_s, "duration_s": o.duration_s}
                            for o in self.network.outages],
            },
            "energy": {f.name: getattr(self.energy, f.name) for f in fields(EnergyConfig)},
        }


def _table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: [{key}] must be a table")
    return value


def _build(cls: type, values: dict[str, Any], where: str, section: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown} in [{section}]; "
                            f"known keys are {sorted(known)}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}: [{section}] {exc}") from exc


def scenario_from_dict(raw: dict[str, Any], where: str = "scenario") -> Scenario:
    """Build and validate a ``Scenario`` from parsed TOML."""
    known = {"seed", "devices", "network", "energy", "operating_point", "name"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(known)}")
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ScenarioError(f"{where}: seed must be a non-negative integer, got {seed!r}")
    net = dict(_table(raw, "network", where))
    outages_raw = net.pop("outages", [])
    if not isinstance(outages_raw, list):
        raise ScenarioError(f"{where}: network.outages must be an array of tables")
    outages = tuple(_build(Outage, dict(o), where, f"network.outages[{i}]")
                    for i, o in enumerate(outages_raw))
    network = _build(NetworkConfig, {**net, "outages": outages}, where, "network")
    point = raw.get("operating_point")
    if point is not None and not isinstance(point, str):
        raise ScenarioError(f"{where}: operating_point must be a string")
    return Scenario(
        seed=seed,
        devices=_build(DevicesConfig, _table(raw, "devices", where), where, "devices"),
        network=network,
        energy=_build(EnergyConfig, _table(raw, "energy", where), where, "energy"),
        operating_point=point,
        name=str(raw.get("name", Path(where).stem if where != "scenario" else "default")),
    )


SHIPPED_SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def shipped_scenarios() -> list[str]:
    """Names of the scenarios that ship with adaptedge (``ideal``, ``flaky-link``, ...)."""
    return sorted(p.stem for p in SHIPPED_SCENARIOS.glob("*.toml"))


def load_scenario(path: str | Path) -> Scenario:
    """Read a TOML scenario file, or a shipped scenario by name (``flaky-link``);
    ``ScenarioError`` names the file and what is wrong."""
    p = Path(path)
    if not p.exists() and p.name == str(path) and p.suffix in ("", ".toml"):
        shipped = SHIPPED_SCENARIOS / f"{p.stem}.toml"
        if not shipped.is_file():
            raise ScenarioError(f"scenario file {p} does not exist, nor a shipped scenario "
                                f"{p.stem!r}; shipped: {', '.join(shipped_scenarios())}")
        p = shipped
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"scenario file {p} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{p}: not valid TOML ({exc})") from exc
    return scenario_from_dict(raw, str(p))
