"""The entry points: ``pip wheel .``, ``python -m build``, each variable, and the commands."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from index_server import ServedIndex, serving
from patched_wheel.__main__ import main
from patched_wheel.backend import prepare_metadata_for_build_wheel
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.choice import choice_from_environment
from patched_wheel.lock import load_lock, write_lock
from patched_wheel.matrix import (
    END_MARKER,
    START_MARKER,
    MatrixEntry,
    readme_table,
    update_docs,
)
from patched_wheel.paths import DOCS_MATRIX, README, REPOSITORY
from patched_wheel.policy import SUPPORTED_RELEASES
from patched_wheel.provenance import REVISION_FILE, source_revision
from patched_wheel.refresh import refresh_lock
from patched_wheel.request import BaseRequest
from patched_wheel.wheelfile import parse_headers
from wheel_helpers import LABEL, TEST_PLATFORM, fetch, sha256

PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
RUNNING_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
SUPPORTED = ", ".join(SUPPORTED_RELEASES)
UNREACHABLE_INDEX = "http://127.0.0.1:9/simple"  # the discard port: the connection is refused


def pip_wheel(dest: Path, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``pip wheel . --no-deps -w dest`` in the repository, as the README says."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", str(dest), *options],
        cwd=REPOSITORY,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        check=False,
    )


def _running_platform() -> str:
    return sysconfig.get_platform().replace("linux", "manylinux_2_28").replace("-", "_")


@pytest.mark.network
def test_pip_wheel_builds_the_default_base(tmp_path: Path) -> None:
    fetch(SUPPORTED_RELEASES[-1], RUNNING_PYTHON, _running_platform())
    completed = pip_wheel(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(f"torch_tensorrt-{SUPPORTED_RELEASES[-1]}+{LABEL}-{PY_TAG}-")


@pytest.mark.network
def test_pip_wheel_refuses_an_unsupported_release(tmp_path: Path, unsupported_wheel: Path) -> None:
    completed = pip_wheel(tmp_path, TORCHTRT_BASE_WHEEL=str(unsupported_wheel))
    assert completed.returncode != 0
    output = completed.stdout + completed.stderr
    assert "no top-level 'release_host_and_device_memory'" in output
    assert f"Supported base releases are {SUPPORTED}" in output
    assert list(tmp_path.glob("*.whl")) == []


def test_python_m_build_through_the_sdist_equals_pip_wheel(
    tmp_path: Path, base_wheels: Dict[str, Path]
) -> None:
    """``python -m build`` makes the sdist, then the wheel from it: the same bytes as
    ``pip wheel .``. Both without build isolation (its cost is the same for both and is
    covered by the test of ``pip wheel .`` above), so the test needs no index."""
    base = base_wheels["2.13.0"]
    completed = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "build")]
        + [str(REPOSITORY)],
        env=dict(os.environ, TORCHTRT_BASE_WHEEL=str(base)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (sdist,) = (tmp_path / "build").glob("*.tar.gz")
    (wheel,) = (tmp_path / "build").glob("*.whl")
    assert wheel.name == base.name.replace("2.13.0", f"2.13.0+{LABEL}")
    options = ("--no-build-isolation", "--no-index")
    piped = pip_wheel(tmp_path / "pip", *options, TORCHTRT_BASE_WHEEL=str(base))
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert sha256(wheel) == sha256(tmp_path / "pip" / wheel.name)
    assert sdist.name.startswith(f"torch_tensorrt-2.13.0+{LABEL}")
    # The sdist carries the revision (it has no .git), so both wheels' records name it.
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name[: -len('.tar.gz')]}/{REVISION_FILE}")
        assert member is not None
        assert json.loads(member.read()) == source_revision().as_dict()
    assert not (REPOSITORY / REVISION_FILE).exists()  # written for the sdist only


@pytest.mark.network
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param(
            {"TORCHTRT_BASE_VERSION": "2.12.1", "TORCHTRT_BASE_PYTHON": "3.11"},
            f"torch_tensorrt-2.12.1+{LABEL}-cp311-cp311-",
            id="version-and-python",
        ),
        pytest.param(
            {
                "TORCHTRT_BASE_VERSION": "2.11.0",
                "TORCHTRT_BASE_PLATFORM": "manylinux_2_28_aarch64",
                "TORCHTRT_BASE_PYTHON": "3.12",
            },
            f"torch_tensorrt-2.11.0+{LABEL}-cp312-cp312-manylinux_2_28_aarch64.whl",
            id="version-platform-python",
        ),
        pytest.param(
            {"TORCHTRT_BASE_PLATFORM": "win_amd64", "TORCHTRT_BASE_PYTHON": "3.11"},
            f"torch_tensorrt-{SUPPORTED_RELEASES[-1]}+{LABEL}-cp311-cp311-win_amd64.whl",
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
    assert main(["build", "--out", str(tmp_path)]) == 0
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith(expected)
    assert capsys.readouterr().out.strip() == str(wheel)


def test_base_wheel_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    base_wheels: Dict[str, Path],
) -> None:
    base = base_wheels["2.13.0"]
    monkeypatch.setenv("TORCHTRT_BASE_WHEEL", str(base))
    assert main(["build", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(
        tmp_path / base.name.replace("2.13.0", f"2.13.0+{LABEL}")
    )


BAD_VARIABLES = [
    pytest.param(
        {"TORCHTRT_BASE_WHEEL": "/no/such.whl"},
        "TORCHTRT_BASE_WHEEL '/no/such.whl' cannot be read (No such file or directory); give "
        "the path of an official torch-tensorrt wheel file",
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
        f"TORCHTRT_BASE_VERSION='2.14' is not a release such as '{SUPPORTED_RELEASES[-1]}'; "
        f"supported base releases are {SUPPORTED}",
        id="short-version",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "v2.14.0"},
        "TORCHTRT_BASE_VERSION='v2.14.0' is not a canonical release; write '2.14.0'",
        id="v-prefix",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": " 2.14.0"},
        "TORCHTRT_BASE_VERSION=' 2.14.0' is not a canonical release; write '2.14.0'",
        id="leading-space",
    ),
    pytest.param(
        {"TORCHTRT_BASE_VERSION": "2.14.00"},
        "TORCHTRT_BASE_VERSION='2.14.00' is not a canonical release; write '2.14.0'",
        id="padded",
    ),
    pytest.param(
        {"TORCHTRT_BASE_PYTHON": "3"},
        "TORCHTRT_BASE_PYTHON='3' is not a Python version such as '3.12'; give major.minor",
        id="bad-python",
    ),
    pytest.param(
        {"TORCHTRT_BASE_PLATFORM": "Linux x86"},
        "TORCHTRT_BASE_PLATFORM='Linux x86' is not a platform tag such as "
        "'manylinux_2_28_x86_64' or 'win_amd64'",
        id="bad-platform",
    ),
    pytest.param(
        {"TORCHTRT_BASE_UNLOCKED": "yes"},
        "TORCHTRT_BASE_UNLOCKED='yes' is not 0 or 1; set 1 to opt in",
        id="bad-unlocked",
    ),
]


@pytest.mark.parametrize(("env", "message"), BAD_VARIABLES)
def test_bad_variables_exit_1_with_a_message(
    env: Dict[str, str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["build", "--out", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "dist").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--release", "v2.14.0"],
            "argument --release: 'v2.14.0' is not a canonical release; write '2.14.0'",
            id="release-v-prefix",
        ),
        pytest.param(
            ["--release", "2.14.00"],
            "argument --release: '2.14.00' is not a canonical release; write '2.14.0'",
            id="release-padded",
        ),
        pytest.param(
            ["--python", "3"],
            "argument --python: '3' is not a Python version such as '3.12'; give major.minor",
            id="python",
        ),
        pytest.param(
            ["--base-wheel", "x.whl", "--release", "2.14.0"],
            "--base-wheel fixes release, platform and Python; leave those options out",
            id="wheel-and-release",
        ),
    ],
)
def test_bad_options_exit_2_with_a_message(
    argv: List[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_status:
        main(["build", "--out", str(tmp_path / "dist")] + argv)
    assert exit_status.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: {message}\n")
    assert not (tmp_path / "dist").exists()


def test_a_wheel_the_index_lacks_is_told_apart(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    base_wheels: Dict[str, Path],
) -> None:
    """A base the lock does not know (opted in) goes to pip; an index without it is not an
    unreachable one."""
    with serving(ServedIndex.of(base_wheels["2.13.0"])) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        argv = ["build", "--release", "2.13.0", "--python", "3.9", "--unlocked"]
        argv += ["--platform", TEST_PLATFORM, "--out", str(tmp_path / "dist")]
        assert main(argv + ["--cache", str(tmp_path / "cache")]) == 1
    assert capsys.readouterr().err == (
        "error: the package index has no official wheel of torch-tensorrt==2.13.0 for Python "
        "3.9 on manylinux_2_28_x86_64; pick another with TORCHTRT_BASE_VERSION, "
        "TORCHTRT_BASE_PLATFORM and TORCHTRT_BASE_PYTHON (or --release, --platform and --python)\n"
    )


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip and the build's own requests go to an index that refuses connections."""
    monkeypatch.setenv("PIP_INDEX_URL", UNREACHABLE_INDEX)
    monkeypatch.setenv("PIP_RETRIES", "0")


