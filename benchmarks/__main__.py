"""The benchmarks' one entry point: ``python -m benchmarks run NAME [its options]``.

Run from the repository's root. ``python -m benchmarks list`` names every benchmark;
``python -m benchmarks run NAME --help`` gives its options. Each benchmark is a module with
``run(argv) -> int`` that writes one result file of the documented shape
(``docsrc/_ext/results.py``) through ``benchmarks/harness.py``. Presenting the results is not
done here: cog (``python -m cogapp -r -I docsrc/_ext -I tools README.md``) regenerates the
README's blocks from the files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from benchmarks import harness

# name: (the module whose run() runs it, what it measures and where it runs)
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
    "own-compile": (
        "benchmarks.own_compile.run",
        "host + GPU memory of a compile of your own model, as the compile benchmark measures (GPU)",
    ),
}

USAGE = "usage: python -m benchmarks {list | run NAME [options]}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Dispatch: a benchmark's own options go to its ``run()`` untouched."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if importlib.util.find_spec("patched_wheel") is None:
        # The build tool has one import identity, ``patched_wheel`` with ``tools`` on the path
        # (as the build backend and pytest have it): the run goes on in a process that has it.
        tools = str(Path(__file__).resolve().parents[1] / "tools")
        paths = [tools, *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        command = [sys.executable, "-m", "benchmarks", *arguments]
        return subprocess.run(command, env=env, check=False).returncode
    if arguments[:1] == ["run"] and len(arguments) > 1 and arguments[1] in BENCHMARKS:
        module = importlib.import_module(BENCHMARKS[arguments[1]][0])
        try:
            return int(module.run(arguments[2:]) or 0)
        except harness.BenchmarkError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    if arguments == ["list"]:
        for name, (_, what) in BENCHMARKS.items():
            print(f"{name:>22}  {what}")
        return 0
    print(f"{USAGE}\nbenchmarks: {', '.join(BENCHMARKS)}", file=sys.stderr)
    return 0 if arguments in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main())
