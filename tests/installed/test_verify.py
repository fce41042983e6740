"""``verify``: a genuine patched wheel verifies; every kind of tampering is reported, file by file."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from installed_helpers import INDEX_BASES, rewrite_wheel
from installers import OTHER_PYTHONS, installed_tree, pip_install, uv_install
from patched_wheel import PatchError
from patched_wheel.__main__ import main
from patched_wheel.lock import Lock, load_lock
from patched_wheel.overlay import read_overlay
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.policy import LABEL_NAME
from patched_wheel.request import BaseRequest
from patched_wheel.verify import (
    MAX_DIFFED_BYTES,
    SHOWN_DIFF_LINES,
    Difference,
    Verification,
    official_wheel_name,
    verify_patched_wheel,
)
from patched_wheel.wheelfile import read_wheel
from wheel_helpers import LABEL
from zip_craft import join, members_of, write

TARGET = "torch_tensorrt/dynamo/utils.py"
ROOT = Path(__file__).resolve().parents[2]
RELEASE = "2.14.0"
DIST_INFO = f"torch_tensorrt-{RELEASE}+{LABEL}.dist-info"
OFFICIAL = "torch_tensorrt-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
PATCHED = f"torch_tensorrt-2.14.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(autouse=True)
def locked_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHTRT_BASE_UNLOCKED", raising=False)


@pytest.fixture(scope="module")
def patched(index_wheels: Dict[BaseRequest, Path]) -> Path:
    wheel = index_wheels[INDEX_BASES[0]]
    assert wheel.name == PATCHED
    return wheel


@pytest.fixture(scope="module")
def official(index_wheels: Dict[BaseRequest, Path]) -> Path:
    """The official base of ``INDEX_BASES[0]``, which ``index_wheels`` fetched into the cache."""
    path = DEFAULT_CACHE_DIR / OFFICIAL
    assert path.is_file()
    return path


def verify(wheel: Path, **options: object) -> Verification:
    options.setdefault("lock", load_lock())
    options.setdefault("overlay", read_overlay())
    return verify_patched_wheel(wheel, **options)  # type: ignore[arg-type]


def official_file_count(official: Path) -> int:
    """Files of the official wheel that the patched one must hold unchanged."""
    with zipfile.ZipFile(official) as archive:
        names = archive.namelist()
    changed = {TARGET, f"torch_tensorrt-{RELEASE}.dist-info/METADATA"}
    return sum(1 for n in names if n not in changed and not n.endswith(".dist-info/RECORD"))


def test_a_genuine_patched_wheel_verifies(patched: Path, official: Path) -> None:
    result = verify(patched)
    assert result.differences == ()
    assert result.verified
    assert result.official_wheel == OFFICIAL
    assert result.official_sha256 == load_lock().wheels[OFFICIAL]
    assert result.identical == official_file_count(official)
    assert result.utils_diff.startswith(f"--- official/{TARGET}\n+++ patched/{TARGET}\n")
    assert "\n+def trim_host_heap() -> None:\n" in result.utils_diff


def test_the_command_prints_the_diff_and_exits_0(
    patched: Path, official: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(patched), "--base-wheel", str(official)]) == 0
    out = capsys.readouterr().out
    assert f"--- official/{TARGET}" in out
    assert out.rstrip().endswith(
        "verified: the official wheel plus this repository's overlay, nothing else"
    )


def _append_line(path: str, line: bytes) -> Callable[[Dict[str, bytes]], None]:
    def change(members: Dict[str, bytes]) -> None:
        members[path] += line

    return change


def _add(path: str) -> Callable[[Dict[str, bytes]], None]:
    def change(members: Dict[str, bytes]) -> None:
        members[path] = b"print('hello')\n"

    return change


def _remove(path: str) -> Callable[[Dict[str, bytes]], None]:
    def change(members: Dict[str, bytes]) -> None:
        del members[path]

    return change


TAMPERING = [
    pytest.param(
        _append_line("torch_tensorrt/_compile.py", b"import os\n"),
        [("changed", "torch_tensorrt/_compile.py")],
        id="changed-upstream-file",
    ),
    pytest.param(
        _add("torch_tensorrt/_extra.py"), [("added", "torch_tensorrt/_extra.py")], id="extra-file"
    ),
    pytest.param(
        _remove("torch_tensorrt/_compile.py"),
        [("missing", "torch_tensorrt/_compile.py")],
        id="missing-file",
    ),
    pytest.param(_append_line(TARGET, b"import os\n"), [("changed", TARGET)], id="different-utils"),
    pytest.param(
        _append_line(f"{DIST_INFO}/METADATA", b"Requires-Dist: something-else\n"),
        [("changed", f"{DIST_INFO}/METADATA")],
        id="metadata-beyond-version",
    ),
    pytest.param(
        _add(f"{DIST_INFO}/sbom.json"),
        [("added", f"{DIST_INFO}/sbom.json")],
        id="extra-dist-info-file",
    ),
]


@pytest.mark.parametrize("change, expected", TAMPERING)
def test_each_tampering_is_reported_file_by_file(
    patched: Path,
    tmp_path: Path,
    change: Callable[[Dict[str, bytes]], None],
    expected: List[tuple[str, str]],
) -> None:
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, change)
    result = verify(tampered)
    assert [(d.kind, d.path) for d in result.differences] == expected
    assert not result.verified


def test_the_command_lists_the_differences_and_exits_1(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    change = _append_line("torch_tensorrt/_compile.py", b"import os\n")
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, change)
    assert main(["verify", str(tampered)]) == 1
    captured = capsys.readouterr()
    assert "\nchanged: torch_tensorrt/_compile.py (sha256 " in captured.out
    assert f"--- official/{TARGET}" in captured.out
    verdict = (
        f"NOT verified: {PATCHED} differs from the official wheel plus this repository's "
        "overlay in 1 file (listed above); do not install it"
    )
    assert "\nverified" not in captured.out
    assert captured.out.splitlines()[-1] == verdict
    assert captured.err == (
        f"overlay: the working tree's py/torch_tensorrt/dynamo/utils.py\nerror: {verdict}\n"
    )


def test_a_different_utils_is_shown_in_the_diff(patched: Path, tmp_path: Path) -> None:
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, _append_line(TARGET, b"HIDDEN = 1\n"))
    result = verify(tampered)
    assert result.differences == (
        Difference(
            "changed", TARGET, "not what this repository's overlay makes of the official file"
        ),
    )
    assert "\n+HIDDEN = 1\n" in result.utils_diff


def test_metadata_changes_are_named(patched: Path, tmp_path: Path) -> None:
    change = _append_line(f"{DIST_INFO}/METADATA", b"Requires-Dist: something-else\n")
    result = verify(rewrite_wheel(patched, tmp_path / PATCHED, change))
    assert "+ Requires-Dist: something-else" in result.differences[0].detail


def test_a_file_changed_behind_record_is_reported_with_record(
    patched: Path, tmp_path: Path
) -> None:
    change = _append_line("torch_tensorrt/_compile.py", b"import os\n")
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, change, update_record=False)
    result = verify(tampered)
    assert [(d.kind, d.path) for d in result.differences] == [
        ("changed", "torch_tensorrt/_compile.py"),
        ("changed", f"{DIST_INFO}/RECORD"),
    ]
    assert "_compile.py's size differs from RECORD's" in result.differences[1].detail


def test_an_official_wheel_that_is_not_the_official_file_is_refused(
    patched: Path, official: Path, tmp_path: Path
) -> None:
    forged = rewrite_wheel(official, tmp_path / OFFICIAL, _add("torch_tensorrt/_extra.py"))
    with pytest.raises(PatchError, match=f"^{re.escape(OFFICIAL)}: sha256 [0-9a-f]{{64}} differs"):
        verify(patched, base_wheel=forged)


def test_the_official_wheel_of_another_release_is_refused(
    patched: Path, index_wheels: Dict[BaseRequest, Path], tmp_path: Path
) -> None:
    other = DEFAULT_CACHE_DIR / "torch_tensorrt-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with pytest.raises(PatchError, match=f"^--base-wheel is {re.escape(other.name)}, but"):
        verify(patched, base_wheel=other)


def test_an_official_wheel_the_lock_lacks_needs_the_opt_in(
    patched: Path, official: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PatchError, match="is not in the lock of official wheels"):
        verify(patched, base_wheel=official, lock=Lock({}))
    result = verify(patched, base_wheel=official, lock=Lock({}), unlocked=True)
    assert result.verified and not result.in_lock


def test_an_official_wheel_is_not_a_patched_one(official: Path, tmp_path: Path) -> None:
    copy = shutil.copy(official, tmp_path / OFFICIAL)
    with pytest.raises(PatchError, match=r"carries no label of this fork"):
        verify(Path(copy))


@pytest.mark.parametrize(
    "patched_name, official_name",
    [
        pytest.param(PATCHED, OFFICIAL, id="release"),
        pytest.param(
            f"torch_tensorrt-2.9.0+cu130.{LABEL_NAME}.12-cp312-cp312-win_amd64.whl",
            "torch_tensorrt-2.9.0+cu130-cp312-cp312-win_amd64.whl",
            id="cuda-variant",
        ),
        pytest.param(
            f"torch_tensorrt-2.14.0+{LABEL_NAME}-cp312-cp312-win_amd64.whl",
            "torch_tensorrt-2.14.0-cp312-cp312-win_amd64.whl",
            id="before-numbered-labels",
        ),
        pytest.param(
            f"torch_tensorrt-2.14.0+{LABEL_NAME}.3.dev.g0123456789-cp312-cp312-win_amd64.whl",
            "torch_tensorrt-2.14.0-cp312-cp312-win_amd64.whl",
            id="development",
        ),
    ],
)
def test_the_official_wheel_name(patched_name: str, official_name: str) -> None:
    assert official_wheel_name(patched_name) == official_name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("torch_tensorrt-2.14.0+memfix2-cp311-cp311-win_amd64.whl", id="other-label"),
        pytest.param(
            f"torch_tensorrt-2.14.0+{LABEL_NAME}.x-cp311-cp311-win_amd64.whl", id="bad-number"
        ),
        pytest.param("torch_tensorrt-2.14.0-cp311-cp311-win_amd64.whl", id="no-label"),
    ],
)
def test_a_wheel_without_the_label_is_refused(name: str) -> None:
    with pytest.raises(PatchError, match=r"carries no label of this fork"):
        official_wheel_name(name)


def test_a_missing_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path / PATCHED)]) == 1
    assert (
        capsys.readouterr().err
        == f"error: {str(tmp_path / PATCHED)!r} is not a file; give the patched wheel's path\n"
    )


def test_a_missing_official_wheel_is_refused(patched: Path, tmp_path: Path) -> None:
    missing = tmp_path / OFFICIAL
    with pytest.raises(PatchError, match=f"^--base-wheel {re.escape(repr(str(missing)))} is not"):
        verify(patched, base_wheel=missing)


def test_a_patched_wheel_that_unpacks_beyond_the_caps_is_refused_before_unpacking(
    patched: Path, tmp_path: Path
) -> None:
    """The same size rules as for a base: 128 MiB of zeros packs into a few hundred KB."""

    def add_zeros(members: Dict[str, bytes]) -> None:
        members["torch_tensorrt/zeros.bin"] = bytes(128 << 20)

    bomb = rewrite_wheel(patched, tmp_path / PATCHED, add_zeros)
    with pytest.raises(PatchError, match=r"its members unpack to \d+ bytes, more than \d+ \(16"):
        verify(bomb)


# A report that cannot lie on a screen, bounded in size and memory; no hang, no traceback.


def _cli(arguments: List[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(arguments)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _no_terminal_controls(text: str) -> bool:
    return not any(c in text for c in "\x1b\r\x07\x08\x9b\u202e")


def test_a_name_with_escape_sequences_is_refused_and_shown_escaped(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member named to erase the error line and print "verified", listed in RECORD."""
    forged_name = "torch_tensorrt/\x1b[1A\x1b[2K\rverified: the official wheel plus\x1b[8m.py"
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, _add(forged_name))
    status, out, err = _cli(["verify", str(tampered)], capsys)
    assert status == 1 and out == ""
    assert _no_terminal_controls(err), err
    assert err.count("\n") == 1 and err.startswith(f"error: {PATCHED}: the member ")
    assert "holds a control character" in err


