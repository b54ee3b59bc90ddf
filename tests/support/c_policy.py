"""Build an exported C policy with a row-replay harness, for the host (gcc, ctypes) and for
QEMU (arm-none-eabi-gcc, semihosting), and run it on rows: one record per decision.

A record: kind, label, sensors read (in order), nodes visited, failed-sensor bits, whether the
link was paid and whether the escalation request held exactly the read sensors' columns, the
five costs (``protocol.costs.COST_COLUMNS`` order: scalar, energy, latency, money, bytes) and
the local probabilities. The harness "reads" a sensor by copying its columns from the row (a
non-finite value fails the read, as ``EdgeRuntime.predict_row`` counts it).
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from adaptedge.edge import Decision

HARNESS = r"""
#include "adaptedge_policy.h"

#define H_INTS (7 + ADAPTEDGE_N_SENSORS + ADAPTEDGE_N_NODES)
#ifndef H_NOW
#define H_NOW() 0u
#endif
static const float *h_row;
unsigned long h_t0, h_t1; /* H_NOW() around the decision itself (firmware: SysTick) */

static int h_read(void *ctx, int s, float *v)
{
    int i, first = adaptedge_sensor_first[s];
    (void)ctx;
    for (i = first; i < adaptedge_sensor_first[s + 1]; i++)
        v[i - first] = h_row[adaptedge_sensor_columns[i]];
    return 0;
}

static int h_request_ok(const adaptedge_decision *d, const float *row)
{
    int s, i, c, want[ADAPTEDGE_N_FEATURES];
    for (c = 0; c < ADAPTEDGE_N_FEATURES; c++) want[c] = 0;
    for (s = 0; s < ADAPTEDGE_N_SENSORS; s++)
        if (d->sensors_read >> s & 1u)
            for (i = adaptedge_sensor_first[s]; i < adaptedge_sensor_first[s + 1]; i++)
                want[adaptedge_sensor_columns[i]] = 1;
    for (c = 0; c < ADAPTEDGE_N_FEATURES; c++) {
        int bit = d->feature_mask[c / 8] >> (c % 8) & 1;
        if (bit != want[c] || (bit && d->features[c] != row[c])) return 0;
    }
    return 1;
}

int h_width(void) { return H_INTS; }

void h_decide(const float *row, int link_up, long *ints, double *cost, float *probs)
{
    adaptedge_decision d;
    int i;
    h_row = row;
    h_t0 = H_NOW();
    adaptedge_decide(h_read, 0, link_up, &d);
    h_t1 = H_NOW();
    ints[0] = d.kind; ints[1] = d.label; ints[2] = d.n_read; ints[3] = d.n_nodes;
    ints[4] = (long)d.sensors_failed; ints[5] = d.link_paid;
    ints[6] = d.kind != ADAPTEDGE_ESCALATE || h_request_ok(&d, row);
    for (i = 0; i < ADAPTEDGE_N_SENSORS; i++) ints[7 + i] = i < d.n_read ? d.read_order[i] : -1;
    for (i = 0; i < ADAPTEDGE_N_NODES; i++)
        ints[7 + ADAPTEDGE_N_SENSORS + i] = i < d.n_nodes ? d.nodes[i] : -1;
    cost[0] = d.cost.scalar; cost[1] = d.cost.energy_mj; cost[2] = d.cost.latency_ms;
    cost[3] = d.cost.money; cost[4] = (double)d.cost.bytes;
    for (i = 0; i < ADAPTEDGE_N_CLASSES; i++) probs[i] = d.probabilities[i];
}

void h_run(const float *rows, long n, int link_up, long *ints, double *cost, float *probs)
{
    long r;
    for (r = 0; r < n; r++)
        h_decide(rows + r * ADAPTEDGE_N_FEATURES, link_up, ints + r * H_INTS, cost + r * 5,
                 probs + r * ADAPTEDGE_N_CLASSES);
}
"""

CFLAGS = ("-std=c99", "-pedantic", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror")


@dataclass
class Records:
    """Per-row outcomes of the C library."""

    ints: npt.NDArray[np.int64]
    cost: npt.NDArray[np.float64]
    probabilities: npt.NDArray[np.float32]
    n_sensors: int

    @property
    def kind(self) -> npt.NDArray[np.int64]:
        return self.ints[:, 0]

    @property
    def label(self) -> npt.NDArray[np.int64]:
        return self.ints[:, 1]

    def read_order(self, row: int) -> list[int]:
        return [int(s) for s in self.ints[row, 7:7 + int(self.ints[row, 2])]]

    def nodes(self, row: int) -> list[int]:
        at = 7 + self.n_sensors
        return [int(k) for k in self.ints[row, at:at + int(self.ints[row, 3])]]


def gcc_available() -> bool:
    return shutil.which("gcc") is not None


def compile_c(command: list[str]) -> None:
    """Run a compiler; its errors become the assertion's message."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stderr[-4000:]}"


