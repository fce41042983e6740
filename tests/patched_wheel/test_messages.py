"""What a newcomer meets first: the settings' refusals, the lock's answers, the CLI's help."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_wheel, run_tool
from installed_helpers import official_wheel
from patched_wheel import PatchError
from patched_wheel.config import LOCK_FILE, REPOSITORY
from patched_wheel.lock import load_lock
from patched_wheel.settings import BaseRequest, choice_from_environment


@pytest.mark.parametrize(
    "environ, fragment",
    [
        pytest.param({"TORCHTRT_BASE_RELEASE": "2.13.0"}, "did you mean TORCHTRT_BASE_VERSION (the CLI's --release)", id="alias"),
        pytest.param({"TORCHTRT_BSAE_VERSION": "2.13.0"}, "did you mean TORCHTRT_BASE_VERSION?", id="near-miss"),
        pytest.param({"torchtrt_base_version": "2.13.0"}, "torchtrt_base_version is not read: environment variables are case-sensitive; did you mean TORCHTRT_BASE_VERSION?", id="lower-case", marks=pytest.mark.skipif(sys.platform == "win32", reason="Windows environment names are case-insensitive")),
    ],
)  # fmt: skip
def test_a_variable_the_build_does_not_read_is_refused(environ: dict, fragment: str) -> None:
    with pytest.raises(PatchError, match=re.escape(fragment)):
        choice_from_environment(environ)


def test_a_release_newer_than_the_lock_says_who_adds_it() -> None:
    message = load_lock().unknown_request(BaseRequest("2.15.0"))
    assert (
        "2.14.0 is the newest the lock knows; if upstream has released 2.15.0, a maintainer"
        in message
    )
    assert "'python tools/patched_wheel lock --release 2.15.0 --distribution" in message


def test_lock_of_a_release_the_index_lacks_fails_and_keeps_the_lock(tmp_path: Path) -> None:
    index = tmp_path / "index"  # pip's find-links folder: an index of two releases' wheels
    make_wheel(index, version="2.13.0")
    make_wheel(index, version="2.14.0")
    lock = tmp_path / "lock.json"  # the lock without the wheels the index has (a new release)
    wheels = json.loads(LOCK_FILE.read_text())["wheels"]
    kept = {
        name: sha256
        for name, sha256 in wheels.items()
        if not name.startswith("torch_tensorrt-2.14.0-")
    }
    lock.write_text(json.dumps({"wheels": kept}))
    before = lock.read_bytes()
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    asked = ["--platform", "manylinux_2_28_x86_64", "--python", "3.11", "--lock", str(lock)]
    asked += ["--distribution", "torch-tensorrt"]
    done = run_tool(REPOSITORY, "lock", "--release", "2.15.0", *asked, **offline)
    assert done.returncode == 1 and lock.read_bytes() == before, done.stderr
    assert (
        "the index has no wheels of torch-tensorrt 2.15.0 (its newest release is 2.14.0)"
        in done.stderr
    )
    done = run_tool(
        REPOSITORY, "lock", "--release", "2.14.0", *asked, "--python", "3.12", **offline
    )
    assert done.returncode == 0 and "1 of 2 wheels not on the index" in done.stderr, done.stderr
    assert (
        "torch_tensorrt-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
        in json.loads(lock.read_text())["wheels"]
    )


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


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param({"UV_OFFLINE": "1"}, id="offline"),
        pytest.param({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "file:///nonexistent", "PIP_FIND_LINKS": ""}, id="download-fails"),
    ],
)  # fmt: skip
def test_a_run_that_cannot_download_says_to_fetch_the_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    request = BaseRequest("2.14.0", "manylinux_2_28_x86_64", "3.11")
    with pytest.raises(pytest.fail.Exception, match="is not in .* and this run cannot download: run 'python3 tests/fetch_wheels.py' once with network"):  # fmt: skip
        official_wheel(request, tmp_path)


@pytest.mark.network  # downloads what the cache lacks (offline: passes once it is filled)
def test_fetch_wheels_fetches_each_file_once_and_sums_up() -> None:
    script = REPOSITORY / "tests" / "fetch_wheels.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    summary = re.fullmatch(r"fetch_wheels: (\d+) official wheels in \.cache/base-wheels \((\d+) downloaded, (\d+) already there\); build requirements in \.cache/build-requirements", lines[-1])  # fmt: skip
    assert summary is not None and int(summary[1]) == int(summary[2]) + int(summary[3]), lines[-1]
    fetched = [line for line in lines if line.endswith(".whl") and " " not in line]
    assert len(fetched) == len(set(fetched)) == int(summary[2]), done.stdout


COMMANDS = ("build", "matrix", "lock", "index", "verify", "provenance", "register-overlay")


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    from patched_wheel.__main__ import main

    with pytest.raises(SystemExit, match="0"):
        main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_says_what_it_does(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    description = help_of(command, capsys).split("\n\n")[1]
    assert not description.startswith(("usage", "positional", "options")), description


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


def test_an_unreachable_index_is_said_in_one_line(tmp_path: Path) -> None:
    """No network (here: an index address where nothing listens): one line that says the
    index could not be reached, no traceback, no wheel."""
    unreachable = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "1"}
    unreachable.update(PIP_EXTRA_INDEX_URL="", PIP_FIND_LINKS="", PIP_TIMEOUT="2")
    unreachable.update(PIP_NO_INDEX="0", PIP_CONFIG_FILE=os.devnull)  # not the caller's pip
    done = run_tool(
        REPOSITORY, "build", "--release", "2.13.0", "--platform", "manylinux_2_28_x86_64",
        "--python", "3.11", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
        **unreachable,
    )  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and len(errors) == 1, done.stderr
    assert "the package index could not be reached" in errors[0]
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


# --- No traceback, nothing half-written (issue 35) ----------------------------------------------
@pytest.mark.parametrize("command", ["build", "matrix"])
def test_an_output_folder_that_is_a_file_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "out").write_text("a file")
    base = make_wheel(tmp_path / "cache")
    options = ["--base-wheel", str(base)] if command == "build" else ["--release", "2.14.0"]
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
