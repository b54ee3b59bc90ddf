"""The exported C policy on a bare Cortex-M under QEMU with semihosting: build the replay
firmware (``mcu_replay.c``, the board files of ``docs/examples/firmware/board``), run rows
through it, and read back the records, per-decision SysTick ticks, the calibration and the
stack used. Instruction counts come from ``-icount shift=0`` (one virtual ns per instruction)
and a calibration loop of known length (TOOLCHAIN notes: not cycles)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tests.support.c_policy import CFLAGS, HARNESS, Records, compile_c

ROOT = Path(__file__).resolve().parents[2]
BOARD = ROOT / "docs" / "examples" / "firmware" / "board"
REPLAY = Path(__file__).with_name("mcu_replay.c")


@dataclass(frozen=True)
class Target:
    name: str
    machine: str
    cpu_flags: tuple[str, ...]
    linker_script: str


TARGETS = {
    "cortex-m4f": Target("cortex-m4f", "mps2-an386",
                         ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
                         "mps2-an386.ld"),
    "cortex-m0plus": Target("cortex-m0plus", "microbit",
                            ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
                            "microbit.ld"),
}
MCU_FLAGS = ("-Os", "-ffunction-sections", "-fdata-sections")


def toolchain_missing() -> str | None:
    """Why the QEMU tests cannot run here, or None."""
    missing = [tool for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm")
               if shutil.which(tool) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (apt-get install gcc-arm-none-eabi "
                "libnewlib-arm-none-eabi qemu-system-arm)")
    return None


@dataclass
class Firmware:
    elf: Path
    target: Target
    flash_bytes: int
    """text + data of the whole image (policy, libm/libgcc it pulls in, harness, startup)."""
    static_ram_bytes: int
    library_flash_bytes: int
    """text + data of the policy's own object file."""


def _size(path: Path) -> tuple[int, int, int]:
    out = subprocess.run(["arm-none-eabi-size", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1].split()
    text, data, bss = (int(v) for v in out[:3])
    return text, data, bss


def build_firmware(lib_dir: Path, target_name: str, out: Path) -> Firmware:
    """Compile the library, the harness and the replay main for ``target_name``."""
    target = TARGETS[target_name]
    out.mkdir(parents=True, exist_ok=True)
    (out / "harness.c").write_text('#include "semihost.h"\n#define H_NOW() ticks_now()\n'
                                   + HARNESS)
    flags = [*CFLAGS, *MCU_FLAGS, *target.cpu_flags]
    flags = [f for f in flags if f != "-O2"]
    obj = out / "adaptedge_policy.o"
    compile_c(["arm-none-eabi-gcc", *flags, "-c", "-I", str(lib_dir),
               str(lib_dir / "adaptedge_policy.c"), "-o", str(obj)])
    elf = out / "replay.elf"
    board_flags = [f for f in flags if f != "-pedantic"]  # start-up casts the stack address
    compile_c(["arm-none-eabi-gcc", *board_flags, "-nostartfiles", "--specs=nano.specs",
               "--specs=nosys.specs", "-Wl,--gc-sections", "-T", str(BOARD / target.linker_script),
               "-I", str(lib_dir), "-I", str(BOARD), str(obj), str(out / "harness.c"),
               str(REPLAY), str(BOARD / "startup.c"), str(BOARD / "semihost.c"), "-o", str(elf),
               "-lm"])
    text, data, bss = _size(elf)
    lib_text, lib_data, _ = _size(obj)
    return Firmware(elf, target, text + data, data + bss, lib_text + lib_data)


@dataclass
class QemuRun:
    records: Records
    ticks: npt.NDArray[np.uint32]
    instructions_per_tick: float
    stack_bytes: int

    @property
    def instructions_per_decision(self) -> float:
        return float(self.ticks.mean()) * self.instructions_per_tick


def run_qemu(fw: Firmware, X: npt.ArrayLike, n_sensors: int, n_nodes: int, n_classes: int,
             link_up: bool, workdir: Path, timeout_s: float = 1800.0) -> QemuRun:
    """Every row of ``X`` through the firmware under QEMU."""
    rows = np.ascontiguousarray(X, dtype=np.float32)
    workdir.mkdir(parents=True, exist_ok=True)
    head = np.array([len(rows), int(link_up)], dtype=np.int32)
    (workdir / "rows.bin").write_bytes(head.tobytes() + rows.tobytes())
    done = subprocess.run(
        ["qemu-system-arm", "-M", fw.target.machine, "-nographic", "-monitor", "none",
         "-serial", "none", "-semihosting-config", "enable=on,target=native", "-icount",
         "shift=0", "-kernel", str(fw.elf)],
        cwd=workdir, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, f"QEMU {fw.target.machine} failed: {done.stdout}{done.stderr}"
    width = 7 + n_sensors + n_nodes
    record = np.dtype([("ints", np.int32, width), ("cost", np.float64, 5),
                       ("probs", np.float32, n_classes), ("ticks", np.uint32)])
    data = (workdir / "out.bin").read_bytes()
    body = np.frombuffer(data[:record.itemsize * len(rows)], dtype=record)
    calib_ticks, calib_instructions, stack = np.frombuffer(data[record.itemsize * len(rows):],
                                                           dtype=np.uint32)
    records = Records(body["ints"].astype(np.int64), body["cost"].copy(), body["probs"].copy(),
                      n_sensors)
    return QemuRun(records, body["ticks"].copy(), float(calib_instructions) / float(calib_ticks),
                   int(stack))
