"""The lock of official wheels (lock.py): what it holds, how it is refreshed, what it refuses."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.config import (
    DEFAULT_RELEASE,
    LOCK_FILE,
    REPOSITORY,
    RTX_RELEASES,
    SUPPORTED_RELEASES,
    TARGET,
)
from patched_wheel.lock import Lock, load_lock, open_base
from patched_wheel.settings import BaseChoice, BaseRequest
from patched_wheel.wheel import Entry, write_zip

from tests.patched_wheel.helpers import RTX, TAGS, make_wheel, names, refusal, run_tool, write_lock


def test_the_lock_holds_every_rtx_wheel_and_2_8_and_2_9() -> None:
    lock = load_lock()
    rtx = [n for n in lock.wheels if n.startswith(f"{RTX}-")]
    # cp310-cp313 x (Linux x86_64, Windows) per release, and cp314 for 2.14.0; no aarch64.
    assert len(rtx) == 8 * len(RTX_RELEASES) + 2 and not [n for n in rtx if "aarch64" in n]
    assert lock.official_name(BaseRequest("2.8.0", "manylinux_2_28_x86_64", "3.11")) == (
        "torch_tensorrt-2.8.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_34_x86_64.whl"
    )
    # What it lacks, said by what was asked and what the lock has instead.
    too_old = BaseRequest("2.10.0", distribution="torch-tensorrt-rtx")
    names(lock.unknown_request(too_old), "torch-tensorrt-rtx 2.10.0", RTX_RELEASES[0])
    aarch64 = BaseRequest(DEFAULT_RELEASE, "manylinux_2_28_aarch64", "3.11", "torch-tensorrt-rtx")
    names(lock.unknown_request(aarch64), "'manylinux_2_28_aarch64'", "manylinux_2_28_x86_64")


def test_2_7_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_tool(REPOSITORY, "build", "--release", "2.7.0", "--out", str(tmp_path / "out"))
    refusal(done, "2.7.0", SUPPORTED_RELEASES[0])
    assert done.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_refreshing_one_distribution_keeps_the_others_wheels_of_that_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patched_wheel.lock as lock_module

    bases = [make_wheel(tmp_path, name=name) for name in ("torch_tensorrt", RTX)]
    (tmp_path / "index").mkdir()
    fresh = make_wheel(tmp_path / "index")  # downloaded again: the same file

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        assert request.distribution == "torch-tensorrt"  # only the release asked for
        return Path(shutil.copy(fresh, folder))  # pip's download, without the network

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", *bases)
    refreshed = lock_module.refresh_lock([BaseRequest("2.99.0")], path=path)
    rtx_digest = load_lock(tmp_path / "lock.json").wheels[bases[1].name]
    assert set(refreshed.wheels) == {fresh.name, bases[1].name} == set(load_lock(path).wheels)
    assert refreshed.wheels[bases[1].name] == rtx_digest  # the RTX wheel of 2.99.0 kept
    assert refreshed.wheels[fresh.name] == hashlib.sha256(fresh.read_bytes()).hexdigest()


def test_refreshing_one_platform_keeps_the_releases_other_platforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patched_wheel.lock as lock_module

    linux = make_wheel(tmp_path / "linux", tag="cp311-cp311-manylinux_2_28_x86_64")
    windows = make_wheel(tmp_path / "windows", tag="cp311-cp311-win_amd64")
    fresh = make_wheel(tmp_path / "index")  # downloaded again: the same file

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        assert request.platform == "manylinux_2_28_x86_64"  # only the platform asked for
        return Path(shutil.copy(fresh, folder))

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", linux, windows)
    lock_module.refresh_lock([BaseRequest("2.99.0", "manylinux_2_28_x86_64", "3.11")], path=path)
    wheels = load_lock(path).wheels
    assert set(wheels) == {linux.name, windows.name}  # the Windows wheel of 2.99.0 kept
    assert wheels[linux.name] == hashlib.sha256(fresh.read_bytes()).hexdigest()
    assert wheels[windows.name] == hashlib.sha256(windows.read_bytes()).hexdigest()


def test_the_lock_refuses_another_sha256_for_a_known_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyPI never re-uploads a file name: a re-zipped copy an index serves is not a refresh."""
    import patched_wheel.lock as lock_module

    base = make_wheel(tmp_path)
    rezipped = make_wheel(tmp_path / "index", {"torch_tensorrt/new.py": b""})  # the same name

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        return Path(shutil.copy(rezipped, folder))

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", base)
    before = path.read_bytes()
    with pytest.raises(PatchError) as refused:
        lock_module.refresh_lock([BaseRequest("2.99.0")], path=path)
    assert path.read_bytes() == before
    digests = [hashlib.sha256(wheel.read_bytes()).hexdigest() for wheel in (base, rezipped)]
    (problem,) = [line for line in str(refused.value).splitlines() if base.name in line]
    names(problem, *digests)


# A release newer than any the lock knows.
NEWER = f"2.{int(DEFAULT_RELEASE.split('.')[1]) + 1}.0"


def test_a_release_newer_than_the_lock_says_how_to_add_it() -> None:
    message = load_lock().unknown_request(BaseRequest(NEWER))
    names(message, DEFAULT_RELEASE, f"python tools/patched_wheel lock --release {NEWER} ")


