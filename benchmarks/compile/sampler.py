"""The compile benchmark's memory sampler: a process of its own beside the case's.

A thread in the compiling process would see nothing while a builder call holds the GIL, which
is when the memory moves most, so the samples come from another process: the case's memory
(:func:`evidence.memory.process_bytes`, every benchmark's definition) and the GPU's used
memory (NVML, the whole device, as another process on a shared-memory machine would see it),
every ``interval`` seconds, each line
``t host_bytes gpu_bytes`` with ``t`` on the system's monotonic clock (the clock the case's
phase marks use). Where NVML is missing (a machine without a GPU) the GPU column is 0.

Run as ``python -m benchmarks.compile.sampler PID INTERVAL OUT``; it stops at SIGTERM or when
PID exits, and writes OUT under a temporary name, renamed when complete.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Callable, List, Optional, Tuple

import psutil

from evidence import memory


def resident_bytes(pid: int) -> Optional[int]:
    """The memory of ``pid`` in bytes, or ``None`` once it has exited."""
    try:
        return memory.process_bytes(pid)
    except psutil.Error:
        return None


def gpu_used_reader() -> Callable[[], int]:
    """A function returning the first GPU's used bytes (NVML), or 0 without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # no pynvml, no driver, no device: a CPU-only machine
        return lambda: 0
    return lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def sample(pid: int, interval: float, out: Path) -> int:
    """Sample ``pid`` until SIGTERM or its exit; write the samples to ``out``."""
    stopping = False

    def stop(signum: int, frame: Optional[FrameType]) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    gpu_used = gpu_used_reader()
    samples: List[Tuple[float, int, int]] = []
    while not stopping:
        host = resident_bytes(pid)
        if host is None:
            break
        samples.append((time.monotonic(), host, gpu_used()))
        time.sleep(interval)
    temporary = out.with_name(f".{out.name}.partial")
    temporary.write_text("".join(f"{t:.6f} {h} {g}\n" for t, h, g in samples), encoding="ascii")
    os.replace(temporary, out)
    return 0


def read_samples(path: Path) -> List[Tuple[float, int, int]]:
    """The samples a sampler wrote, as ``(t, host_bytes, gpu_bytes)``."""
    rows = (line.split() for line in path.read_text(encoding="ascii").splitlines())
    return [(float(t), int(h), int(g)) for t, h, g in rows]


if __name__ == "__main__":
    sys.exit(sample(int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])))
