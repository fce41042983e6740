"""Every generated block of the README, made and checked by one command (``readme.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import readme

COMMAND = [sys.executable, str(readme.results.REPOSITORY / "docsrc" / "_ext" / "readme.py")]


def _run(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=60)


def test_the_readme_has_not_drifted() -> None:
    text = readme.README.read_text(encoding="utf-8")
    assert readme.render(text) == text, "run python docsrc/_ext/readme.py"
    assert set(readme.BLOCK.findall(text)) and _run("--check").returncode == 0


def test_every_block_the_readme_holds_has_a_generator() -> None:
    names = [name for name, _ in readme.BLOCK.findall(readme.README.read_text(encoding="utf-8"))]
    assert {"supported-matrix", "memory-sizing", "build-speed"} <= set(names)
    assert set(names) <= set(readme.blocks())


def test_check_names_the_drifted_blocks_and_writes_nothing(tmp_path: Path) -> None:
    copy = tmp_path / "README.md"
    shutil.copy(readme.README, copy)
    text = copy.read_text(encoding="utf-8")
    matrix_row = next(line for line in text.splitlines() if line.startswith("| torch-tensorrt |"))
    changed = text.replace(matrix_row, "| typed by hand |").replace(" GiB |", " GB |", 1)
    copy.write_text(changed, encoding="utf-8")
    checked = _run("--check", "--readme", str(copy))
    assert checked.returncode == 1
    assert copy.read_text(encoding="utf-8") == changed
    drifted = checked.stderr.split("blocks differ: ")[1].split(";")[0].split(", ")
    assert "supported-matrix" in drifted and len(drifted) == 2
    assert _run("--readme", str(copy)).returncode == 0
    assert copy.read_text(encoding="utf-8") == text
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_unknown_block_is_an_error(tmp_path: Path) -> None:
    copy = tmp_path / "README.md"
    copy.write_text("<!-- nothing-here:start -->\n<!-- nothing-here:end -->\n", encoding="utf-8")
    failed = _run("--check", "--readme", str(copy))
    assert failed.returncode == 1 and "'nothing-here'" in failed.stderr


def test_the_matrix_block_sits_between_the_build_tools_markers() -> None:
    """The tool (``matrix --update-docs``) and readme.py write the same block, so neither
    undoes the other."""
    from patched_wheel import matrix

    text = readme.README.read_text(encoding="utf-8")
    start, end = text.index(matrix.START_MARKER), text.index(matrix.END_MARKER)
    written = text[start + len(matrix.START_MARKER) + 1 : end]
    assert written == readme.results.markdown(readme.results.matrix_table())
