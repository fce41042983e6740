"""The benchmarks' one entry point: ``python -m benchmarks run NAME [its options]``.

Run from the repository's root. A benchmark is a folder: ``benchmarks/<name>/run.py`` with
``run(argv) -> int``, found by :func:`benchmarks` (as pytorch/benchmark finds its
userbenchmarks), so adding one is adding a folder. ``python -m benchmarks list`` names every
benchmark with the first line of its ``run.py``'s docstring; ``python -m benchmarks run NAME
--help`` gives its options. Each writes its result file through :mod:`evidence.result`;
presenting the results is not done here: cog (``python3 -m cogapp -r -I tools README.md``)
regenerates the README's blocks from the files.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

from benchmarks import harness

HERE = Path(__file__).resolve().parent
USAGE = "usage: python -m benchmarks {list | run NAME [options]}"


def benchmarks() -> Dict[str, str]:
    """Name (the folder's, ``-`` for ``_``) -> the module of each ``benchmarks/<name>/run.py``."""
    folders = sorted(path.parent.name for path in HERE.glob("*/run.py"))
    return {name.replace("_", "-"): f"benchmarks.{name}.run" for name in folders}


def summary(module: str) -> str:
    """The first paragraph of a benchmark's docstring, read without running it (torch, a GPU)."""
    spec = importlib.util.find_spec(module)
    source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    return " ".join((ast.get_docstring(ast.parse(source)) or "").split("\n\n", 1)[0].split())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Dispatch: a benchmark's own options go to its ``run()`` untouched."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    found = benchmarks()
    if arguments[:1] == ["run"] and len(arguments) > 1 and arguments[1] in found:
        module = importlib.import_module(found[arguments[1]])
        try:
            return int(module.run(arguments[2:]) or 0)
        except harness.BenchmarkError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    if arguments == ["list"]:
        for name, module_name in found.items():
            print(f"{name:>22}  {summary(module_name)}")
        return 0
    print(f"{USAGE}\nbenchmarks: {', '.join(found)}", file=sys.stderr)
    return 0 if arguments in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main())
