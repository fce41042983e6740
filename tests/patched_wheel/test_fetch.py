"""Getting a base (fetch.py): the cache, pip's download, a base made from an installed one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_RELEASE, REPOSITORY, TARGET
from patched_wheel.lock import load_lock
from patched_wheel.settings import BaseRequest
from patched_wheel.verify import read_provenance

from tests.installed.installed_helpers import official_wheel
from tests.patched_wheel.helpers import (
    RELEASED,
    RTX,
    UTILS,
    Released,
    build,
    names,
    record_hash,
    refusal,
    run_tool,
    source_build,
)
from tests.patched_wheel.wheel_helpers import fetch


@pytest.mark.network
def test_asource_build_install_is_patched_from_its_own_files_and_reversed(
    tmp_path: Path,
) -> None:
    with zipfile.ZipFile(fetch("2.10.0")) as official:
        utils = official.read(TARGET)
    site = source_build(tmp_path / "site", utils)
    out = tmp_path / "out"
    build = ["build", "--release", "installed", "--out", str(out)]
    done = run_tool(REPOSITORY, *build, PYTHONPATH=str(site))
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    assert patched.name.startswith("torch_tensorrt-2.10.0a0+abc1234.memfix1.")
    record = read_provenance(patched.read_bytes(), patched.name)
    assert record.local_install and record.fixes == ("offload", "host-trim", "input-copy")
    # verify refuses it: no official file rebuilds it; the verdict names the install.
    verdict = run_tool(REPOSITORY, "verify", str(patched))
    assert verdict.returncode == 1
    names(verdict.stdout.splitlines()[-1], "NOT verified", "2.10.0a0+abc1234")
    # The reversal: the saved original (the warning names it), installed over the patched
    # wheel, is the install again.
    original = out / "torch_tensorrt-2.10.0a0+abc1234-cp311-cp311-linux_x86_64.whl"
    assert original.is_file() and str(original) in done.stderr
    target = tmp_path / "target"
    for wheel in (patched, original):
        pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade", "--target"]
        subprocess.run(pip + [str(target), str(wheel)], check=True, capture_output=True)
        installed = (target / TARGET).read_bytes()
        assert (installed == utils) == (wheel == original)


def test_an_install_that_differs_from_its_record_is_refused(tmp_path: Path) -> None:
    site = source_build(tmp_path / "site", UTILS)
    (site / TARGET).write_bytes(UTILS + b"# edited\n")
    build = ["build", "--release", "installed", "--out", str(tmp_path / "out")]
    done = run_tool(REPOSITORY, *build, PYTHONPATH=str(site))
    refusal(done, TARGET)
    assert done.stderr.count("\n") == 1 and not (tmp_path / "out").exists()


def test_an_install_where_no_fix_applies_is_refused(tmp_path: Path) -> None:
    site = source_build(tmp_path / "site", b"def other():\n    pass\n")
    build = ["build", "--release", "installed", "--out", str(tmp_path / "out")]
    done = run_tool(REPOSITORY, *build, PYTHONPATH=str(site))
    refusal(done, "torch_tensorrt-2.10.0a0+abc1234-")
    assert not (tmp_path / "out").exists()


def test_an_installed_rtx_release_takes_the_official_rtx_base(
    both: Tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, lock, cache = both
    site = source_build(
        tmp_path / "site", UTILS, RTX, "2.99.0", "cp311-cp311-manylinux_2_28_x86_64"
    )
    build = ["build", "--release", "installed", "--out", str(tmp_path / "out")]
    done = run_tool(repo, *build, "--lock", str(lock), "--cache", str(cache), PYTHONPATH=str(site))
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    assert patched.name.startswith(f"{RTX}-2.99.0+{RELEASED}-cp311")
    assert not read_provenance(patched.read_bytes(), patched.name).local_install


NO_INDEX = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "file:///nonexistent"}


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param({"UV_OFFLINE": "1"}, id="offline"),
        pytest.param({**NO_INDEX, "PIP_FIND_LINKS": ""}, id="download-fails"),
    ],
)
def test_a_run_that_cannot_download_says_to_fetch_the_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict
) -> None:
    """The test fails (it is not skipped, nor an error of the build), naming the wheel it
    lacks and the script that fetches it."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    request = BaseRequest(DEFAULT_RELEASE, "manylinux_2_28_x86_64", "3.11")
    wheel = load_lock().official_name(request)
    assert wheel is not None
    with pytest.raises(pytest.fail.Exception) as failed:
        official_wheel(request, tmp_path)
    names(failed.value, wheel, "python3 -m tests.fetch_wheels")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.network  # downloads what the cache lacks (offline: passes once it is filled)
