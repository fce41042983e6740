"""Every generated block of the README, made and checked by cog from the code above each block.

The commands are the ones the build tool advises (``matrix.README_COMMAND``) and the README
shows, run on copies of the README so that the committed one is never written.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import results
from cogapp import Cog
from patched_wheel import matrix

README = results.REPOSITORY / "README.md"
WORDS = shlex.split(matrix.README_COMMAND)  # python3 -m cogapp -r OPTIONS README.md
OPTIONS = WORDS[4:-1]


def cog(*action: str, readme: Path = README) -> "subprocess.CompletedProcess[str]":
    """The README's cog command, with ``action`` for its ``-r``, on ``readme``."""
    assert WORDS[:4] == ["python3", "-m", "cogapp", "-r"] and WORDS[-1] == "README.md"
    command = [sys.executable, "-m", "cogapp", *action, *OPTIONS, str(readme)]
    return subprocess.run(
        command, cwd=results.REPOSITORY, capture_output=True, text=True, timeout=120
    )


def _copy(folder: Path) -> Path:
    copy = folder / "README.md"
    shutil.copy(README, copy)
    return copy


def test_the_committed_readme_passes_the_check() -> None:
    checked = cog("--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_drifted_block_fails_the_check_and_regenerating_restores_it(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    text = copy.read_text(encoding="utf-8")
    lines = text.splitlines()
    # A row deep in the supported table, and the first line of the build-speed table.
    row = next(n for n, line in enumerate(lines) if line.startswith("| torch-tensorrt-rtx |"))
    code = next(n for n, line in enumerate(lines) if 'results.table("build-speed")' in line)
    edited = {row: "| typed by hand |", code + 1: "| a header typed by hand |"}
    copy.write_text("\n".join(edited.get(n, line) for n, line in enumerate(lines)) + "\n")
    drifted = copy.read_bytes()

    checked = cog("--check", "--diff", readme=copy)
    assert checked.returncode != 0 and copy.read_bytes() == drifted
    removed = [line[1:] for line in checked.stdout.splitlines() if line.startswith("-| ")]
    added = [line[1:] for line in checked.stdout.splitlines() if line.startswith("+| ")]
    assert removed == list(edited.values()) and added == [lines[row], lines[code + 1]]
    # The diff's context names a block when the drift is in its first lines.
    assert " " + lines[code] in checked.stdout.splitlines()

    assert cog("-r", readme=copy).returncode == 0
    assert copy.read_bytes() == README.read_bytes()
    assert cog("--check", readme=copy).returncode == 0


def test_a_block_that_cannot_be_made_fails_the_check(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    text = copy.read_text(encoding="utf-8").replace('table("host-heap")', 'table("nothing")')
    copy.write_text(text, encoding="utf-8")
    checked = cog("--check", readme=copy)
    assert checked.returncode != 0 and "no table 'nothing'" in checked.stderr
    assert copy.read_text(encoding="utf-8") == text


def test_the_readme_matrix_is_made_by_the_build_tools_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's supported table is ``matrix.supported_table``'s (the docs' is too:
    ``test_docs_build.py``); change the function and the README follows."""
    copy = _copy(tmp_path)
    table = (["Distribution"], [["made by the tool"]])
    monkeypatch.setattr(matrix, "supported_table", lambda document: table)
    options = [str(results.REPOSITORY / word) if word != "-I" else word for word in OPTIONS]
    assert Cog().main(["cog", "-r", *options, str(copy)]) == 0
    assert "\n| made by the tool |\n" in copy.read_text(encoding="utf-8")
