"""What a newcomer meets first: the settings' refusals, the lock's answers, the CLI's help."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from patched_wheel.config import DEFAULT_RELEASE, REPOSITORY

from tests.patched_wheel.helpers import TAGS, Released, build, make_wheel, names, refusal, run_tool


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
    install = f"{python.name} -m pip install 'packaging>=24'"  # what to do, for this Python
    pip_wheel = [str(python), "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps"]
    pip_wheel += ["--no-index", "-w", str(tmp_path / "out")]
    environ = {"PYTHONPATH": str(tmp_path / "path")}
    done = subprocess.run(pip_wheel, cwd=REPOSITORY, env=environ, capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    assert list(tmp_path.glob("out/*.whl")) == []
    output = (done.stdout + done.stderr).splitlines()
    (line,) = [line.strip() for line in output if "'packaging'" in line]  # the backend's one
    assert names(line, install).startswith("error: ")
    tool = [str(python), "tools/patched_wheel", "--help"]
    done = subprocess.run(tool, cwd=REPOSITORY, capture_output=True, text=True)
    refusal(done, "'packaging'", install)
    assert done.stderr.count("\n") == 1 and done.stdout == ""


COMMANDS = ("build", "matrix", "lock", "index", "verify", "provenance", "register-overlay")


def output_of(arguments: List[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What the command line prints for ``arguments``, which end it with exit status 0."""
    from patched_wheel.__main__ import main

    with pytest.raises(SystemExit) as ended:
        main(arguments)
    assert ended.value.code == 0
    return capsys.readouterr().out


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    return output_of([command, "--help"], capsys)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_says_what_it_does(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Its help's first paragraph is what it does (its runner's docstring, else its summary),
    and the tool's own help lists it with its summary."""
    from patched_wheel import __main__ as cli

    summary, run = cli.COMMANDS[command]
    description = help_of(command, capsys).split("\n\n")[1]
    expected = inspect.cleandoc(run.__doc__ or summary).split("\n\n")[0]
    assert description.split() == expected.split()
    assert f" {command} {summary} " in " ".join(output_of(["--help"], capsys).split())


@pytest.mark.parametrize("command", ["build", "matrix", "verify", "index"])
def test_default_paths_are_shown_whole_and_relative(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")  # narrow: each of these paths fills a line
    words = {word.strip("(),") for word in help_of(command, capsys).split()}
    assert {"tools/patched_wheel/official_wheels.lock.json", ".cache/base-wheels"} <= words
    assert not any(word.startswith("/") for word in words), "a default shown as an absolute path"


def test_the_help_names_this_machines_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from patched_wheel.settings import platforms_serving

    words = {word.strip("(),") for word in help_of("build", capsys).split()}
    here = [tag for tag in platforms_serving(None) if not tag.startswith("linux_")][:1]
    assert {*here, f"{sys.version_info[0]}.{sys.version_info[1]}", DEFAULT_RELEASE} <= words


def test_version_names_the_label_a_build_gives(capsys: pytest.CaptureFixture[str]) -> None:
    from patched_wheel.patch import current_label, read_overlay

    out = output_of(["--version"], capsys)
    assert out.endswith("\n")
    names(out[:-1], current_label(), read_overlay()[0].sha256[:8], DEFAULT_RELEASE)


def test_the_docs_matrix_names_the_command_that_wrote_it(tmp_path: Path) -> None:
    from patched_wheel.matrix import MatrixEntry, update_docs

    tags = "cp311-cp311-manylinux_2_28_x86_64"
    base = f"torch_tensorrt-{DEFAULT_RELEASE}-{tags}.whl"
    patched = f"torch_tensorrt-{DEFAULT_RELEASE}+memfix1.2-{tags}.whl"
    entry = MatrixEntry(DEFAULT_RELEASE, "manylinux_2_28_x86_64", "3.11", base, patched, 0.1)
    update_docs([entry], docs_matrix=tmp_path / "matrix.json")
    about = json.loads((tmp_path / "matrix.json").read_text())["about"]
    assert about.endswith(" python tools/patched_wheel matrix --update-docs")


# --- No traceback, nothing half-written (issue 35) ----------------------------------------------
@pytest.mark.parametrize("command", ["build", "matrix"])
def test_an_output_folder_that_is_a_file_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "out").write_text("a file")
    base = make_wheel(tmp_path / "cache")
    options = ["--base-wheel", str(base)] if command == "build" else ["--release", DEFAULT_RELEASE]
    done = run_tool(REPOSITORY, command, *options, "--out", str(tmp_path / "out"))
    refusal(done, f"--out {str(tmp_path / 'out')!r}")
    assert (tmp_path / "out").read_text() == "a file"


