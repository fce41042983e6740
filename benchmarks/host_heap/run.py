"""Host-heap benchmark: how much of a builder-like burst of freed memory stays resident.

A TensorRT engine build allocates gigabytes in blocks of a few MiB from several threads and
frees them at the end; with glibc's raised mmap threshold they come from the threads' heap
arenas, and after the build they stay resident. This compares the fork's ``trim_host_heap()``
with upstream's default (no trim) and the usual allocator settings (:data:`CASES`), each case
in a fresh process. ``README.md`` next to this file says what one run does. From the
repository's root::

    python -m benchmarks run host-heap
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import importlib.util
import logging
import os
import platform
import random
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks import harness
from evidence import RESULTS, memory, result
from evidence.result import Measure

logger = logging.getLogger("host_heap")

DEFAULT_OUTPUT = RESULTS / "host_heap.json"

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# glibc's ceiling for the dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_MAX = 32 * MiB
# A free of an mmapped chunk raises the threshold to the chunk's size only when that size is at
# most MMAP_THRESHOLD_MAX; the chunk is the request plus a header, rounded up to a page. This
# request gives a chunk of 32 MiB - 4 KiB, so the threshold ends at (almost exactly) 32 MiB.
THRESHOLD_RAISING_BYTES = MMAP_THRESHOLD_MAX - 2 * 4096

JEMALLOC_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/lib/libjemalloc.so.2",
)

# glibc's mallopt parameter M_TRIM_THRESHOLD, and HEAP_MAX_SIZE on 64-bit: a thread arena's heaps
# are mappings of at most this size, aligned to it (2 * DEFAULT_MMAP_THRESHOLD_MAX).
M_TRIM_THRESHOLD = -1
THREAD_HEAP_BYTES = 64 * MiB

# Variables that change the allocator; cleared from every case's environment first so that
# the caller's own settings cannot leak into a case.
ALLOCATOR_VARIABLES = (
    "LD_PRELOAD",
    "GLIBC_TUNABLES",
    "MALLOC_ARENA_MAX",
    "MALLOC_ARENA_TEST",
    "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_CONF",
    "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM",
)


@dataclass(frozen=True)
class Case:
    """One way of running the burst: an environment, and whether the fork trims.
    ``headline`` cases are the README's rows."""

    name: str
    label: str
    description: str
    env: Dict[str, str] = field(default_factory=dict)
    fork_trim: bool = False
    jemalloc: bool = False
    headline: bool = False


FIXED = "(glibc's default value; setting it fixes the thresholds)"
CASES: Tuple[Case, ...] = (
    Case(
        "upstream",
        "upstream releases (no trim)",
        "glibc defaults, no trim (upstream's default)",
        headline=True,
    ),
    Case(
        "fork",
        "this fork (`trim_host_heap`)",
        "glibc defaults, the fork's trim_host_heap() after each burst",
        fork_trim=True,
        headline=True,
    ),
    Case(
        "trim_threshold",
        "`MALLOC_TRIM_THRESHOLD_`",
        f"MALLOC_TRIM_THRESHOLD_=131072 {FIXED}",
        env={"MALLOC_TRIM_THRESHOLD_": "131072"},
    ),
    Case(
        "mmap_threshold",
        "closest peer: `MALLOC_MMAP_THRESHOLD_`",
        f"MALLOC_MMAP_THRESHOLD_=131072 {FIXED}",
        env={"MALLOC_MMAP_THRESHOLD_": "131072"},
        headline=True,
    ),
    Case(
        "tunables_mmap",
        "`GLIBC_TUNABLES` mmap threshold",
        "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 (the tunable form of the above)",
        env={"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072"},
    ),
    Case(
        "arena_max_1",
        "`MALLOC_ARENA_MAX=1`",
        "MALLOC_ARENA_MAX=1: every thread shares the brk heap",
        env={"MALLOC_ARENA_MAX": "1"},
    ),
    Case("jemalloc", "jemalloc", "jemalloc 5 via LD_PRELOAD, its default settings", jemalloc=True),
    Case(
        "jemalloc_decay0",
        "jemalloc, decay 0",
        "jemalloc via LD_PRELOAD, MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 (purge at once)",
        env={"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"},
        jemalloc=True,
    ),
)
CASES_BY_NAME = {case.name: case for case in CASES}


