"""The benchmarks' one entry point: ``python -m benchmarks run NAME [its options]``.

Run from the repository's root. ``python -m benchmarks list`` names every benchmark;
``python -m benchmarks run NAME --help`` gives its options; ``python -m benchmarks tables``
regenerates the README's tables from ``benchmarks/results`` (``--check``: exit 1 if the
README has drifted). Each benchmark writes one result file through ``benchmarks/harness.py``
(a ``provenance`` object, an atomic save).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from typing import Dict, List, Optional, Sequence, Tuple

# name: (the module whose main() runs it, what it measures and where it runs)
BENCHMARKS: Dict[str, Tuple[str, str]] = {
    "offload": (
        "benchmarks.offload.run",
        "host + GPU memory and speed of moving a model to the CPU, per plan (GPU)",
    ),
    "host-heap": (
        "benchmarks.host_heap.run",
        "host memory kept after builder-like bursts, per allocator setting (CPU)",
    ),
    "host-heap-steady-loop": (
        "benchmarks.host_heap.steady_loop",
        "what a fixed glibc trim threshold costs a process that keeps allocating (CPU)",
    ),
    "build-speed": ("benchmarks.build_speed", "time of building patched wheels (CPU)"),
    "compile": (
        "benchmarks.compile.run",
        "host + GPU memory of a real compile on TensorRT-RTX, official wheel against the fork (GPU)",
    ),
    "fast-path-setup": (
        "benchmarks.research.fast_path_setup",
        "research: GPU and host memory of each step of the fast path's setup (GPU)",
    ),
    "host-ceilings": (
        "benchmarks.research.host_ceilings",
        "research: the host's copy, fault-in, DMA and page-locking ceilings (GPU)",
    ),
}


def run(name: str, arguments: List[str]) -> int:
    """Call benchmark ``name``'s ``main()`` with ``arguments`` as its command line."""
    module = importlib.import_module(BENCHMARKS[name][0])
    sys.argv = [f"python -m benchmarks run {name}", *arguments]
    if inspect.signature(module.main).parameters:
        return int(module.main(arguments) or 0)
    return int(module.main() or 0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # A benchmark's own options go to it untouched, so they are split off before parsing.
    if arguments[:1] == ["run"] and len(arguments) > 1 and arguments[1] in BENCHMARKS:
        return run(arguments[1], arguments[2:])
    if arguments[:1] == ["tables"]:
        from benchmarks import readme_tables

        return readme_tables.main(arguments[1:])
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="name every benchmark")
    runner = commands.add_parser("run", help="run one benchmark with its options")
    runner.add_argument("name", choices=list(BENCHMARKS))
    commands.add_parser("tables", help="regenerate the README's tables (--check: only compare)")
    parser.parse_args(arguments)  # list; or help, or an error naming what is wrong
    for name, (_, what) in BENCHMARKS.items():
        print(f"{name:>16}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
