"""Regenerate, or check, every generated block of ``README.md``: one command, one marker syntax.

Run from anywhere in the repository::

    python docsrc/_ext/readme.py          # rewrite every block
    python docsrc/_ext/readme.py --check  # write nothing; exit 1 naming each block that drifted

A block is the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``; NAME is one of
:func:`blocks`: a named table of the result files (``results.TABLES``), ``memory-sizing``
(``docsrc/_data/memory_terms.json``) or ``supported-matrix`` (``docsrc/_data/
supported_matrix.json``, the same table ``python tools/patched_wheel matrix --update-docs``
writes beside that file). The README's other text is never touched.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import memory_sizing
import results

README = results.REPOSITORY / "README.md"
BLOCK = re.compile(r"<!-- ([a-z0-9-]+):start -->\n(.*?)<!-- \1:end -->", re.S)


def blocks() -> Dict[str, Callable[[], str]]:
    """Every block the README may hold, by name, and how to make its text."""
    made: Dict[str, Callable[[], str]] = {
        "supported-matrix": lambda: results.markdown(results.matrix_table()),
        "memory-sizing": lambda: memory_sizing.readme_block(memory_sizing.load()),
    }
    for name in results.TABLE_NAMES:
        made[name] = lambda name=name: results.markdown(results.table(name))
    return made


def render(text: str) -> str:
    """``text`` with each block made again; an unknown block name is a :class:`ResultError`."""
    makers = blocks()
    unknown = [name for name in BLOCK.findall(text) if name[0] not in makers]
    if unknown:
        known = ", ".join(makers)
        raise results.ResultError(f"README.md: no generator for block {unknown[0][0]!r}; {known}")
    return BLOCK.sub(lambda m: f"<!-- {m[1]}:start -->\n{makers[m[1]]()}<!-- {m[1]}:end -->", text)


def drifted(current: str, expected: str) -> List[str]:
    """The names of the blocks that differ between two README texts."""
    old, new = dict(BLOCK.findall(current)), dict(BLOCK.findall(expected))
    return [name for name in new if old.get(name) != new[name]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python docsrc/_ext/readme.py", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a block has drifted")
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite")
    args = parser.parse_args(argv)
    try:
        current = args.readme.read_text(encoding="utf-8")
        expected = render(current)
    except (OSError, results.ResultError, memory_sizing.SizingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    names = drifted(current, expected)
    if args.check and names:
        listed = ", ".join(names)
        advice = "run python docsrc/_ext/readme.py"
        print(f"error: {args.readme.name}: blocks differ: {listed}; {advice}", file=sys.stderr)
        return 1
    if names and not args.check:
        temporary = args.readme.with_name(f".{args.readme.name}.tmp")
        temporary.write_text(expected, encoding="utf-8")
        temporary.replace(args.readme)
    print(f"{args.readme.name}: {len(BLOCK.findall(expected))} blocks match their data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