def build_host(lib_dir: Path, out: Path) -> ctypes.CDLL:
    """Compile the library and the harness into a shared object and load it."""
    (lib_dir / "harness.c").write_text(HARNESS)
    so = out / "policy.so"
    compile_c(["gcc", *CFLAGS, "-shared", "-fPIC", "-I", str(lib_dir),
               str(lib_dir / "adaptedge_policy.c"), str(lib_dir / "harness.c"), "-o", str(so),
               "-lm"])
    return ctypes.CDLL(str(so))


def run_host(lib: ctypes.CDLL, X: npt.ArrayLike, n_sensors: int, n_classes: int,
             link_up: bool) -> Records:
    """Every row of ``X`` through the compiled library."""
    rows = np.ascontiguousarray(X, dtype=np.float32)
    n = rows.shape[0]
    width = int(lib.h_width())
    ints = np.zeros((n, width), dtype=np.int64)
    cost = np.zeros((n, 5), dtype=np.float64)
    probs = np.zeros((n, n_classes), dtype=np.float32)
    ptr = np.ctypeslib.as_ctypes
    lib.h_run(ptr(rows.reshape(-1)), ctypes.c_long(n), ctypes.c_int(int(link_up)),
              ptr(ints.reshape(-1)), ptr(cost.reshape(-1)), ptr(probs.reshape(-1)))
    return Records(ints, cost, probs, n_sensors)


KIND_OF_SOURCE = {"local": 0, "cloud": 1, "degraded": 2}


def mismatches(bundle: Path, point: str, X: npt.ArrayLike, records: Records,
               link_up: bool) -> list[str]:
    """Rows where the C library decided otherwise than ``EdgeRuntime.predict_row`` (with an
    uplink answering from the bundle's HPC when ``link_up``, else none): one line each."""
    from adaptedge.protocol.bundle import read_manifest

    manifest = read_manifest(bundle)
    sensors = [s.name for s in manifest.sensors]
    nodes = list(manifest.policies[manifest.operating_point(point).policy].nodes)
    rows = np.ascontiguousarray(X, dtype=np.float32)
    out = []
    for i, d in enumerate(runtime_decisions(str(bundle), point, rows.tobytes(), rows.shape,
                                            link_up)):
        got = {"kind": int(records.kind[i]),
               "read": [sensors[s] for s in records.read_order(i)],
               "nodes": [nodes[k] for k in records.nodes(i)],
               "link": bool(records.ints[i, 5]), "request": bool(records.ints[i, 6]),
               "cost": [float(v) for v in records.cost[i]]}
        kind = 1 if d.escalated else (2 if d.source == "degraded" else 0)
        want = {"kind": kind, "read": list(d.sensors_read), "nodes": list(d.nodes),
                "link": d.cost.bytes > 0 and d.escalated, "request": True,
                "cost": [d.cost.scalar, d.cost.energy_mj, d.cost.latency_ms, d.cost.money,
                         float(d.cost.bytes)]}
        if not d.escalated:
            got["label"], want["label"] = int(records.label[i]), d.label_index
        same_cost = np.allclose(got.pop("cost"), want.pop("cost"), rtol=1e-12, atol=0.0)
        proba_ok = d.escalated or np.allclose(records.probabilities[i], d.probabilities,
                                              rtol=0.0, atol=1e-6)
        if got != want or not same_cost or not proba_ok:
            out.append(f"row {i}: C {got} cost {records.cost[i].tolist()}; runtime {want} "
                       f"cost {d.cost}")
    return out


@functools.lru_cache(maxsize=8)
def runtime_decisions(bundle: str, point: str, rows: bytes, shape: tuple[int, ...],
                      link_up: bool) -> tuple[Decision, ...]:
    """``EdgeRuntime.predict_row`` on every row (float32 bytes of ``shape``), with the HPC
    answering escalations when ``link_up``: computed once per bundle, point, rows and link for
    the targets that replay the same rows (Cortex-M4F and M0+ under QEMU)."""
    from adaptedge.edge import EdgeRuntime
    from adaptedge.protocol.bundle import read_manifest
    from tests.support.edge_doubles import HpcUplink
    from tests.support.reference_walk import ReferenceWalk

    uplink = HpcUplink(ReferenceWalk(Path(bundle), read_manifest(Path(bundle)))) \
        if link_up else None
    X = np.frombuffer(rows, dtype=np.float32).reshape(shape)
    with EdgeRuntime.load(Path(bundle), operating_point=point, uplink=uplink) as rt:
        return tuple(rt.predict_row(row) for row in X)
