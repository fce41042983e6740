"""A newcomer's mistakes, each answered by one line that names the problem and the fix.

Exit status 1 for a refused setting (2 for a command-line usage error), no traceback, and no
network needed to tell: the index given is one that refuses every connection.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from index_server import ServedIndex, serving
from patched_wheel.__main__ import main
from patched_wheel.paths import DEFAULT_CACHE_DIR, REPOSITORY
from patched_wheel.policy import FIXES, PLATFORMS, SUPPORTED_RELEASES
from wheel_helpers import LABEL, TEST_PLATFORM, TEST_PYTHON

SUPPORTED = ", ".join(SUPPORTED_RELEASES)
UNREACHABLE_INDEX = "http://127.0.0.1:9/simple"  # the discard port: the connection is refused
HOOKS = ", ".join(hook for fix in FIXES for hook in fix.hooks)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer below comes before any network: the index refuses connections."""
    monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE_INDEX)
    monkeypatch.setenv("PIP_RETRIES", "0")


def test_the_cli_without_packaging_says_what_to_install(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
        check=True,
        capture_output=True,
    )
    python = tmp_path / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    completed = subprocess.run(
        [str(python), str(REPOSITORY / "tools" / "patched_wheel"), "build"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr == (
        "error: the build tool needs the 'packaging' package, which this Python lacks; install "
        f"it with: {python.name} -m pip install 'packaging>=24'\n"
    )


MISSPELT = "TORCHTRT_BASE_VERISON is not a variable of the build; did you mean " + (
    "TORCHTRT_BASE_VERSION? Rename or unset it"
)


def test_a_misspelt_variable_is_refused_by_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TORCHTRT_BASE_VERISON", "2.12.0")
    assert main(["build", "--out", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err == f"error: {MISSPELT}\n"
    assert not (tmp_path / "dist").exists()


def test_a_misspelt_variable_is_refused_by_pip_wheel(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path / "dist")],
        cwd=REPOSITORY,
        env=dict(os.environ, TORCHTRT_BASE_VERISON="2.12.0"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert f"error: {MISSPELT}" in completed.stdout + completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    assert not list(tmp_path.glob("dist/*.whl"))


EARLY = [
    pytest.param(
        {"TORCHTRT_BASE_PLATFORM": "linux_x86_64"},
        f"the official wheels of torch-tensorrt {SUPPORTED_RELEASES[-1]} are not built for "
        f"'linux_x86_64'; their platforms are {', '.join(sorted(PLATFORMS))}: set "
        "TORCHTRT_BASE_PLATFORM (or --platform) to one of them",
        id="platform-without-manylinux",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "Installed"},
        "TORCHTRT_BASE_VERSION='Installed' is not a release; write 'installed' for the installed "
        "one",
        id="installed-capitalised",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "2.99.0"},
        f"torch-tensorrt 2.99.0 is not a supported base release; supported base releases are "
        f"{SUPPORTED} (a newer upstream release needs the lock refreshed: 'python "
        "tools/patched_wheel lock --release 2.99.0')",
        id="unknown-release",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "2.8.0"},
        f"torch-tensorrt 2.8.0 is older than {SUPPORTED_RELEASES[0]}, the first release with "
        f"every function the fixes hook into ({HOOKS}), so it cannot be patched; supported base "
        f"releases are {SUPPORTED}",
        id="too-old",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "2.13.0", "TORCHTRT_BASE_PYTHON": "3.9"},
        "the official wheels of torch-tensorrt 2.13.0 are not built for Python 3.9 on "
        f"{TEST_PLATFORM}; their Pythons there are 3.10, 3.11, 3.12, 3.13: set "
        "TORCHTRT_BASE_PYTHON (or --python) to one of them",
        id="python-the-release-lacks",
    ),
]


@pytest.mark.parametrize(("env", "message"), EARLY)
def test_values_are_checked_before_the_network(
    env: Dict[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if env.get("TORCHTRT_BASE_PYTHON"):
        monkeypatch.setenv("TORCHTRT_BASE_PLATFORM", TEST_PLATFORM)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = ["build", "--out", str(tmp_path / "dist"), "--cache", str(tmp_path / "cache")]
    assert main(argv) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize("command", ["matrix", "lock"])
def test_help_shows_defaults_and_repeatable_options(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option, paths unbroken
    with pytest.raises(SystemExit) as exit_status:
        main([command, "--help"])
    assert exit_status.value.code == 0
    text = capsys.readouterr().out
    assert "3.9" not in text
    assert text.count("repeat for more") == 3
    assert "a Python version; repeat for more (default: 3.10, 3.11, 3.12, 3.13, 3.14)" in text
    if command == "matrix":
        assert "output folder (default: dist/matrix)" in text
        assert f"folder of downloaded official wheels (default: {DEFAULT_CACHE_DIR})" in text


def test_matrix_asks_the_index_of_pips_configuration_file(
    base_wheels: Dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    official = base_wheels["2.13.0"]
    with serving(ServedIndex.of(official)) as index:
        config = tmp_path / "pip.conf"
        config.write_text(f"[global]\nindex-url = {index.url}\n")
        monkeypatch.delenv("PIP_INDEX_URL")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
        argv = ["matrix", "--release", "2.13.0", "--platform", TEST_PLATFORM]
        argv += ["--python", TEST_PYTHON, "--out", str(tmp_path / "m")]
        assert main(argv + ["--cache", str(official.parent)]) == 0
        assert "/simple/torch-tensorrt/" in index.requests
    assert f"2.13.0+{LABEL}" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("git") is None, reason="git is required")
@pytest.mark.skipif(not (REPOSITORY / ".git").exists(), reason="not a git checkout")
def test_pip_installs_from_a_git_url_at_a_commit(
    base_wheels: Dict[str, Path], tmp_path: Path
) -> None:
    """The README's git form, ``git+<url>@<commit>``, against a local clone (no tags needed)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPOSITORY), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    base = base_wheels["2.13.0"]
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w"]
        + [str(tmp_path / "dist"), f"git+{clone.as_uri()}@{commit}"],
        env=dict(os.environ, TORCHTRT_BASE_WHEEL=str(base)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [p.name for p in (tmp_path / "dist").iterdir()] == [
        base.name.replace("2.13.0", f"2.13.0+{LABEL}")
    ]
