"""The one registry of what the benchmarks compare: offload strategies and host-heap cases.

Host memory traffic per moved byte (``OffloadStrategy.traffic``): a path that bounces through
page-locked memory (the fork's fast path, and the driver's own staging behind ``tensor.to``)
costs four bytes of traffic for each byte it moves: the DMA writes the bounce chunk, the CPU
reads it, the kernel zeroes each fresh page of the destination as it is faulted in, and the
CPU writes the destination. DMA straight into the (page-locked) destination costs two: the
zeroing and the DMA's write. The host's memory bandwidth divided by that count is the highest
offload speed its memory allows the strategy (a model: a chunk that stays in the CPU's cache
costs less, and a CPU write that reads its line first costs more).

The runners run them by name and write their labels and descriptions into each result file,
so that the tables and plots need nothing from here; a new strategy is one entry in
:data:`OFFLOAD_STRATEGIES` (or :data:`HOST_HEAP_CASES`). Importing this module imports neither torch nor the overlay: a
strategy's ``prepare`` does, in the process of the case it runs.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Dict, Tuple

MiB = 1024 * 1024
GiB = 1024 * MiB

# The overlay's switch of its fast path (the overlay's PINNED_BOUNCE_ENV_VAR).
FAST_PATH_SWITCH = "TORCHTRT_OFFLOAD_PINNED_BOUNCE"

Move = Callable[[Any], None]


@dataclass(frozen=True)
class OffloadStrategy:
    """One way of moving a module from the GPU to the CPU.

    ``prepare`` receives the overlay module, sets up this process for the strategy (an
    environment switch, a stand-in runtime) and returns the move. ``thp_never`` turns
    transparent huge pages off for the case's process first (``prctl(PR_SET_THP_DISABLE)``, as
    ``never`` in ``/sys/kernel/mm/transparent_hugepage`` does for every process).
    ``headline`` strategies are the README's columns, in this registry's order. ``traffic``
    is the bytes of host memory traffic one moved byte costs (module docstring), from which
    the runner draws the highest speed the host's memory allows the strategy.
    """

    name: str
    label: str
    description: str
    prepare: Callable[[ModuleType], Move]
    headline: bool = False
    thp_never: bool = False
    traffic: int = 4


def _module_to(overlay: ModuleType) -> Move:
    import torch

    def move(module: Any) -> None:
        module.to("cpu")
        torch.cuda.empty_cache()

    return move


def _fork(step: int = -1, fast_path: bool = True) -> Callable[[ModuleType], Move]:
    """The fork's ``deallocate_module``, at its default step (``-1``) or at ``step`` bytes."""

    def prepare(overlay: ModuleType) -> Move:
        os.environ[FAST_PATH_SWITCH] = "1" if fast_path else "0"
        if step < 0:
            return overlay.deallocate_module  # type: ignore[no-any-return]
        return lambda module: overlay.deallocate_module(module, release_every_bytes=step)

    return prepare


def _fork_lock_refused(overlay: ModuleType) -> Move:
    """The fork where every ``cudaHostRegister`` fails, as where page-locking is refused."""
    import torch

    real = torch.cuda.cudart()

    class RefusingRuntime:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def cudaHostRegister(self, *args: Any) -> int:
            return 2  # cudaErrorMemoryAllocation

    torch.cuda.cudart = RefusingRuntime  # type: ignore[assignment]
    return _fork()(overlay)


