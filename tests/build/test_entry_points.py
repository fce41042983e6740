"""The entry points: ``pip wheel .``, ``python -m build``, each variable, and the commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict

import pytest
from build_helpers import fetch

from patched_wheel.__main__ import main
from patched_wheel.base import REPOSITORY, BaseRequest
from patched_wheel.lock import load_lock, refresh_lock, write_lock
from patched_wheel.matrix import (
    DOCS_MATRIX,
    END_MARKER,
    README,
    START_MARKER,
    MatrixEntry,
    readme_table,
    update_docs,
)
from patched_wheel.wheelfile import sha256_of_file

PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def pip_wheel(dest: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``pip wheel . --no-deps -w dest`` in the repository, as the README says."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", str(dest)],
        cwd=REPOSITORY,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        check=False,
    )


def test_pip_wheel_builds_the_default_base(tmp_path: Path) -> None:
    fetch("2.14.0", f"{sys.version_info.major}.{sys.version_info.minor}", _running_platform())
    completed = pip_wheel(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(f"torch_tensorrt-2.14.0+memfix1-{PY_TAG}-{PY_TAG}-")


def test_pip_wheel_refuses_an_unsupported_release(tmp_path: Path) -> None:
    completed = pip_wheel(tmp_path, TORCHTRT_BASE_VERSION="2.9.0")
    assert completed.returncode != 0
    output = completed.stdout + completed.stderr
    assert "no top-level 'release_host_and_device_memory'" in output
    assert "Supported base releases are 2.10.0, 2.11.0, 2.12.0, 2.12.1, 2.13.0, 2.14.0" in output
    assert list(tmp_path.glob("*.whl")) == []


def test_python_m_build_with_a_given_base_wheel(tmp_path: Path) -> None:
    base = fetch("2.13.0")
    completed = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(REPOSITORY)],
        env=dict(os.environ, TORCHTRT_BASE_WHEEL=str(base)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name == base.name.replace("2.13.0", "2.13.0+memfix1")


def _running_platform() -> str:
    return sysconfig.get_platform().replace("linux", "manylinux_2_28").replace("-", "_")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param(
            {"TORCHTRT_BASE_VERSION": "2.12.1", "TORCHTRT_BASE_PYTHON": "3.11"},
            "torch_tensorrt-2.12.1+memfix1-cp311-cp311-",
            id="version-and-python",
        ),
        pytest.param(
            {
                "TORCHTRT_BASE_VERSION": "2.11.0",
                "TORCHTRT_BASE_PLATFORM": "manylinux_2_28_aarch64",
                "TORCHTRT_BASE_PYTHON": "3.12",
            },
            "torch_tensorrt-2.11.0+memfix1-cp312-cp312-manylinux_2_28_aarch64.whl",
            id="version-platform-python",
        ),
        pytest.param(
            {"TORCHTRT_BASE_PLATFORM": "win_amd64", "TORCHTRT_BASE_PYTHON": "3.11"},
            "torch_tensorrt-2.14.0+memfix1-cp311-cp311-win_amd64.whl",
            id="platform-only-windows",
        ),
    ],
)
def test_variables_choose_the_base(
    env: Dict[str, str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["build", "--dest", str(tmp_path)]) == 0
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(expected)
    assert capsys.readouterr().out.strip() == str(wheel)


def test_base_wheel_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = fetch("2.13.0")
    monkeypatch.setenv("TORCHTRT_BASE_WHEEL", str(base))
    assert main(["build", "--dest", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(
        tmp_path / base.name.replace("2.13.0", "2.13.0+memfix1")
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"TORCHTRT_BASE_WHEEL": "/no/such.whl"},
            "TORCHTRT_BASE_WHEEL='/no/such.whl' is not a file; give the path of an official "
            "torch-tensorrt wheel",
            id="missing-wheel",
        ),
        pytest.param(
            {"TORCHTRT_BASE_WHEEL": "/no/such.whl", "TORCHTRT_BASE_VERSION": "2.14.0"},
            "TORCHTRT_BASE_WHEEL is set together with TORCHTRT_BASE_VERSION; the wheel's name "
            "already fixes release, platform and Python, so unset the others",
            id="wheel-and-version",
        ),
        pytest.param(
            {"TORCHTRT_BASE_VERSION": "2.14"},
            "TORCHTRT_BASE_VERSION='2.14' is not a release such as '2.14.0'; supported base "
            "releases are 2.10.0, 2.11.0, 2.12.0, 2.12.1, 2.13.0, 2.14.0",
            id="short-version",
        ),
        pytest.param(
            {"TORCHTRT_BASE_PYTHON": "3"},
            "TORCHTRT_BASE_PYTHON='3' is not a Python version such as '3.12'; give major.minor",
            id="bad-python",
        ),
        pytest.param(
            {"TORCHTRT_BASE_VERSION": "2.13.0", "TORCHTRT_BASE_PYTHON": "3.9"},
            "PyPI has no official wheel of torch-tensorrt==2.13.0 for Python 3.9 on this "
            "platform; pick another with TORCHTRT_BASE_VERSION, TORCHTRT_BASE_PLATFORM and "
            "TORCHTRT_BASE_PYTHON (supported base releases are 2.10.0, 2.11.0, 2.12.0, 2.12.1, "
            "2.13.0, 2.14.0)",
            id="not-on-pypi",
        ),
    ],
)
def test_bad_variables_exit_1_with_a_message(
    env: Dict[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["build", "--dest", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "dist").exists()


def test_matrix_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fetch("2.13.0")
    argv = ["matrix", "--release", "2.13.0", "--platform", "manylinux_2_28_x86_64"]
    assert main(argv + ["--python", "3.11", "--python", "3.9", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    name = "torch_tensorrt-2.13.0+memfix1-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert re.search(rf"^\[  1/1\] {re.escape(name)} \(\d+\.\d\d s\)$", out, re.M)
    assert re.search(r"^2\.13\.0 +1 +0 +\d+\.\d$", out, re.M)
    document = json.loads((tmp_path / "supported_matrix.json").read_text())
    assert document["releases"] == [
        {
            "release": "2.13.0",
            "wheels": [
                {
                    "platform": "manylinux_2_28_x86_64",
                    "python": "3.11",
                    "base_wheel": name.replace("+memfix1", ""),
                    "patched_wheel": name,
                }
            ],
        }
    ]


def test_update_docs_rewrites_only_the_marked_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{START_MARKER}\nold\n{END_MARKER}\nafter\n")
    entries = [
        MatrixEntry("2.14.0", "win_amd64", "3.12", "b.whl", "p.whl", 1.0),
        MatrixEntry("2.14.0", "manylinux_2_28_x86_64", "3.10", "b.whl", "p.whl", 1.0),
        MatrixEntry("2.14.0", "manylinux_2_28_x86_64", "3.9", "b.whl", None, 1.0, "refused"),
    ]
    update_docs(entries, docs_matrix=tmp_path / "m.json", readme=readme)
    assert readme.read_text() == (
        f"before\n{START_MARKER}\n"
        "| Base release | Linux x86_64 | Windows x86_64 |\n"
        "| --- | --- | --- |\n"
        "| 2.14.0 | 3.10 | 3.12 |\n"
        f"{END_MARKER}\nafter\n"
    )
    assert json.loads((tmp_path / "m.json").read_text())["local_label"] == "memfix1"


def test_committed_readme_table_is_the_generated_one() -> None:
    document = json.loads(DOCS_MATRIX.read_text())
    entries = [
        MatrixEntry(
            release["release"],
            wheel["platform"],
            wheel["python"],
            wheel["base_wheel"],
            wheel["patched_wheel"],
            0.0,
            wheel.get("error"),
        )
        for release in document["releases"]
        for wheel in release["wheels"]
    ]
    text = README.read_text()
    block = text[text.index(START_MARKER) + len(START_MARKER) : text.index(END_MARKER)]
    assert block.strip() == readme_table(entries)


def test_lock_refresh_records_the_sha256_and_keeps_other_releases(tmp_path: Path) -> None:
    base = fetch("2.13.0")
    lock_file = tmp_path / "lock.json"
    write_lock({"torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32}, lock_file)
    request = BaseRequest("2.13.0", "manylinux_2_28_x86_64", "3.11")
    refresh_lock([request], base.parent, path=lock_file)
    assert load_lock(lock_file) == {
        "torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32,
        base.name: sha256_of_file(base),
    }


def test_cli_runs_as_a_script_folder() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "tools" / "patched_wheel"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "{build,matrix,index,verify,lock}" in completed.stdout
