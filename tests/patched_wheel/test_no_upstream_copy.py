"""The repository's rule, checked: no line of upstream's code or docs is copied into it.

Every distinctive line of the repository's own text files (long enough that two authors
would not write it alike by chance) is looked up among the lines of the official wheels'
Python sources. A line found there means upstream text entered the repository, which only
the build may bring in, into the patched wheel.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Set, Tuple

import pytest
from patched_wheel.config import DEFAULT_RELEASE

REPO = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".rst", ".md", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml"}
MIN_LENGTH = 40  # shorter lines (imports, calls like torch.cuda.empty_cache()) are common
# Lines that must match upstream to be compatible, not copies: imports, the signature line of
# a function the overlay replaces, and a lone call of upstream's API (a test's call site).
API_LINE = re.compile(r"^(import |from \S+ import |def \w+\(|[\w.]+\([^()]*\)$)")


def normalized(line: str) -> str:
    return " ".join(line.split())


def upstream_lines(wheel: Path) -> Set[str]:
    lines: Set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".py"):
                text = archive.read(name).decode("utf-8", errors="replace")
                lines.update(normalized(line) for line in text.splitlines())
    return {line for line in lines if len(line) >= MIN_LENGTH}


def repository_lines() -> Iterator[Tuple[str, int, str]]:
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in tracked:
        path = REPO / name
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            text = normalized(line)
            if len(text) >= MIN_LENGTH and not API_LINE.match(text):
                yield name, number, text


def copied(lines: Iterable[Tuple[str, int, str]], upstream: Set[str]) -> List[str]:
    return [f"{name}:{number}: {text}" for name, number, text in lines if text in upstream]


@pytest.fixture(scope="module")
def upstream(base_wheels: Dict[str, Path]) -> Set[str]:
    found: Set[str] = set()
    for wheel in base_wheels.values():
        found |= upstream_lines(wheel)
    assert len(found) > 10_000, "the base wheels' sources were not read"
    return found


def test_no_line_of_upstream_is_in_the_repository(upstream: Set[str]) -> None:
    found = copied(repository_lines(), upstream)
    assert found == [], "lines of upstream's sources in the repository:\n" + "\n".join(found)


def test_the_check_finds_a_copied_line(upstream: Set[str]) -> None:
    """The lookup works: a line of upstream's deallocate_module, re-indented, is found."""
    with zipfile.ZipFile(
        sorted(REPO.glob(f".cache/base-wheels/*{DEFAULT_RELEASE}*.whl"))[0]
    ) as archive:
        source = archive.read("torch_tensorrt/dynamo/utils.py").decode()
    start = source.index("def deallocate_module")
    docstring_line = source[start:].splitlines()[2]
    assert len(normalized(docstring_line)) >= MIN_LENGTH
    lines = [("copy.py", 1, normalized("        " + docstring_line)), ("own.py", 2, "x" * 50)]
    assert copied(lines, upstream) == [f"copy.py:1: {normalized(docstring_line)}"]