def test_lock_of_a_release_the_index_lacks_fails_and_keeps_the_lock(tmp_path: Path) -> None:
    index = tmp_path / "index"  # pip's find-links folder: an index of two releases' wheels
    make_wheel(index, version=SUPPORTED_RELEASES[-2])
    make_wheel(index, version=DEFAULT_RELEASE)
    lock = tmp_path / "lock.json"  # the lock without the wheels the index has (a new release)
    wheels = json.loads(LOCK_FILE.read_text())["wheels"]
    kept = {
        name: sha256
        for name, sha256 in wheels.items()
        if not name.startswith(f"torch_tensorrt-{DEFAULT_RELEASE}-")
    }
    lock.write_text(json.dumps({"wheels": kept}))
    before = lock.read_bytes()
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    asked = ["--platform", "manylinux_2_28_x86_64", "--python", "3.11", "--lock", str(lock)]
    asked += ["--distribution", "torch-tensorrt"]
    done = run_tool(REPOSITORY, "lock", "--release", NEWER, *asked, **offline)
    refusal(done, f"torch-tensorrt {NEWER}", DEFAULT_RELEASE)
    assert lock.read_bytes() == before
    # Of the default release, the index has the cp311 wheel and not the cp312 one: the lock
    # takes the one it has, and still has no cp312 wheel.
    done = run_tool(
        REPOSITORY, "lock", "--release", DEFAULT_RELEASE, *asked, "--python", "3.12", **offline
    )
    assert done.returncode == 0, done.stderr
    refreshed = [n for n in json.loads(lock.read_text())["wheels"] if n not in kept]
    assert refreshed == [f"torch_tensorrt-{DEFAULT_RELEASE}-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_an_unlocked_base_is_checked_against_its_record(tmp_path: Path) -> None:
    base = make_wheel(tmp_path, {"torch_tensorrt/x.py": b"a"})
    with zipfile.ZipFile(base, "a") as archive:
        archive.writestr("torch_tensorrt/extra.py", b"not in RECORD")
    with pytest.raises(PatchError) as refused:
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
    names(refused.value, "torch_tensorrt/extra.py")
    with pytest.raises(PatchError) as refused:  # and without the opt-in: not the lock's
        open_base(BaseChoice(wheel=base), lock=Lock({}))
    names(refused.value, base.name, "--unlocked")


def _rezipped(path: Path, *, mode_of: str = "", mode: int = 0, hide_after: str = "") -> None:
    """``path`` written again by the tool's raw writer: ``mode_of``'s mode set to ``mode``,
    bytes hidden after ``hide_after``'s deflate stream (its size and CRC unchanged)."""
    entries = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            data = archive.read(info)
            compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            payload = compressor.compress(data) + compressor.flush()
            payload += b"hidden" if info.filename == hide_after else b""
            attributes = mode << 16 if info.filename == mode_of else info.external_attr
            entries.append(
                Entry(
                    info.filename,
                    info.date_time,
                    attributes,
                    3,
                    zipfile.ZIP_DEFLATED,
                    zlib.crc32(data),
                    len(data),
                    payload,
                )
            )
    path.write_bytes(write_zip(entries))


DIST_INFO = "torch_tensorrt-2.99.0.dist-info"


# Each base below, with what its refusal names: the member (or field) at fault.
@pytest.mark.parametrize(
    "files, change, named",
    [
        pytest.param(
            {},
            dict(mode_of="torch_tensorrt/bin/torchtrtc", mode=0o104755),
            ("'torch_tensorrt/bin/torchtrtc'", "104755"),
            id="setuid",
        ),
        pytest.param(
            {"torch_tensorrt/dynamo/UTILS.py": b"x = 1\n"},
            {},
            ("'torch_tensorrt/dynamo/UTILS.py'", f"'{TARGET}'"),
            id="case-variant",
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-any\n"},
            {},
            ("WHEEL's Tag",),
            id="wheel-tags",
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": f"Wheel-Version: 9.0\nTag: {TAGS}\n".encode()},
            {},
            ("Wheel-Version '9.0'",),
            id="wheel-version-9",  # round 1 refused it; its check went with its reader (7f2b3f1)
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": f"Tag: {TAGS}\n".encode()},
            {},
            ("Wheel-Version none",),
            id="no-wheel-version",
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": f"Wheel-Version: 1.0\nBuild: 7\nTag: {TAGS}\n".encode()},
            {},
            ("WHEEL's Build",),
            id="wheel-build-tag",
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": b"Wheel-Version: 1.0\nTag: cp311\n"},
            {},
            ("WHEEL's Tag",),
            id="malformed-tag",
        ),
        pytest.param(
            {f"{DIST_INFO}/METADATA": b"Name: torch_tensorrt\nVersion: 2.98.0\n\n"},
            {},
            ("METADATA's Name or Version",),
            id="metadata-version",
        ),
        pytest.param(
            {"other-1.0.dist-info/METADATA": b"Name: other\n"},
            {},
            ("'other-1.0.dist-info'",),
            id="second-dist-info",
        ),
        pytest.param(
            {},
            dict(hide_after="torch_tensorrt/__init__.py"),
            ("'torch_tensorrt/__init__.py'",),
            id="hidden-bytes",
        ),
    ],
)
def test_an_unlocked_base_is_refused_where_installers_refuse_it(
    tmp_path: Path, files: Dict[str, bytes], change: Dict[str, object], named: Tuple[str, ...]
) -> None:
    base = make_wheel(tmp_path, files, version="2.99.0")
    if change:
        _rezipped(base, **change)  # type: ignore[arg-type]
    with pytest.raises(PatchError) as refused:
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
    names(refused.value, base.name, *named)
