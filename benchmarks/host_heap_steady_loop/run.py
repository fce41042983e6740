"""What a fixed glibc trim threshold costs a process that keeps allocating after its compile.

One thread allocates, touches and frees a block of one size again and again (as a loop of CPU
inference does with its activations), with glibc's dynamic thresholds and with
``mallopt(M_TRIM_THRESHOLD, 128 KiB)`` set after the first large free, each case in a fresh
process (``docsrc/benchmarks.rst`` says why it matters). From the repository's root::

    python -m benchmarks run host-heap-steady-loop   # not run: 9 s, rewrites its result file
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from benchmarks import harness
from benchmarks.host_heap import run as host_heap
from evidence import RESULTS, result
from evidence.result import Measure

FIXED_TRIM_THRESHOLD = 128 * host_heap.KiB


def run_worker(block_mib: int, iterations: int, fixed: bool) -> Dict[str, Any]:
    """One case in this (fresh) process: the loop's time per iteration, in a new thread."""
    libc = host_heap._Libc()
    libc.raise_mmap_threshold()
    if fixed:
        libc.fix_trim_threshold(FIXED_TRIM_THRESHOLD)
    size = block_mib * host_heap.MiB
    seconds: List[float] = []

    def loop() -> None:
        # A small block that stays, as in run.py, so the arena has a life of its own.
        libc.memset(libc.malloc(4096), 0, 4096)
        for _ in range(iterations):
            began = time.perf_counter()
            block = libc.malloc(size)
            libc.memset(block, 1, size)
            libc.free(block)
            seconds.append(time.perf_counter() - began)

    worker = threading.Thread(target=loop)
    worker.start()
    worker.join()
    return {
        "block_mib": block_mib,
        "trim_threshold": FIXED_TRIM_THRESHOLD if fixed else None,
        "iterations": iterations,
        "median_s": statistics.median(seconds),
        "allocator": libc.allocator(),
    }


MEASURES = (
    Measure(
        "dynamic_s",
        "dynamic thresholds",
        "s",
        "one allocate + touch + free with glibc's dynamic thresholds, after a large free raised "
        "them (median of the iterations, then of the repeats)",
    ),
    Measure(
        "fixed_s",
        "fixed trim threshold",
        "s",
        "the same with mallopt(M_TRIM_THRESHOLD, 128 KiB) set after that raise",
    ),
    Measure(
        "ratio",
        "fixed / dynamic",
        "x",
        "how many times longer the loop takes with the fixed threshold",
    ),
)


def steady_loop_result(
    record: Dict[str, Any], runs: List[Dict[str, Any]], settings: Dict[str, Any]
) -> Dict[str, Any]:
    """A case per block size: the medians of both settings, their runs as its series."""
    cases = []
    for block_mib in dict.fromkeys(entry["block_mib"] for entry in runs):
        own = [entry for entry in runs if entry["block_mib"] == block_mib]
        medians = {
            f"{kind}_s": statistics.median(r["median_s"] for r in own if r["case"] == kind)
            for kind in ("dynamic", "fixed")
        }
        medians["ratio"] = medians["fixed_s"] / medians["dynamic_s"]
        cases.append(
            result.case(
                f"{block_mib}mib",
                f"{block_mib} MiB block",
                medians,
                headline=True,
                parameters={"block_mib": block_mib},
                series={"runs": own},
            )
        )
    title = "What a fixed glibc trim threshold costs a loop that allocates and frees one block"
    return result.result("host-heap-steady-loop", title, record, MEASURES, cases, settings=settings)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run host-heap-steady-loop",
        description=__doc__.splitlines()[0],
    )
    add = parser.add_argument
    add("--blocks-mib", type=int, nargs="+", default=[4, 16])
    add("--iterations", type=int, default=200)
    add("--repeats", type=int, default=3)
    add("--output", type=Path, default=RESULTS / "host_heap_steady_loop.json")
    add("--worker", choices=["dynamic", "fixed"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run both settings for every block size (or, with ``--worker``, one in this process)."""
    args = parse_args(argv)
    if args.worker:
        fixed = args.worker == "fixed"
        harness.print_case_result(run_worker(args.blocks_mib[0], args.iterations, fixed))
        return 0
    record = result.provenance()
    env = host_heap.case_environment(host_heap.CASES_BY_NAME["upstream"], None)
    runs: List[Dict[str, Any]] = []
    kinds = ("dynamic", "fixed")
    for block, repeat, kind in itertools.product(args.blocks_mib, range(args.repeats), kinds):
        command = ["-m", "benchmarks.host_heap_steady_loop.run", "--worker", kind]
        command += ["--blocks-mib", str(block), "--iterations", str(args.iterations)]
        figures = harness.run_in_fresh_process(command, env)
        runs.append({**figures, "case": kind, "repeat": repeat})
        print(f"{block} MiB {kind}: {figures['median_s'] * 1e3:.3f} ms", flush=True)
    settings = {
        "iterations": args.iterations,
        "repeats": args.repeats,
        "fixed_trim_threshold": FIXED_TRIM_THRESHOLD,
        "threshold_raising_bytes": host_heap.THRESHOLD_RAISING_BYTES,
    }
    result.save(args.output, steady_loop_result(record, runs, settings))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