UNREACHABLE = re.escape(f"could not reach the package index {UNREACHABLE_INDEX}/torch-tensorrt/ (")


@pytest.mark.usefixtures("offline")
def test_an_unreachable_index_is_not_a_missing_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", "--release", "2.13.0", "--python", "3.12", "--out", str(tmp_path / "dist")]
    assert main(argv + ["--cache", str(tmp_path / "cache")]) == 1
    error = capsys.readouterr().err
    assert re.fullmatch(
        "error: "
        + UNREACHABLE
        + ".*"
        + re.escape("); check the network and the proxy, or set TORCHTRT_BASE_WHEEL to a ")
        + "downloaded official wheel\n",
        error,
    ), error
    assert not (tmp_path / "dist").exists()


@pytest.mark.usefixtures("offline")
def test_lock_offline_exits_1_and_leaves_the_lock_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_file = tmp_path / "lock.json"
    write_lock({"torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32}, lock_file)
    before = lock_file.read_bytes()
    assert main(["lock", "--release", "2.13.0", "--lock", str(lock_file)]) == 1
    assert re.match("error: " + UNREACHABLE, capsys.readouterr().err)
    assert lock_file.read_bytes() == before


@pytest.mark.usefixtures("offline")
def test_matrix_offline_exits_1_and_writes_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = {path: path.read_bytes() for path in (README, DOCS_MATRIX)}
    argv = ["matrix", "--release", "2.13.0", "--out", str(tmp_path / "out"), "--update-docs"]
    assert main(argv) == 1
    assert re.match("error: " + UNREACHABLE, capsys.readouterr().err)
    assert {path: path.read_bytes() for path in docs} == docs
    assert not (tmp_path / "out").exists()


def test_matrix_command(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base_wheels: Dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A combination the index lacks (Python 3.12 here) is passed over."""
    with serving(ServedIndex.of(base_wheels["2.13.0"])) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        argv = ["matrix", "--release", "2.13.0", "--platform", TEST_PLATFORM, "--python", "3.11"]
        assert main(argv + ["--python", "3.12", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    name = f"torch_tensorrt-2.13.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert re.search(rf"^\[  1/1\] {re.escape(name)} \(\d+\.\d\d s\)$", captured.err, re.M)
    assert re.search(r"^2\.13\.0 +1 +0 +\d+\.\d$", captured.out, re.M)
    document = json.loads((tmp_path / "supported_matrix.json").read_text())
    assert document["releases"] == [
        {
            "release": "2.13.0",
            "wheels": [
                {
                    "platform": "manylinux_2_28_x86_64",
                    "python": "3.11",
                    "base_wheel": name.replace(f"+{LABEL}", ""),
                    "patched_wheel": name,
                }
            ],
        }
    ]


# A patched wheel's name as the matrix gives it: the label in it is what the docs record.
PATCHED_NAME = f"torch_tensorrt-2.14.0+{LABEL}-cp312-cp312-win_amd64.whl"


def test_update_docs_rewrites_only_the_marked_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{START_MARKER}\nold\n{END_MARKER}\nafter\n")
    entries = [
        MatrixEntry("2.14.0", "win_amd64", "3.12", "b.whl", PATCHED_NAME, 1.0),
        MatrixEntry("2.14.0", "manylinux_2_28_x86_64", "3.10", "b.whl", PATCHED_NAME, 1.0),
    ]
    update_docs(entries, docs_matrix=tmp_path / "m.json", readme=readme)
    assert readme.read_text() == (
        f"before\n{START_MARKER}\n"
        "| Base release | Linux x86_64 | Windows x86_64 |\n"
        "| --- | --- | --- |\n"
        "| 2.14.0 | 3.10 | 3.12 |\n"
        f"{END_MARKER}\nafter\n"
    )
    assert json.loads((tmp_path / "m.json").read_text())["local_label"] == LABEL


def test_update_docs_never_writes_a_partial_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{START_MARKER}\nold\n{END_MARKER}\nafter\n")
    entries = [
        MatrixEntry("2.14.0", "win_amd64", "3.12", "b.whl", PATCHED_NAME, 1.0),
        MatrixEntry("2.14.0", "manylinux_2_28_x86_64", "3.10", "c.whl", None, 1.0, "refused"),
    ]
    with pytest.raises(Exception, match=re.escape("1 of 2 wheels were not built, so the docs")):
        update_docs(entries, docs_matrix=tmp_path / "m.json", readme=readme)
    assert readme.read_text() == f"before\n{START_MARKER}\nold\n{END_MARKER}\nafter\n"
    assert not (tmp_path / "m.json").exists()


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


@pytest.mark.network
@pytest.mark.pypi
def test_lock_refresh_takes_the_sha256_from_a_fresh_download(
    tmp_path: Path, base_wheels: Dict[str, Path]
) -> None:
    lock_file = tmp_path / "lock.json"
    write_lock({"torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32}, lock_file)
    request = BaseRequest("2.13.0", "manylinux_2_28_x86_64", "3.11")
    refresh_lock([request], path=lock_file)
    base = base_wheels["2.13.0"]
    assert load_lock(lock_file).wheels == {
        "torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32,
        base.name: load_lock().wheels[base.name],
    }


def test_cli_runs_as_a_script_folder() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "tools" / "patched_wheel"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "{build,matrix,lock,index,verify,provenance,register-overlay}" in completed.stdout


# --- Interruption --------------------------------------------------------------------------

CHILD = """\
import sys, time, zipfile
from pathlib import Path
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.lock import load_lock

base, out, marker = map(Path, sys.argv[1:])
wheel = read_base(base, lock=load_lock())
def stalled(self, *args, **kwargs):  # stands for a slow disk: the write takes a while
    marker.touch()
    time.sleep(60)
zipfile.ZipFile.writestr = stalled
build_patched_wheel(wheel, out_dir=out)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interruption_leaves_no_temporary_file(
    base_wheels: Dict[str, Path], tmp_path: Path, signum: int
) -> None:
    out, marker = tmp_path / "out", tmp_path / "writing"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(base_wheels["2.14.0"]), str(out), str(marker)],
        env=dict(os.environ, PYTHONPATH=str(REPOSITORY / "tools")),
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), child.communicate()[1]
    assert [p.name.endswith(".whl.tmp") for p in out.iterdir()] == [True]
    child.send_signal(signum)
    child.communicate(timeout=60)
    assert child.returncode != 0
    assert list(out.iterdir()) == []


CLI_CHILD = """\
import sys, time, zipfile
from pathlib import Path
from patched_wheel.__main__ import main

marker = Path(sys.argv[1])
def stalled(self, *args, **kwargs):  # stands for a slow disk: the write takes a while
    marker.touch()
    time.sleep(60)
zipfile.ZipFile.writestr = stalled
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_the_command_interrupted_mid_write_says_so_in_one_line(
    base_wheels: Dict[str, Path], tmp_path: Path, signum: int, status: int
) -> None:
    out, marker = tmp_path / "out", tmp_path / "writing"
    argv = ["build", "--base-wheel", str(base_wheels["2.14.0"]), "--out", str(out)]
    child = subprocess.Popen(
        [sys.executable, "-c", CLI_CHILD, str(marker), *argv],
        env=dict(os.environ, PYTHONPATH=str(REPOSITORY / "tools")),
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), child.communicate()[1]
    child.send_signal(signum)
    _, err = child.communicate(timeout=60)
    assert child.returncode == status
    name = signal.Signals(signum).name
    assert err == f"error: interrupted by {name}; nothing half-written is left\n"
    assert list(out.iterdir()) == []


# --- The installed torch_tensorrt as the base -------------------------------------------------


def fake_installed(folder: Path, version: str, tag: str) -> None:
    """A ``torch_tensorrt`` distribution as pip leaves it: a .dist-info folder on sys.path."""
    dist_info = folder / f"torch_tensorrt-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch_tensorrt\nVersion: {version}\n"
    )
    (dist_info / "WHEEL").write_text(textwrap.dedent(f"""\
            Wheel-Version: 1.0
            Generator: setuptools (80.0.0)
            Root-Is-Purelib: false
            Tag: {tag}
            """))


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment with pip (from ``ensurepip``, offline); its interpreter.

    User site-packages are off in a virtual environment, so an install planted there is the
    only kind a user of a venv has: the venv's own site-packages.
    """
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True)
    scripts = "Scripts" if os.name == "nt" else "bin"
    return folder / scripts / ("python.exe" if os.name == "nt" else "python")


