"""The README's first screen and its install routes: the two set-up commands come first, each
route installs the wheel it just built, and the docs give the same lines."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import List

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
INSTALL_PAGE = REPOSITORY / "docsrc" / "getting_started" / "installation.rst"
FIRST_SCREEN = 40  # lines
BUILD_COMMAND = "rm -rf dist/default && pip wheel . --no-deps -w dist/default"
TEST_COMMAND = "python3 -m pip install -r tests/requirements.txt && python3 -m pytest"
# A route's build line (it empties and fills one folder) and install line (from that folder).
BUILD_LINE = re.compile(r"rm -rf (dist/\w+) && (?:\w+=\w+ )?pip wheel \. --no-deps -w \1$")
INSTALL_LINE = re.compile(r"pip install (?:--no-deps )?(dist/\w+)/torch_tensorrt-\*\.whl$")


def _commands(path: Path) -> List[str]:
    """The command lines of a page: indented code in the README, ``$ `` lines in the docs."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return [line.strip() for line in text.splitlines() if line.startswith("    ")]
    return [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("$ ")]


def test_the_two_set_up_commands_are_on_the_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    first_table = next(number for number, line in enumerate(lines) if line.startswith("|"))
    first_screen = [line.strip() for line in lines[: min(FIRST_SCREEN, first_table)]]
    assert BUILD_COMMAND in first_screen
    assert TEST_COMMAND in first_screen


def test_ci_finds_the_one_test_command() -> None:
    ci = (REPOSITORY / ".ci" / "run").read_text(encoding="utf-8")
    extraction = re.search(r"^command=\$\((.*)\)$", ci, re.M)
    assert extraction is not None
    completed = subprocess.run(
        ["bash", "-c", extraction.group(1)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout == TEST_COMMAND + "\n"
    assert _commands(README).count(TEST_COMMAND) == 1  # one command, not two to keep alike


@pytest.mark.parametrize("page", [README, INSTALL_PAGE], ids=["README", "install-page"])
def test_each_route_installs_the_wheel_it_just_built(page: Path) -> None:
    commands = _commands(page)
    builds = [m.group(1) for m in map(BUILD_LINE.search, commands) if m]
    installs = [m.group(1) for m in map(INSTALL_LINE.search, commands) if m]
    assert installs == ["dist/default", "dist/installed"], commands
    assert builds[-2:] == installs  # the folder built into, emptied first, is the one installed
    assert not [c for c in commands if "dist/torch_tensorrt-" in c or "--force-reinstall dist" in c]


def test_the_readme_and_the_docs_give_the_same_route_lines() -> None:
    def routes(page: Path) -> List[str]:
        return [c for c in _commands(page) if BUILD_LINE.search(c) or INSTALL_LINE.search(c)]

    assert routes(README)[-4:] == routes(INSTALL_PAGE)


def test_gitignore_has_each_line_once_and_ignores_the_linked_cache() -> None:
    lines = [line for line in (REPOSITORY / ".gitignore").read_text().splitlines() if line]
    assert len(lines) == len(set(lines)), lines
    completed = subprocess.run(
        ["git", "check-ignore", "--no-index", ".cache", "_site"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    # .cache also as a link to another checkout's cache, and the pages workflow's site
    assert completed.stdout.split() == [".cache", "_site"]