def test_fetch_wheels_fetches_each_file_once_and_sums_up() -> None:
    command = [sys.executable, "-m", "tests.fetch_wheels"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPOSITORY)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    counts = r"(\d+) official wheels .*\((\d+) downloaded, (\d+) already there\)"
    summary = re.search(counts, lines[-1])
    assert summary is not None and int(summary[1]) == int(summary[2]) + int(summary[3]), lines[-1]
    fetched = [line for line in lines if line.endswith(".whl") and " " not in line]
    assert len(fetched) == len(set(fetched)) == int(summary[2]), done.stdout


def test_an_unreachable_index_is_said_in_one_line(tmp_path: Path) -> None:
    """No network (here: an index address where nothing listens): one line that says the
    index could not be reached, no traceback, no wheel."""
    unreachable = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "1"}
    unreachable.update(PIP_EXTRA_INDEX_URL="", PIP_FIND_LINKS="", PIP_TIMEOUT="2")
    unreachable.update(PIP_NO_INDEX="0", PIP_CONFIG_FILE=os.devnull)  # not the caller's pip
    request = ["--release", DEFAULT_RELEASE, "--platform", "manylinux_2_28_x86_64"]
    request += ["--python", "3.11"]
    folders = ["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    done = run_tool(REPOSITORY, "build", *request, *folders, **unreachable)
    refusal(done, f"torch-tensorrt=={DEFAULT_RELEASE}", "could not be reached")
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_local_install_never_reads_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A FIFO would block for ever and /dev/zero never ends: neither is read."""
    from packaging.utils import canonicalize_name
    from patched_wheel.fetch import local_install_wheel
    from patched_wheel.settings import BaseRequest

    dist_info = "torch_tensorrt-2.99.0.dist-info"
    package = tmp_path / "torch_tensorrt"
    package.mkdir()
    (tmp_path / dist_info).mkdir()
    if kind == "fifo":
        os.mkfifo(package / "odd.py")
    else:
        (package / "odd.py").symlink_to("/dev/zero")
    (tmp_path / dist_info / "RECORD").write_text("torch_tensorrt/odd.py,sha256=x,1\n")
    request = BaseRequest(
        "2.99.0", "manylinux_2_28_x86_64", "3.11", canonicalize_name("torch-tensorrt")
    )
    with pytest.raises(PatchError) as refused:
        local_install_wheel((request, "2.99.0", tmp_path, dist_info))
    names(refused.value, "torch_tensorrt/odd.py")


def test_a_damaged_cached_base_is_to_be_deleted(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    base.write_bytes(base.read_bytes() + b"damage")
    done = run_tool(repo, "verify", str(wheel), "--lock", str(lock), "--cache", str(cache))
    refusal(done, repr(str(base)), "delete it")
    assert base.read_bytes().endswith(b"damage")  # the tool deletes nothing of the cache


def test_a_local_install_reads_each_file_once(tmp_path: Path) -> None:
    """A RECORD that lists one file many times would read it that many times (each up to the
    cap of a wheel): a repeated row is refused, and the files' sum is bounded."""
    from packaging.utils import canonicalize_name
    from patched_wheel.fetch import local_install_wheel
    from patched_wheel.settings import BaseRequest

    dist_info = "torch_tensorrt-2.99.0.dist-info"
    (tmp_path / "torch_tensorrt").mkdir()
    (tmp_path / dist_info).mkdir()
    data = b"x" * (1 << 20)
    (tmp_path / "torch_tensorrt" / "big.py").write_bytes(data)
    row = f"torch_tensorrt/big.py,{record_hash(data)},{len(data)}\n"
    (tmp_path / dist_info / "RECORD").write_text(row * 5000)  # 5 GB read, before
    request = BaseRequest(
        "2.99.0", "manylinux_2_28_x86_64", "3.11", canonicalize_name("torch-tensorrt")
    )
    with pytest.raises(PatchError) as refused:
        local_install_wheel((request, "2.99.0", tmp_path, dist_info))
    names(refused.value, "torch_tensorrt/big.py", "twice")