@pytest.mark.network
def test_pip_wheel_builds_the_installed_release_despite_build_isolation(tmp_path: Path) -> None:
    """pip's isolated build hides the venv's packages; the build still finds the installed one."""
    tag = f"{PY_TAG}-{PY_TAG}-{_running_platform()}"
    fetch("2.13.0", RUNNING_PYTHON, _running_platform())
    python = fresh_venv(tmp_path / "venv")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    fake_installed(Path(site), "2.13.0", tag)
    completed = subprocess.run(
        [str(python), "-m", "pip", "wheel", ".", "--no-deps", "-w", str(tmp_path / "dist")],
        cwd=REPOSITORY,
        env=dict(os.environ, TORCHTRT_BASE_VERSION="installed"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [p.name for p in (tmp_path / "dist").iterdir()] == [
        f"torch_tensorrt-2.13.0+{LABEL}-{tag}.whl"
    ]


def test_installed_release_is_the_base(
    base_wheels: Dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_installed(tmp_path / "site", "2.13.0", "cp311-cp311-manylinux_2_28_x86_64")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = base_wheels["2.13.0"].parent
    argv = ["build", "--release", "installed", "--out", str(tmp_path / "a"), "--cache", str(cache)]
    assert main(argv) == 0
    monkeypatch.setenv("TORCHTRT_BASE_VERSION", "installed")
    assert main(["build", "--out", str(tmp_path / "b"), "--cache", str(cache)]) == 0
    name = f"torch_tensorrt-2.13.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "a" / name),
        str(tmp_path / "b" / name),
    ]


def test_installed_patched_wheel_stands_for_its_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_installed(tmp_path / "site", f"2.12.1+{LABEL}", "cp310-cp310-win_amd64")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    choice = choice_from_environment({"TORCHTRT_BASE_VERSION": "installed"})
    assert choice.request == BaseRequest("2.12.1", "win_amd64", "3.10")


def test_installed_cuda_variant_points_to_the_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_installed(tmp_path / "site", "2.9.0+cu128", "cp311-cp311-linux_x86_64")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert main(["build", "--release", "installed", "--out", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err == (
        "error: the installed torch_tensorrt 2.9.0+cu128 is a CUDA-variant release (+cu128), "
        "which the lock of official wheels does not know: the lock holds PyPI's wheels only. "
        "To build from it anyway, set TORCHTRT_BASE_UNLOCKED=1 (or pass build --unlocked) with "
        "your index in PIP_INDEX_URL, or set TORCHTRT_BASE_WHEEL to its wheel file\n"
    )


def test_installed_cuda_variant_unlocked_asks_for_that_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_installed(tmp_path / "site", "2.9.0+cu128", "cp312-cp312-linux_x86_64")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    environ = {"TORCHTRT_BASE_VERSION": "installed", "TORCHTRT_BASE_UNLOCKED": "1"}
    choice = choice_from_environment(environ)
    assert (choice.request, choice.unlocked) == (
        BaseRequest("2.9.0+cu128", "linux_x86_64", "3.12"),
        True,
    )


def test_nothing_installed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # no distribution anywhere
    assert main(["build", "--release", "installed", "--out", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err == (
        "error: 'installed' asks for the installed torch_tensorrt, and this Python has none; "
        "install it, or give the release (TORCHTRT_BASE_VERSION or --release)\n"
    )


def _headers(metadata: bytes, key: str) -> List[str]:
    return [value for name, value in parse_headers(metadata) if name.lower() == key.lower()]


@pytest.mark.network
def test_pip_install_resolves_the_official_requirements_before_the_build(tmp_path: Path) -> None:
    """``pip install .`` reads the metadata before the build: it must be the base's, so that
    torch and TensorRT are installed as for the official wheel (``--dry-run --report``)."""
    official = fetch(SUPPORTED_RELEASES[-1], RUNNING_PYTHON, _running_platform())
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--report"]
        + [str(report), "."],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    (item,) = json.loads(report.read_text(encoding="utf-8"))["install"]
    seen = item["metadata"]
    with zipfile.ZipFile(official) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name)
    assert seen["version"] == f"{SUPPORTED_RELEASES[-1]}+{LABEL}"
    assert seen["requires_dist"] == _headers(metadata, "Requires-Dist")
    assert any(r.startswith("torch") for r in seen["requires_dist"])
    assert [seen["requires_python"]] == _headers(metadata, "Requires-Python")
    assert [seen["summary"]] == _headers(metadata, "Summary")


def test_the_backend_answers_with_the_patched_wheels_metadata(
    tmp_path: Path, base_wheels: Dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metadata hook writes exactly the METADATA that the wheel build then writes."""
    base = base_wheels[SUPPORTED_RELEASES[-1]]
    monkeypatch.setenv("TORCHTRT_BASE_WHEEL", str(base))
    dist_info = prepare_metadata_for_build_wheel(str(tmp_path / "meta"))
    patched = build_patched_wheel(read_base(base, lock=load_lock()), out_dir=tmp_path / "dist")
    with zipfile.ZipFile(patched) as archive:
        built = archive.read(f"{dist_info}/METADATA")
    assert (tmp_path / "meta" / dist_info / "METADATA").read_bytes() == built
    assert dist_info == f"torch_tensorrt-{SUPPORTED_RELEASES[-1]}+{LABEL}.dist-info"