def test_terminal_controls_in_the_diff_are_shown_escaped(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = b"X = 1  # \x1b[2K\r\x1b[1Averified: the official wheel plus this overlay\n"
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, _append_line(TARGET, line))
    status, out, err = _cli(["verify", str(tampered)], capsys)
    assert status == 1
    assert _no_terminal_controls(out + err), out
    assert "+X = 1  # \\x1b[2K\\r\\x1b[1Averified: the official wheel plus this overlay" in out
    assert out.splitlines()[-1].startswith(f"NOT verified: {PATCHED} differs")


def test_a_large_diff_is_summarised_and_shown_whole_on_request(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = b"".join(b"HIDDEN_%d = %d\n" % (i, i) for i in range(5000))
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, _append_line(TARGET, lines))
    status, out, _ = _cli(["verify", str(tampered)], capsys)
    assert status == 1
    assert len(out.splitlines()) < SHOWN_DIFF_LINES + 20
    assert re.search(r"\n\.\.\. \d+ more lines of the diff \(--full-diff shows them\)\n", out)
    assert out.splitlines()[-1].startswith("NOT verified: ")
    status, full, _ = _cli(["verify", str(tampered), "--full-diff"], capsys)
    assert status == 1 and "+HIDDEN_4999 = 4999\n" in full and "more lines" not in full