# ---------------------------------------------------------------------------------------------
# Worker: runs in a fresh process, one case, one repeat.
# ---------------------------------------------------------------------------------------------


MALLINFO2_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``: its ``hblkhd`` shows whether the blocks were mmapped."""

    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO2_FIELDS.split()]


class _Libc:
    """``malloc``/``free``/``memset`` from the process's global symbol scope.

    ``ctypes.CDLL("libc.so.6").malloc`` would be glibc's own ``malloc`` even under
    ``LD_PRELOAD=libjemalloc.so.2``, because a lookup through a library's handle starts at that
    library. ``CDLL(None)`` looks in the global scope, where a preloaded allocator comes first,
    as it does for TensorRT. ctypes releases the GIL during each call, so every thread
    allocates in its own arena, concurrently.
    """

    def __init__(self) -> None:
        scope = ctypes.CDLL(None)
        self.malloc = scope.malloc
        self.malloc.argtypes = [ctypes.c_size_t]
        self.malloc.restype = ctypes.c_void_p
        self.free = scope.free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None
        self.memset = scope.memset
        self.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        self.memset.restype = ctypes.c_void_p
        self.mallctl: Optional[Any] = getattr(scope, "mallctl", None)
        self.mallinfo2: Optional[Any] = None
        self.malloc_info: Optional[Any] = None
        self.mallopt: Optional[Any] = None
        if self.mallctl is None:
            mallinfo2 = getattr(scope, "mallinfo2", None)
            if mallinfo2 is not None:
                mallinfo2.argtypes = []
                mallinfo2.restype = _MallInfo2
                self.mallinfo2 = mallinfo2
            self.malloc_info = getattr(scope, "malloc_info", None)
            self.mallopt = getattr(scope, "mallopt", None)
        if self.malloc_info is not None:
            self.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
            self.open_memstream = scope.open_memstream
            self.open_memstream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            self.open_memstream.restype = ctypes.c_void_p
            self.fclose = scope.fclose
            self.fclose.argtypes = [ctypes.c_void_p]
        if self.mallopt is not None:
            self.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            self.mallopt.restype = ctypes.c_int

    def raise_mmap_threshold(self) -> None:
        """Raise glibc's dynamic mmap threshold as a builder's first large free does."""
        pointer = self.malloc(THRESHOLD_RAISING_BYTES)
        self.memset(pointer, 0, THRESHOLD_RAISING_BYTES)
        self.free(pointer)

    def fix_trim_threshold(self, nbytes: int) -> None:
        """``mallopt(M_TRIM_THRESHOLD, nbytes)``: the thresholds stay where they are."""
        if self.mallopt is None or self.mallopt(M_TRIM_THRESHOLD, nbytes) != 1:
            raise harness.BenchmarkError("mallopt(M_TRIM_THRESHOLD) is not available here")

    def allocator(self) -> str:
        """Which allocator serves ``malloc``: jemalloc's version string, or glibc's."""
        if self.mallctl is not None:
            version = ctypes.c_char_p()
            size = ctypes.c_size_t(ctypes.sizeof(version))
            rc = self.mallctl(b"version", ctypes.byref(version), ctypes.byref(size), None, 0)
            if rc == 0 and version.value:
                return "jemalloc " + version.value.decode()
            return "jemalloc (version unknown)"
        return "glibc " + platform.libc_ver()[1]

    def arena_top_bytes(self) -> Optional[List[int]]:
        """The size of each glibc arena's top chunk, main arena first (``None`` elsewhere).

        Read from ``malloc_info``'s report: an arena's ``rest`` total is its top chunk plus its
        free chunks in bins, each bin listed in the arena's ``sizes``. ``malloc_trim(0)`` hands
        back the whole pages of free chunks in every arena, but shrinks only the main arena's
        top; a thread arena's top stays as it is.
        """
        if self.malloc_info is None:
            return None
        buffer, size = ctypes.c_char_p(), ctypes.c_size_t()
        stream = self.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
        self.malloc_info(0, stream)
        self.fclose(stream)
        report = ctypes.string_at(buffer, size.value).decode("ascii")
        self.free(buffer)
        tops = []
        for arena in re.findall(r'<heap nr="\d+">(.*?)</heap>', report, re.S):
            rest = re.search(r'<total type="rest" count="\d+" size="(\d+)"', arena)
            binned = re.findall(r'<(?:size|unsorted) from="\d+" to="\d+" total="(\d+)"', arena)
            fast = re.search(r'<total type="fast" count="\d+" size="(\d+)"', arena)
            if rest is None or fast is None:
                return None
            # The sizes list fast bins too, which "rest" leaves out.
            tops.append(int(rest.group(1)) - sum(map(int, binned)) + int(fast.group(1)))
        return tops

    def mmapped_bytes(self) -> Optional[int]:
        """Bytes glibc holds in mmapped chunks (``None`` under another allocator)."""
        if self.mallinfo2 is None:
            return None
        return int(self.mallinfo2().hblkhd)


def _thread_heap_rss() -> int:
    """Resident bytes of glibc's thread-arena heaps: anonymous mappings aligned to their size.

    glibc maps each heap of a thread arena at an address aligned to ``THREAD_HEAP_BYTES``, and
    never larger; other anonymous mappings (the main arena, mmapped chunks, Python's) are
    rarely so aligned, so this is a close estimate of what the thread arenas hold.
    """
    total, in_heap = 0, False
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                start, end = (int(address, 16) for address in fields[0].split("-"))
                anonymous = len(fields) == 5
                in_heap = anonymous and start % THREAD_HEAP_BYTES == 0
                in_heap = in_heap and end - start <= THREAD_HEAP_BYTES
            elif in_heap and fields[0] == "Rss:":
                total += int(fields[1]) * KiB
    return total


def _block_sizes(seed: int, share: int, min_bytes: int, max_bytes: int) -> List[int]:
    """Sizes of one thread's big blocks: uniform in [min, max] until ``share`` bytes.

    The same seed gives the same sizes in every case and repeat, so the cases differ only in
    the allocator's behaviour.
    """
    rng = random.Random(seed)
    sizes: List[int] = []
    total = 0
    while total < share:
        size = rng.randint(min_bytes, max_bytes)
        sizes.append(size)
        total += size
    return sizes


def _load_fork_trim() -> Callable[[], None]:
    """The fork's ``trim_host_heap``, from the overlay file (it needs torch, not TensorRT)."""
    trim: Callable[[], None] = harness.load_overlay().trim_host_heap
    return trim


def _run_round(
    libc: _Libc, sizes_per_thread: Sequence[Sequence[int]], small_bytes: int, live: List[int]
) -> Dict[str, Any]:
    """One burst: every thread allocates and touches its blocks, all are held, all are freed.

    After each big block a thread allocates a small block that stays allocated (``live``), as
    the builder's long-lived small objects do; it sits above the big block in the arena, so the
    arena's top cannot shrink when the big blocks go. The peak is read while every block is
    held; the times of the allocation and of the free exclude that reading.
    """
    threads_count = len(sizes_per_thread)
    allocated = threading.Barrier(threads_count + 1)
    go_free = threading.Barrier(threads_count + 1)
    errors: List[BaseException] = []
    lock = threading.Lock()

    def thread_body(sizes: Sequence[int]) -> None:
        big: List[int] = []
        small: List[int] = []
        try:
            for size in sizes:
                pointer = libc.malloc(size)
                if not pointer:
                    raise MemoryError(f"malloc({size}) returned NULL")
                libc.memset(pointer, 0x5A, size)
                big.append(pointer)
                keep = libc.malloc(small_bytes)
                if not keep:
                    raise MemoryError(f"malloc({small_bytes}) returned NULL")
                libc.memset(keep, 0xA5, small_bytes)
                small.append(keep)
            allocated.wait()
            go_free.wait()
            for pointer in big:
                libc.free(pointer)
        except BaseException as error:  # reported by the main thread
            with lock:
                errors.append(error)
            allocated.abort()
            go_free.abort()
        finally:
            with lock:
                live.extend(small)

    workers = [threading.Thread(target=thread_body, args=(sizes,)) for sizes in sizes_per_thread]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    try:
        allocated.wait()
        allocated_at = time.perf_counter()
        peak = memory.process_bytes()
        mmapped = libc.mmapped_bytes()
        free_start = time.perf_counter()
        go_free.wait()
    except threading.BrokenBarrierError:
        for worker in workers:
            worker.join()
        raise harness.BenchmarkError(f"the burst failed: {errors[0] if errors else 'unknown'}")
    for worker in workers:
        worker.join()
    free_end = time.perf_counter()
    if errors:
        raise harness.BenchmarkError(f"the burst failed: {errors[0]}")
    alloc_s = allocated_at - start
    free_s = free_end - free_start
    return {
        "alloc_s": alloc_s,
        "free_s": free_s,
        "burst_s": alloc_s + free_s,
        "rss_peak": peak,
        "glibc_mmapped_at_peak": mmapped,
        "rss_after_free": memory.process_bytes(),
    }


def _seconds_per_gib(seconds: Optional[float], trimmed_bytes: int) -> Optional[float]:
    """Trim time per GiB handed back; ``None`` without a trim or when nothing came back."""
    if seconds is None or trimmed_bytes <= 0:
        return None
    return seconds / (trimmed_bytes / GiB)


def run_worker(args: argparse.Namespace) -> Dict[str, Any]:
    """Run one case once in this (fresh) process and return every figure."""
    case = CASES_BY_NAME[args.worker]
    libc = _Libc()
    fork_trim = _load_fork_trim() if case.fork_trim else None

    libc.raise_mmap_threshold()
    # The alternative to weigh (README, "Reading the results"): a fixed trim threshold from here.
    if args.trim_threshold_after_raise is not None:
        libc.fix_trim_threshold(args.trim_threshold_after_raise)

    burst_bytes_target = int(args.burst_gib * GiB)
    share = burst_bytes_target // args.threads
    sizes_per_thread = [
        _block_sizes(
            args.seed * 1000 + index, share, args.block_min_mib * MiB, args.block_max_mib * MiB
        )
        for index in range(args.threads)
    ]
    burst_bytes = sum(sum(sizes) for sizes in sizes_per_thread)
    blocks = sum(len(sizes) for sizes in sizes_per_thread)

    live: List[int] = []
    rss_before = memory.process_bytes()
    rounds: List[Dict[str, Any]] = []
    for _ in range(args.rounds):
        figures = _run_round(libc, sizes_per_thread, args.small_bytes, live)
        if fork_trim is not None:
            trim_start = time.perf_counter()
            fork_trim()
            figures["trim_s"] = time.perf_counter() - trim_start
        else:
            figures["trim_s"] = None
        figures["rss_after_trim"] = memory.process_bytes()
        tops = libc.arena_top_bytes()
        figures["arena_top_bytes"] = tops
        figures["thread_arena_top_bytes"] = None if tops is None else sum(tops[1:])
        figures["thread_heap_rss"] = _thread_heap_rss()
        rounds.append(figures)

    for figures in rounds:
        figures["kept_after_free"] = figures["rss_after_free"] - rss_before
        figures["kept_after_trim"] = figures["rss_after_trim"] - rss_before
        figures["trimmed_bytes"] = figures["rss_after_free"] - figures["rss_after_trim"]
        figures["trim_s_per_gib"] = _seconds_per_gib(figures["trim_s"], figures["trimmed_bytes"])
    first, last = rounds[0], rounds[-1]
    trimmed = last["trimmed_bytes"]
    trim_s = last["trim_s"]
    return {
        "case": case.name,
        "allocator": libc.allocator(),
        "burst_bytes": burst_bytes,
        "blocks": blocks,
        "small_live_bytes": len(live) * args.small_bytes,
        "rss_before": rss_before,
        "rss_peak": max(figures["rss_peak"] for figures in rounds),
        "rss_after_free": last["rss_after_free"],
        "rss_after_trim": last["rss_after_trim"],
        "kept_after_free": last["rss_after_free"] - rss_before,
        "kept_after_trim": last["rss_after_trim"] - rss_before,
        "trimmed_bytes": trimmed if trim_s is not None else None,
        "trim_s": trim_s,
        "trim_s_per_gib": last["trim_s_per_gib"],
        "first_kept_after_trim": first["kept_after_trim"],
        "first_trim_s": first["trim_s"],
        "first_trim_s_per_gib": first["trim_s_per_gib"],
        "thread_arena_top_bytes": last["thread_arena_top_bytes"],
        "thread_heap_rss": last["thread_heap_rss"],
        "burst_s": rounds[0]["burst_s"],
        "warm_burst_s": rounds[1]["burst_s"] if len(rounds) > 1 else None,
        "rounds": rounds,
    }


# ---------------------------------------------------------------------------------------------
# Driver: starts one fresh process per case and repeat, collects, summarises, writes the JSON.
# ---------------------------------------------------------------------------------------------


def find_jemalloc(explicit: Optional[str]) -> Optional[str]:
    """Path of ``libjemalloc.so.2``: the one given, a usual Debian path, or the linker's."""
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for candidate in JEMALLOC_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    found = ctypes.util.find_library("jemalloc")
    return found if found and Path(found).is_file() else None


def case_environment(case: Case, jemalloc: Optional[str]) -> Dict[str, str]:
    """The environment of a case: ours, minus every allocator setting, plus the case's own."""
    env = {key: value for key, value in os.environ.items() if key not in ALLOCATOR_VARIABLES}
    env.update(case.env)
    if case.jemalloc:
        assert jemalloc is not None
        env["LD_PRELOAD"] = jemalloc
    env["PYTHONHASHSEED"] = "0"
    return env


def _balloon_free_page_reporting() -> Optional[bool]:
    """Whether a virtio balloon reports freed guest pages to the host (``None``: no balloon).

    With reporting on, pages the guest frees go back to the host after a few seconds, and
    touching them again costs a fault on the host too: burst times then vary from run to run
    and depend on how much memory earlier cases gave back.
    """
    found = None
    for device in Path("/sys/bus/virtio/devices").glob("*"):
        if memory.read_text(device / "device") != "0x0005":
            continue
        features = memory.read_text(device / "features") or ""
        found = len(features) > 5 and features[5] == "1"  # VIRTIO_BALLOON_F_REPORTING
    return found


def allocator_info(jemalloc: Optional[str]) -> Dict[str, Any]:
    """The allocators the cases use, beside the host record of ``provenance``."""
    return {
        "jemalloc_library": jemalloc,
        "jemalloc": None,  # filled in from a jemalloc worker's own report
        "virtio_balloon_free_page_reporting": _balloon_free_page_reporting(),
    }


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (``/proc/stat``, all but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    """CPU seconds of this script's finished workers, to tell them from other processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(
    case: Case, burst_gib: float, args: argparse.Namespace, jemalloc: Optional[str]
) -> Dict[str, Any]:
    """Run one case once in a fresh process and return its figures."""
    command = ["-m", "benchmarks.host_heap.run", "--worker", case.name]
    command += ["--sizes-gib", str(burst_gib)]
    for name in ("threads", "rounds", "seed", "small_bytes", "block_min_mib", "block_max_mib"):
        command += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    if args.trim_threshold_after_raise is not None:
        command += ["--trim-threshold-after-raise", str(args.trim_threshold_after_raise)]
    try:
        return harness.run_in_fresh_process(
            command, case_environment(case, jemalloc), timeout_s=args.timeout_s
        )
    except (harness.CaseFailed, subprocess.TimeoutExpired) as error:
        raise harness.BenchmarkError(
            f"case {case.name!r} at {burst_gib:g} GiB failed: {error}"
        ) from None


def _fraction(part: Optional[float], whole: int) -> Optional[float]:
    return None if part is None else part / whole


def summarise(runs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Median of every figure per (case, burst size), over the repeats."""
    groups: Dict[Tuple[str, float], List[Dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["case"], run["burst_gib"]), []).append(run)
    summary = []
    for (case, burst_gib), group in groups.items():
        medians: Dict[str, Optional[float]] = {}
        for key in (m.key for m in MEASURES if m.key in group[0]):
            values = [run[key] for run in group if run[key] is not None]
            medians[key] = statistics.median(values) if values else None
        burst_bytes = group[0]["burst_bytes"]
        summary.append(
            {
                "case": case,
                "burst_gib": burst_gib,
                "burst_bytes": burst_bytes,
                "repeats": len(group),
                "median": medians,
                "kept_fraction": _fraction(medians["kept_after_trim"], burst_bytes),
                "first_kept_fraction": _fraction(medians["first_kept_after_trim"], burst_bytes),
            }
        )
    return summary


def check_target(summary: Sequence[Dict[str, Any]], args: argparse.Namespace) -> Dict[str, Any]:
    """Print whether the fork keeps at most ``--kept-fraction-max`` of each burst and trims
    within ``--trim-s-per-gib-max``, after the first burst (a fresh process, as after one
    engine build) and after the last (as after later builds); returned for the settings."""
    kept_max, trim_max = args.kept_fraction_max, args.trim_s_per_gib_max
    met = {}
    for entry in (entry for entry in summary if entry["case"] == "fork"):
        median = entry["median"]
        kept = [entry["first_kept_fraction"], entry["kept_fraction"]]
        trim = [median["first_trim_s_per_gib"], median["trim_s_per_gib"]]
        ok = all(v is not None and v <= kept_max for v in kept)
        ok = ok and all(v is not None and v <= trim_max for v in trim)
        size = f"{entry['burst_gib']:g}"
        met[size] = ok
        shown = f"kept {_fmt(kept[0], 0.01)}% / {_fmt(kept[1], 0.01)}%"
        shown += f", trim {_fmt(trim[0], 1, 3)} / {_fmt(trim[1], 1, 3)} s/GiB"
        print(f"fork at {size} GiB (bursts 1 / last): {shown}: {'met' if ok else 'MISSED'}")
    return {"kept_fraction_max": kept_max, "trim_s_per_gib_max": trim_max, "met": met}


def _fmt(value: Optional[float], scale: float = 1.0, digits: int = 2) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}"


# What each figure of a case is: the median over the case's repeats (its runs are its series).
MEASURES = (
    Measure("burst_bytes", "burst", "bytes", "bytes allocated in one burst"),
    Measure("repeats", "repeats", "", "runs of the case, each in a fresh process"),
    Measure("rss_before", "RSS before", "bytes", "resident memory before burst 1"),
    Measure("rss_peak", "RSS peak", "bytes", "the process's resident peak"),
    Measure(
        "first_kept_after_trim",
        "kept after burst 1",
        "bytes",
        "RSS after burst 1 is freed (and trimmed, for the fork), less RSS before",
    ),
    Measure(
        "kept_after_free",
        "kept after the last free",
        "bytes",
        "RSS after the last burst is freed, before any trim, less RSS before",
    ),
    Measure(
        "kept_after_trim",
        "kept after burst 2",
        "bytes",
        "RSS after the last burst is freed (and trimmed), less RSS before",
    ),
    Measure(
        "first_kept_fraction",
        "kept / burst, burst 1",
        "",
        "kept after burst 1 over the burst's bytes (goal: at most 0.01)",
    ),
    Measure(
        "kept_fraction", "kept / burst, burst 2", "", "kept after burst 2 over the burst's bytes"
    ),
    Measure("trimmed_bytes", "trimmed", "bytes", "bytes the last trim handed back"),
    Measure("first_trim_s", "trim after burst 1", "s", "time of the trim after burst 1"),
    Measure("trim_s", "trim after burst 2", "s", "time of the trim after the last burst"),
    Measure(
        "first_trim_s_per_gib",
        "trim per GiB, burst 1",
        "s",
        "the trim's time per GiB handed back, burst 1",
    ),
    Measure(
        "trim_s_per_gib",
        "trim per GiB, burst 2",
        "s",
        "the trim's time per GiB handed back, last burst",
    ),
    Measure(
        "burst_s", "time of burst 1", "s", "allocate, touch and free burst 1 in a fresh process"
    ),
    Measure("warm_burst_s", "time of burst 2", "s", "the same blocks again in the same process"),
    Measure(
        "thread_arena_top_bytes",
        "thread arenas' tops",
        "bytes",
        "the top chunks of the threads' arenas (malloc_info), which malloc_trim does not shrink",
    ),
    Measure(
        "thread_heap_rss", "thread heaps' RSS", "bytes", "resident memory of the threads' heaps"
    ),
)


def host_heap_result(
    record: Dict[str, Any], runs: Sequence[Dict[str, Any]], settings: Dict[str, Any]
) -> Dict[str, Any]:
    """The result file: a case per allocator setting and burst size, its repeats as series."""
    largest = max(run["burst_gib"] for run in runs)
    cases = []
    for entry in summarise(runs):
        name, size = entry["case"], entry["burst_gib"]
        registered = CASES_BY_NAME[name]
        figures = {**entry["median"], "burst_bytes": entry["burst_bytes"]}
        figures.update(
            {key: entry[key] for key in ("repeats", "kept_fraction", "first_kept_fraction")}
        )
        own = [run for run in runs if run["case"] == name and run["burst_gib"] == size]
        cases.append(
            result.case(
                f"{name}-{size:g}gib",
                f"{registered.label}, {size:g} GiB",
                figures,
                headline=registered.headline and size == largest,
                parameters={"case": name, "burst_gib": size, "description": registered.description},
                series={"runs": own},
            )
        )
    notes = [
        "Burst 1 follows one large free that raises glibc's mmap threshold as it does in a real "
        "process; burst 2 repeats it in the same process, as a second engine build would. "
        "Figures are medians over the repeats, each in a fresh process."
    ]
    title = "Host memory kept after builder-like bursts of freed allocations, per allocator setting"
    return result.result(
        "host-heap", title, record, MEASURES, cases, notes=notes, settings=settings
    )


def run_driver(args: argparse.Namespace) -> int:
    """Run every selected case and size ``repeats`` times, then save and print the results."""
    if importlib.util.find_spec("torch") is None:
        raise harness.BenchmarkError(
            f"torch is not importable from {sys.executable!r}, and the 'fork' case imports the "
            "overlay, which needs it; run this script with a Python that has torch "
            "(e.g. pip install torch)"
        )
    jemalloc = find_jemalloc(args.jemalloc)
    skipped: Dict[str, str] = {}
    cases = [CASES_BY_NAME[name] for name in args.cases]
    if jemalloc is None:
        for case in cases:
            if case.jemalloc:
                skipped[case.name] = (
                    "libjemalloc.so.2 not found; install it with "
                    "'apt-get install -y libjemalloc2' or pass --jemalloc PATH"
                )
                logger.warning("skipping case %s: %s", case.name, skipped[case.name])
        cases = [case for case in cases if not case.jemalloc]

    largest = max(args.sizes_gib)
    needed = int(largest * GiB * 1.15)
    available = memory.meminfo_bytes("MemAvailable") or 0
    if available < needed:
        raise harness.BenchmarkError(
            f"the {largest:g} GiB burst needs about {needed / GiB:.1f} GiB available, "
            f"but MemAvailable is {available / GiB:.1f} GiB; pass smaller --sizes-gib"
        )

    record = result.provenance()
    machine = allocator_info(jemalloc)
    runs: List[Dict[str, Any]] = []
    started = time.perf_counter()
    for burst_gib in args.sizes_gib:
        for repeat in range(args.repeats):
            # Start each repeat at another case, so that no case always runs first.
            shift = repeat % len(cases)
            for case in cases[shift:] + cases[:shift]:
                busy_before, children_before = _busy_cpu_s(), _children_cpu_s()
                wall_before = time.perf_counter()
                figures = run_case(case, burst_gib, args, jemalloc)
                others_s = (_busy_cpu_s() - busy_before) - (_children_cpu_s() - children_before)
                wall_s = time.perf_counter() - wall_before
                figures.update(
                    {
                        "burst_gib": burst_gib,
                        "repeat": repeat,
                        "others_cpu_share": max(0.0, others_s) / (wall_s * (os.cpu_count() or 1)),
                    }
                )
                runs.append(figures)
                if case.jemalloc and machine["jemalloc"] is None:
                    machine["jemalloc"] = figures["allocator"]
                logger.info(
                    "%5g GiB  repeat %d  %-16s kept %.3f GiB  burst %.2f s  trim %s s",
                    burst_gib,
                    repeat,
                    case.name,
                    figures["kept_after_trim"] / GiB,
                    figures["burst_s"],
                    _fmt(figures["trim_s"], 1, 3),
                )

    target = check_target(summarise(runs), args)
    settings = {
        "sizes_gib": args.sizes_gib,
        "repeats": args.repeats,
        "threads": args.threads,
        "rounds": args.rounds,
        "block_min_bytes": args.block_min_mib * MiB,
        "block_max_bytes": args.block_max_mib * MiB,
        "small_bytes": args.small_bytes,
        "seed": args.seed,
        "threshold_raising_bytes": THRESHOLD_RAISING_BYTES,
        "trim_threshold_after_raise": args.trim_threshold_after_raise,
        "elapsed_s": time.perf_counter() - started,
        "allocators": machine,
        "skipped": skipped,
        "target": target,
    }
    result.save(args.output, host_heap_result(record, runs, settings))
    logger.info("wrote %s", args.output)

    sys.stderr.flush()
    shares = [run["others_cpu_share"] for run in runs]
    print(
        f"CPU used by other processes during the runs: {100 * statistics.median(shares):.0f}% "
        f"median, {100 * max(shares):.0f}% max (of all cores; above 0, times are noisier)"
    )
    sys.stdout.flush()
    return 0


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run host-heap", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("--sizes-gib", type=float, nargs="+", default=[3.0, 12.0])
    add("--repeats", type=int, default=3)
    add("--threads", type=int, default=4)
    add("--rounds", type=int, default=2, help="bursts per process; the second shows reuse")
    add("--cases", nargs="+", choices=list(CASES_BY_NAME), default=list(CASES_BY_NAME))
    add("--block-min-mib", type=int, default=1)
    add("--block-max-mib", type=int, default=24)
    add("--seed", type=int, default=1)
    add("--small-bytes", type=int, default=4096)
    add("--jemalloc", help="path of libjemalloc.so.2 (default: search)")
    add("--output", type=Path, default=DEFAULT_OUTPUT)
    add("--timeout-s", type=float, default=300.0)
    add("--kept-fraction-max", type=float, default=0.01)
    add("--trim-s-per-gib-max", type=float, default=0.1)
    add(
        "--trim-threshold-after-raise",
        type=int,
        metavar="BYTES",
        help="after the first large free, fix glibc's trim threshold with mallopt (an "
        "alternative that shrinks thread-arena tops, at a cost: README); default: leave it",
    )
    add("--worker", choices=list(CASES_BY_NAME), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark (or, with ``--worker``, one case in this process)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.worker:
        args.burst_gib = args.sizes_gib[0]
        harness.print_case_result(run_worker(args))
        return 0
    return run_driver(args)


if __name__ == "__main__":
    sys.exit(run())