def test_site_refuses_a_symlink_as_its_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    done = run_tool(REPOSITORY, "site", "--out", str(tmp_path / "link"))
    refusal(done, repr(str(tmp_path / "link")))
    assert list((tmp_path / "real").iterdir()) == []


@pytest.mark.parametrize("epoch", ["\u00b2", "1e9", "-1", "99999999999999"])
def test_build_sdist_refuses_an_odd_source_date_epoch_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, epoch: str
) -> None:
    from patched_wheel import backend

    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    with pytest.raises(SystemExit) as refused:
        backend.build_sdist(str(tmp_path))
    assert names(refused.value.code, f"SOURCE_DATE_EPOCH={epoch!r}").startswith("error: ")
    assert not list(tmp_path.iterdir())


def test_a_refusal_to_read_the_overlay_asks_for_an_overlay(tmp_path: Path) -> None:
    """Missing, a folder, or larger than any overlay: the refusal names the path and what to
    give, an overlay; it never asks for a wheel file."""
    from patched_wheel import PatchError
    from patched_wheel.config import OVERLAY_PATH
    from patched_wheel.patch import read_overlay

    (tmp_path / "large.py").write_bytes(b"#" * (2 << 20))
    for path in (tmp_path / "missing.py", tmp_path, tmp_path / "large.py"):
        with pytest.raises(PatchError) as refused:
            read_overlay(path)
        text = names(refused.value, str(path), "overlay", OVERLAY_PATH)
        assert "wheel" not in text, text


def test_verify_names_the_variable_it_read_the_base_from(
    tmp_path: Path, released: Released
) -> None:
    """With TORCHTRT_BASE_WHEEL set, verify reads the base from it: its report says so, and a
    refusal of that file names the variable (not --base-wheel, which was not given)."""
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    options = ("--lock", str(lock), "--cache", str(cache))
    done = run_tool(repo, "verify", str(wheel), *options, TORCHTRT_BASE_WHEEL=str(base))
    assert done.returncode == 0, done.stderr
    names(
        next(line for line in done.stdout.splitlines() if str(base) in line), "TORCHTRT_BASE_WHEEL"
    )
    other = make_wheel(tmp_path / "other", version="2.99.0", utils=b"x = 1\n")
    done = run_tool(repo, "verify", str(wheel), *options, TORCHTRT_BASE_WHEEL=str(other))
    text = refusal(done, "TORCHTRT_BASE_WHEEL", str(other))
    assert "--base-wheel" not in text, text


def test_the_revision_line_says_plainly_whether_the_build_was_clean() -> None:
    """One statement per state, no double negative: a clean build's line denies nothing, a
    dirty one's says it is dirty, an unknown one's says it is not known."""
    from patched_wheel.provenance import Provenance, format_provenance

    from tests.patched_wheel.helpers import ORIGIN

    lines = {}
    for dirty in (False, True, None):
        provenance = Provenance(
            "2.99.0+memfix1.2",
            "memfix1.2",
            f"torch_tensorrt-2.99.0-{TAGS}.whl",
            "0" * 64,
            "1" * 64,
            ORIGIN.revision.revision,
            dirty,
            "2" * 64,
        )
        shown = format_provenance(provenance).splitlines()
        lines[dirty] = next(line for line in shown if line.startswith("revision:"))
    assert len(set(lines.values())) == 3, lines
    assert not {"not", "no"} & set(lines[False].replace("(", " ").split()), lines[False]
    assert "dirty" in lines[True] and "not known" in lines[None], lines
