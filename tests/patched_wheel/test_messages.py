"""What a newcomer meets first: the settings' refusals, the lock's answers, the CLI's help."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_wheel, run_tool
from patched_wheel.config import DEFAULT_RELEASE, REPOSITORY


@pytest.mark.skipif(sys.platform == "win32", reason="the venv's Python is bin/python on POSIX")
def test_a_python_without_packaging_is_told_in_one_line(tmp_path: Path) -> None:
    """``pip wheel . --no-build-isolation`` builds with the running Python's packages: in a
    venv without ``packaging`` (pip vendors its own), the backend says so in one line."""
    import pip

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True
    )
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "pip").symlink_to(Path(pip.__file__).parent)
    python = tmp_path / "venv" / "bin" / "python"
    command = [
        str(python),
        "-m",
        "pip",
        "wheel",
        ".",
        "--no-build-isolation",
        "--no-deps",
        "--no-index",
    ]
    done = subprocess.run(command + ["-w", str(tmp_path)], cwd=REPOSITORY, env={"PYTHONPATH": str(tmp_path / "path")}, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    assert (
        "error: the build needs the 'packaging' package, which this Python lacks"
        in done.stdout + done.stderr
    )
    done = subprocess.run([str(python), "tools/patched_wheel", "--help"], cwd=REPOSITORY, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "install it with: python -m pip install 'packaging>=24'" in done.stderr


COMMANDS = ("build", "matrix", "lock", "index", "verify", "provenance", "register-overlay")


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    from patched_wheel.__main__ import main

    with pytest.raises(SystemExit, match="0"):
        main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_says_what_it_does(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Its help's first paragraph is what it does (its runner's docstring, else its summary),
    and the tool's own help lists it with its summary."""
    from patched_wheel import __main__ as cli

    summary, run = cli.COMMANDS[command]
    description = help_of(command, capsys).split("\n\n")[1]
    expected = inspect.cleandoc(run.__doc__ or summary).split("\n\n")[0]
    assert description.split() == expected.split()
    with pytest.raises(SystemExit, match="0"):
        cli.main(["--help"])
    assert f" {command} {summary} " in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["build", "matrix", "verify", "index"])
def test_default_paths_are_shown_whole_and_relative(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")  # narrow: each of these paths fills a line
    words = {word.strip("(),") for word in help_of(command, capsys).split()}
    assert {"tools/patched_wheel/official_wheels.lock.json", ".cache/base-wheels"} <= words
    assert not any(word.startswith("/") for word in words), "a default shown as an absolute path"


def test_the_help_says_the_defaults_and_who_a_command_is_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = " ".join(help_of("build", capsys).split())
    assert "(default: this machine's, " in text
    assert (
        f"(default: the running Python, {sys.version_info[0]}.{sys.version_info[1]} here)" in text
    )
    assert help_of("register-overlay", capsys).split("\n\n")[1].startswith("(maintainers)")


def test_version_names_the_label_a_build_gives(capsys: pytest.CaptureFixture[str]) -> None:
    from patched_wheel.__main__ import main

    with pytest.raises(SystemExit, match="0"):
        main(["--version"])
    assert re.fullmatch(r"patched_wheel memfix1\.(\d+|dev\d+\.g[0-9a-f]{10}) \(overlay sha256 [0-9a-f]{8}\), default base release 2\.14\.0\n", capsys.readouterr().out)  # fmt: skip


def test_only_update_docs_says_it_wrote_the_docs_matrix(tmp_path: Path) -> None:
    from patched_wheel.matrix import MatrixEntry, update_docs

    tags = "cp311-cp311-manylinux_2_28_x86_64"
    entry = MatrixEntry("2.14.0", "manylinux_2_28_x86_64", "3.11", f"torch_tensorrt-2.14.0-{tags}.whl", f"torch_tensorrt-2.14.0+memfix1.2-{tags}.whl", 0.1)  # fmt: skip
    readme = tmp_path / "README.md"
    readme.write_text("<!-- supported-matrix:start -->\n<!-- supported-matrix:end -->\n")
    update_docs([entry], docs_matrix=tmp_path / "matrix.json", readme=readme)
    about = json.loads((tmp_path / "matrix.json").read_text())["about"]
    assert about.endswith("Generated by: python tools/patched_wheel matrix --update-docs")


# --- No traceback, nothing half-written (issue 35) ----------------------------------------------
@pytest.mark.parametrize("command", ["build", "matrix"])
def test_an_output_folder_that_is_a_file_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "out").write_text("a file")
    base = make_wheel(tmp_path / "cache")
    options = ["--base-wheel", str(base)] if command == "build" else ["--release", DEFAULT_RELEASE]
    done = run_tool(REPOSITORY, command, *options, "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "is a file, not a folder" in done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "out").read_text() == "a file"


def test_site_refuses_a_symlink_as_its_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    done = run_tool(REPOSITORY, "site", "--out", str(tmp_path / "link"))
    assert done.returncode == 1 and "is a symlink" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("epoch", ["\u00b2", "1e9", "-1", "99999999999999"])
def test_build_sdist_refuses_an_odd_source_date_epoch_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, epoch: str
) -> None:
    from patched_wheel import backend

    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    with pytest.raises(SystemExit, match="SOURCE_DATE_EPOCH=.* is not a time a zip file can hold"):
        backend.build_sdist(str(tmp_path))
    assert not list(tmp_path.iterdir())
