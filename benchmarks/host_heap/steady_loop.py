"""What a fixed glibc trim threshold costs a process that keeps running after its compile.

The fork's trim leaves the top chunks of glibc's thread arenas resident (``README.md``,
"Reading the results"). ``mallopt(M_TRIM_THRESHOLD, 128 KiB)`` after the first large free
would shrink those tops as well, but for the rest of the process: every free that reaches an
arena's top then hands its pages back, and the next allocation faults them in again. This
script measures that on the simplest steady workload, one thread that allocates, touches and
frees a block of the same size again and again (as a loop of CPU inference does with its
activations), with glibc's dynamic thresholds and with the fixed trim threshold, each case in a
fresh process. Run from the repository root::

    python -m benchmarks run host-heap-steady-loop

It writes ``benchmarks/results/host_heap_steady_loop.json`` and prints the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from benchmarks import harness
from benchmarks.host_heap import run

DEFAULT_OUTPUT = harness.RESULTS / "host_heap_steady_loop.json"
FIXED_TRIM_THRESHOLD = 128 * run.KiB


def run_worker(block_mib: int, iterations: int, fixed: bool) -> Dict[str, Any]:
    """One case in this (fresh) process: the loop's time per iteration, in a new thread."""
    libc = run._Libc()
    # Raise the dynamic mmap threshold as a builder's first large free does, then fix the
    # trim threshold where the case asks for it.
    pointer = libc.malloc(run.THRESHOLD_RAISING_BYTES)
    libc.memset(pointer, 0, run.THRESHOLD_RAISING_BYTES)
    libc.free(pointer)
    if fixed and (
        libc.mallopt is None or libc.mallopt(run.M_TRIM_THRESHOLD, FIXED_TRIM_THRESHOLD) != 1
    ):
        raise run.HostHeapBenchmarkError("mallopt(M_TRIM_THRESHOLD) is not available here")
    size = block_mib * run.MiB
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


MEASURES = harness.measures("""
dynamic_s | dynamic thresholds | s | one allocate + touch + free with glibc's dynamic
    thresholds, after a large free raised them (median of the iterations, then of the repeats)
fixed_s | fixed trim threshold | s | the same with mallopt(M_TRIM_THRESHOLD, 128 KiB) set after
    that raise
ratio | fixed / dynamic | x | how many times longer the loop takes with the fixed threshold
""")


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
        label = f"{block_mib} MiB block"
        parameters = {"block_mib": block_mib}
        entry = harness.case(
            f"{block_mib}mib", label, medians, headline=True, parameters=parameters
        )
        cases.append({**entry, "series": {"runs": own}})
    title = "What a fixed glibc trim threshold costs a loop that allocates and frees one block"
    return harness.result(
        "host-heap-steady-loop", title, record, MEASURES, cases, settings=settings
    )


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run both settings for every block size (or, with ``--worker``, one in this process)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run host-heap-steady-loop",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--blocks-mib", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--worker", choices=["dynamic", "fixed"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        figures = run_worker(args.blocks_mib[0], args.iterations, args.worker == "fixed")
        harness.print_case_result(figures)
        return 0

    record = harness.provenance()
    runs: List[Dict[str, Any]] = []
    for block_mib in args.blocks_mib:
        for repeat in range(args.repeats):
            for case in ("dynamic", "fixed"):
                command = ["-m", "benchmarks.host_heap.steady_loop", "--worker", case]
                command += ["--blocks-mib", str(block_mib), "--iterations", str(args.iterations)]
                figures = harness.run_in_fresh_process(
                    command, run.case_environment(run.CASES_BY_NAME["upstream"], None)
                )
                figures.update({"case": case, "repeat": repeat})
                runs.append(figures)
    settings = {
        "iterations": args.iterations,
        "repeats": args.repeats,
        "fixed_trim_threshold": FIXED_TRIM_THRESHOLD,
        "threshold_raising_bytes": run.THRESHOLD_RAISING_BYTES,
    }
    document = steady_loop_result(record, runs, settings)
    harness.save_result(args.output, document)
    for entry in document["cases"]:
        figures = entry["figures"]
        print(
            f"{entry['label']}: allocate + touch + free {figures['dynamic_s'] * 1e3:.3f} ms "
            f"with glibc's dynamic thresholds, {figures['fixed_s'] * 1e3:.3f} ms with a fixed "
            f"trim threshold ({figures['ratio']:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run())
