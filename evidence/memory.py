"""What a process's memory is: the one definition every benchmark measures, and the host's.

:func:`process_bytes` is a process's *anonymous resident* memory: its resident set less the
pages backed by files or shared memory (psutil's ``rss - shared``, from ``/proc/PID/statm``;
the kernel's ``RssAnon``). Why this and not the whole resident set (``VmRSS``): file-backed
pages are the libraries and files a process has read, paged in as new code first runs (torch's
and CUDA's libraries page in about 130 MiB over a first offload, TensorRT's more during a first
build); the kernel drops them under pressure and reads them again, so they are not what runs a
machine out of memory, and they would count code as model. Anonymous pages (the heap, tensors,
page-locked buffers) have nowhere to go without swap: that is the memory a compile costs. It
reads one small file, so a sampler in another process can read it every millisecond.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union


def process_bytes(pid: Optional[int] = None) -> int:
    """The anonymous resident memory of process ``pid`` (default: this one), in bytes.

    Raises :class:`psutil.NoSuchProcess` once ``pid`` has exited (how a sampler ends).
    psutil is imported here, not with the module: the docs build reads result files through
    :mod:`evidence.result`, which imports this module, and needs no psutil.
    """
    import psutil

    info = psutil.Process(pid).memory_info()
    return int(info.rss - info.shared)


def read_text(path: Union[str, Path]) -> Optional[str]:
    """A small file of ``/proc`` or ``/sys``, stripped; ``None`` where it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def meminfo_bytes(key: str) -> Optional[int]:
    """A figure of the host's ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``), in bytes."""
    for line in (read_text("/proc/meminfo") or "").splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    return None
