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

# name: (module, what it measures, where it needs to run)
BENCHMARKS: Dict[str, Tuple[str, str]] = {
    "offload": (
        "benchmarks.offload.run",
        "host + GPU memory and speed of moving a model to the CPU, per plan (GPU)",
    ),
    "host-heap": (
        "benchmarks.host_heap.run",
        "host memory kept after builder-like bursts, per allocator setting (CPU)",
    ),
    "build-speed": ("benchmarks.build_speed", "time of building patched wheels (CPU)"),
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
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="name every benchmark")
    runner = commands.add_parser("run", help="run one benchmark", add_help=False)
    runner.add_argument("name", choices=list(BENCHMARKS))
    tables = commands.add_parser("tables", help="regenerate the README's tables", add_help=False)
    del tables
    args, rest = parser.parse_known_args(argv)
    if args.command == "list":
        for name, (_, what) in BENCHMARKS.items():
            print(f"{name:>16}  {what}")
        return 0
    if args.command == "tables":
        from benchmarks import readme_tables

        return readme_tables.main(rest)
    return run(args.name, rest)


if __name__ == "__main__":
    sys.exit(main())