OFFLOAD_STRATEGIES: Tuple[OffloadStrategy, ...] = (
    OffloadStrategy(
        "upstream",
        "`module.to`",
        '`module.to("cpu")` then `torch.cuda.empty_cache()`: what releases up to 2.14 do',
        _module_to,
        headline=True,
    ),
    OffloadStrategy(
        "step-1GiB-plain",
        "1 GiB-step plain move",
        "the fork's `deallocate_module` with `release_every_bytes=1 GiB` and the fast path off: "
        "the release schedule of upstream main's fix, not upstream's code",
        _fork(step=GiB, fast_path=False),
        headline=True,
    ),
    OffloadStrategy(
        "fork",
        "this fork",
        "the fork's `deallocate_module` as users get it (fast path on, default step)",
        _fork(),
        headline=True,
    ),
    OffloadStrategy(
        "fork-plain",
        "fork, fast path off",
        "the fork's `deallocate_module` with TORCHTRT_OFFLOAD_PINNED_BOUNCE=0 (`tensor.to`)",
        _fork(fast_path=False),
    ),
    OffloadStrategy(
        "fork-lock-fails",
        "fork, page-locking refused",
        "the fork where every `cudaHostRegister` fails (it falls back to `tensor.to`)",
        _fork_lock_refused,
    ),
    OffloadStrategy(
        "fork-thp-never",
        "fork, THP never",
        "the fork with transparent huge pages off for the process",
        _fork(),
        thp_never=True,
    ),
    OffloadStrategy(
        "fork-plain-thp-never",
        "fork, fast path off, THP never",
        "the fork's plain path with transparent huge pages off for the process",
        _fork(fast_path=False),
        thp_never=True,
    ),
)

OFFLOAD_BY_NAME: Dict[str, OffloadStrategy] = {s.name: s for s in OFFLOAD_STRATEGIES}


def disable_huge_pages_for_this_process() -> None:
    """Transparent huge pages off for this process, as ``never`` would set them for all."""
    pr_set_thp_disable = 41
    if ctypes.CDLL(None).prctl(pr_set_thp_disable, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_THP_DISABLE) failed")


@dataclass(frozen=True)
class HostHeapCase:
    """One way of running the host-heap burst: an environment, and whether the fork trims.

    ``headline`` cases are the README's rows, in this registry's order, with ``label``.
    """

    name: str
    label: str
    description: str
    env: Dict[str, str] = field(default_factory=dict)
    fork_trim: bool = False
    jemalloc: bool = False
    headline: bool = False


HOST_HEAP_CASES: Tuple[HostHeapCase, ...] = (
    HostHeapCase(
        "upstream",
        "upstream releases (no trim)",
        "glibc defaults, no trim (upstream's default)",
        headline=True,
    ),
    HostHeapCase(
        "fork",
        "this fork (`trim_host_heap`)",
        "glibc defaults, the fork's trim_host_heap() after each burst",
        fork_trim=True,
        headline=True,
    ),
    HostHeapCase(
        "trim_threshold",
        "`MALLOC_TRIM_THRESHOLD_`",
        "MALLOC_TRIM_THRESHOLD_=131072 (glibc's default value; setting it fixes the thresholds)",
        env={"MALLOC_TRIM_THRESHOLD_": "131072"},
    ),
    HostHeapCase(
        "mmap_threshold",
        "closest peer: `MALLOC_MMAP_THRESHOLD_`",
        "MALLOC_MMAP_THRESHOLD_=131072 (glibc's default value; setting it fixes the thresholds)",
        env={"MALLOC_MMAP_THRESHOLD_": "131072"},
        headline=True,
    ),
    HostHeapCase(
        "tunables_mmap",
        "`GLIBC_TUNABLES` mmap threshold",
        "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 (the tunable form of the above)",
        env={"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072"},
    ),
    HostHeapCase(
        "arena_max_1",
        "`MALLOC_ARENA_MAX=1`",
        "MALLOC_ARENA_MAX=1: every thread shares the brk heap",
        env={"MALLOC_ARENA_MAX": "1"},
    ),
    HostHeapCase(
        "jemalloc",
        "jemalloc",
        "jemalloc 5 via LD_PRELOAD, its default settings",
        jemalloc=True,
    ),
    HostHeapCase(
        "jemalloc_decay0",
        "jemalloc, decay 0",
        "jemalloc via LD_PRELOAD, MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 (purge at once)",
        env={"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"},
        jemalloc=True,
    ),
)

HOST_HEAP_BY_NAME: Dict[str, HostHeapCase] = {case.name: case for case in HOST_HEAP_CASES}