def test_a_utils_too_large_to_diff_is_named_not_diffed(patched: Path, tmp_path: Path) -> None:
    huge = b"# padding\n" * (MAX_DIFFED_BYTES // 10 + 1)
    tampered = rewrite_wheel(patched, tmp_path / PATCHED, _append_line(TARGET, huge))
    result = verify(tampered)
    assert result.utils_diff == (
        f"(the patched {TARGET} is larger than {MAX_DIFFED_BYTES} bytes: no diff made)\n"
    )
    assert [(d.kind, d.path) for d in result.differences] == [("changed", TARGET)]


def test_verify_holds_one_piece_of_a_member_at_a_time(patched: Path, tmp_path: Path) -> None:
    """A tampered wheel whose utils.py unpacks to 96 MiB (the issue's 33 MiB wheel took
    1.65 GiB): verify's Python allocations stay far below the size of that one member."""
    filler = os.urandom(6 << 20)  # incompressible: keeps the unpacked/packed ratio under 16

    def inflate(members: Dict[str, bytes]) -> None:
        members[TARGET] += b"X = 1\n" * (16 << 20)
        members["torch_tensorrt/filler.bin"] = filler

    tampered = rewrite_wheel(patched, tmp_path / PATCHED, inflate)
    tracemalloc.start()
    try:
        result = verify(tampered)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert {d.path for d in result.differences} == {TARGET, "torch_tensorrt/filler.bin"}
    assert peak < 64 << 20, f"verify peaked at {peak >> 20} MiB"


def test_a_name_marked_utf8_that_is_not_is_a_clear_error(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = members_of(patched)
    index = next(i for i, m in enumerate(parts) if m.name == b"torch_tensorrt/_version.py")
    parts[index] = dataclasses.replace(
        parts[index], name=b"torch_tensorrt/_v\xff\xfesion.py", flags=0x800, local_name=None
    )
    tampered = write(tmp_path / PATCHED, join(parts))
    status, out, err = _cli(["verify", str(tampered)], capsys)
    assert (status, out) == (1, "")
    assert err == (
        f"error: {PATCHED}: a member's name is marked UTF-8 but is not; this is not a wheel "
        "the build can patch, use the official wheel\n"
    )


def test_a_central_directory_offset_past_the_file_is_a_clear_error(
    patched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered = write(tmp_path / PATCHED, join(members_of(patched), offset_delta=1 << 31))
    status, out, err = _cli(["verify", str(tampered)], capsys)
    assert (status, out) == (1, "")
    assert err == (
        f"error: {PATCHED}: its central directory is not where its end record says; this is "
        "not a wheel the build can patch, use the official wheel\n"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("which", ["patched", "base"])
def test_a_fifo_is_refused_without_waiting(patched: Path, tmp_path: Path, which: str) -> None:
    """In a process of its own, with a time limit: a hang fails the test instead of the suite."""
    fifo = tmp_path / (PATCHED if which == "patched" else OFFICIAL)
    os.mkfifo(fifo)
    arguments = [str(fifo)] if which == "patched" else [str(patched), "--base-wheel", str(fifo)]
    completed = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "patched_wheel"), "verify", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert completed.stderr.startswith("error: ") and completed.stderr.count("\n") == 1
    assert "is not a file" in completed.stderr


@pytest.mark.parametrize("python", [sys.executable] + [str(p) for p in OTHER_PYTHONS])
def test_what_verify_accepts_pip_installs_on_every_python(
    patched: Path, tmp_path: Path, python: str
) -> None:
    """The tree verify checked (the patched wheel's members, read strictly) is the tree pip
    installs, on this Python and on every other one at hand (3.10-3.13 here), and uv too."""
    assert verify(patched).verified
    checked = {
        name: data
        for name, data in read_wheel(patched.read_bytes(), patched.name).members.items()
        if ".dist-info/" not in name
    }
    completed = pip_install(python, patched, tmp_path / "pip")
    assert completed.returncode == 0, completed.stderr
    assert installed_tree(tmp_path / "pip") == checked
    if python == sys.executable:
        completed = uv_install(patched, tmp_path / "uv")
        assert completed.returncode == 0, completed.stderr
        assert installed_tree(tmp_path / "uv") == checked
