"""verify: a wheel is this repository's when the repository rebuilds it, byte for byte.

Each class of attack of the review (issue 23) is built here the way the review built it:
documented options, honest builds, crafted records; each is refused with its own reason.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict

import pytest
from patched_wheel.config import DEFAULT_RELEASE, LOCK_FILE, OVERLAY_PATH, REPOSITORY, TARGET
from patched_wheel.provenance import tool_sha256
from patched_wheel.verify import differences, read_provenance

from tests.patched_wheel.helpers import (
    RELEASED,
    Released,
    build,
    crafted,
    git,
    judge,
    make_wheel,
    names,
    refusal,
    run_tool,
    verify,
    write_lock,
)


def test_a_release_verifies_and_from_a_later_revision(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    assert "+memfix1." in wheel.name and ".dev" not in wheel.name
    status, report = verify(repo, wheel, lock, cache)
    assert status == 0 and "rebuilt here" in report, report
    # A later revision changes the tool: the wheel's own revision rebuilds it from history.
    with (repo / "tools/patched_wheel/index.py").open("a") as stream:
        stream.write("# a later change of the tool\n")
    git(repo, "commit", "-qam", "later")
    status, report = verify(repo, wheel, lock, cache)
    assert status == 0 and "from git history" in report, report


def rezipped(data: bytes, mode_of: str = "", mode: int = 0) -> bytes:
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            body = source.read(info)
            if info.filename == mode_of:
                info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED  # what a re-zip does to stored members
            target.writestr(info, body)
    return out.getvalue()


def test_a_rezipped_wheel_is_same_files_different_bytes(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    result = judge(released, rezipped(wheel.read_bytes()), wheel.name)
    assert not result.verified
    with zipfile.ZipFile(wheel) as archive:  # none of its members differs: none is named
        members = archive.namelist()
    assert [line for line in result.lines for name in members if name in line] == []


@pytest.mark.parametrize("member, mode", [("torch_tensorrt/bin/torchtrtc", 0o644), (TARGET, 0o777)])
def test_a_changed_mode_is_named(released: Released, member: str, mode: int) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    data = rezipped(wheel.read_bytes(), member, mode)
    result = judge(released, data, wheel.name)
    assert not result.verified
    assert any(line.startswith(f"  {member}: mode {mode:o}") for line in result.lines)


def test_a_crafted_large_metadata_is_reported_in_linear_time(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    data = wheel.read_bytes()
    metadata = next(
        n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith("METADATA")
    )
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == metadata:
                body += b"".join(b"x%d\n" % i for i in range(150_000))  # about 1 MiB
            target.writestr(info, body)
    start = time.perf_counter()
    lines = differences(out.getvalue(), data)
    assert time.perf_counter() - start < 2 and len(lines) < 200
    assert any(line.startswith(f"  {metadata}: ") for line in lines)


def test_names_in_the_report_are_escaped_and_cut() -> None:
    folder = Path(__file__).parent
    one, two = io.BytesIO(), io.BytesIO()
    with zipfile.ZipFile(one, "w") as a, zipfile.ZipFile(two, "w") as b:
        a.writestr("\x1b[2J" + "d/" * 30_000 + "x", b"1")
        b.writestr("y", b"1")
    lines = differences(one.getvalue(), two.getvalue())
    assert all("\x1b" not in line and len(line) < 400 for line in lines), folder


def test_a_base_the_lock_does_not_know_is_compared_only_when_asked_and_not_called_official(
    tmp_path: Path, released: Released
) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    other = write_lock(tmp_path / "other.json", make_wheel(tmp_path / "x", version="2.98.0"))
    status, report = verify(repo, wheel, other, cache)
    assert status == 1
    names(report.splitlines()[-1], base.name, "--unlocked")
    status, report = verify(repo, wheel, other, cache, "--unlocked")
    assert status == 0 and "the official" not in report and "(official" not in report, report


def test_the_verdict_is_of_the_bytes_read_once(released: Released, tmp_path: Path) -> None:
    """index and verify judge one byte string: the page's sha256 is the sha256 of it."""
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    done = run_tool(repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache))
    assert done.returncode == 0, done.stderr
    page = (wheel.parent / "simple" / "torch-tensorrt" / "index.html").read_text()
    assert f"#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}" in page


def test_index_refuses_a_symlinked_simple_folder(released: Released, tmp_path: Path) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    outside = tmp_path / "outside"
    outside.mkdir()
    (wheel.parent / "simple").symlink_to(outside)
    done = run_tool(repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, repr(str(wheel.parent / "simple")))
    assert list(outside.iterdir()) == []


def test_index_writes_nothing_when_a_page_is_a_folder(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    simple = wheel.parent / "simple"
    (simple / "index.html").mkdir(parents=True)
    (simple / "torch-tensorrt").mkdir()
    (simple / "torch-tensorrt/index.html").write_text("old")
    done = run_tool(repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, repr(str(simple / "index.html")))
    assert (simple / "torch-tensorrt/index.html").read_text() == "old"


def test_index_drops_stale_pages_and_escapes_what_it_prints(
    released: Released, tmp_path: Path
) -> None:
    repo, base, lock, cache = released
    folder = tmp_path / "w\x1b[31m"
    wheel = build(repo, base, lock, "--out", str(folder))
    stale = folder / "simple/torch-tensorrt-rtx\x1b[2J"
    stale.mkdir(parents=True)
    (stale / "index.html").write_text('<a href="../../gone.whl">gone</a>')
    done = run_tool(repo, "index", str(folder), "--lock", str(lock), "--cache", str(cache))
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and (folder / "simple/torch-tensorrt/index.html").is_file()
    assert "\x1b" not in done.stdout + done.stderr and wheel.exists()
    assert "#sha256=" in (folder / "simple/torch-tensorrt/index.html").read_text()


def test_index_lists_no_development_build(released: Released) -> None:
    repo, base, lock, cache = released
    (repo / OVERLAY_PATH).write_bytes((repo / OVERLAY_PATH).read_bytes() + b"\n# edited\n")
    wheel = build(repo, base, lock)
    done = run_tool(repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, wheel.name)
    assert not (wheel.parent / "simple").exists()


def test_an_edited_sdist_builds_a_development_wheel(released: Released, tmp_path: Path) -> None:
    """The sdist's revision file vouches for its files by sha256: an edited overlay inside
    it is not the revision's, whatever the file's dirty flag says."""
    import tarfile

    repo, base, lock, cache = released
    script = (
        "import sys; sys.argv=['x']; from patched_wheel.backend import build_sdist; "
        f"print(build_sdist({str(tmp_path)!r}))"
    )
    import subprocess
    import sys

    env = {
        "PYTHONPATH": str(repo / "tools"),
        "TORCHTRT_BASE_VERSION": DEFAULT_RELEASE,
        "PATH": "/usr/bin:/bin",
    }
    command = [sys.executable, "-c", script]
    made = subprocess.run(command, cwd=repo, env=env, check=True, capture_output=True, text=True)
    name = made.stdout.strip()
    with tarfile.open(tmp_path / name) as archive:
        archive.extractall(tmp_path / "sdist")
    tree = tmp_path / "sdist" / name[: -len(".tar.gz")]
    overlay = tree / OVERLAY_PATH
    clean = build(tree, base, lock)
    overlay.write_bytes(overlay.read_bytes() + b"\n# edited in the sdist\n")
    edited = build(tree, base, lock)
    assert ".dev" not in clean.name and ".dev" in edited.name, (clean.name, edited.name)
    assert read_provenance(edited.read_bytes(), edited.name).dirty is True


OLD_WRITER = "19c9aaafa64772ae308d4d436259d47b47426870"  # main before verify by rebuilding


def test_a_release_of_the_old_writer_verifies_by_its_own_tool(
    base_wheels: Dict[str, Path], tmp_path: Path
) -> None:
    """A wheel built by main's tool before this design (another writer) verifies from this
    clone: its revision's own tool rebuilds it from git history."""
    import subprocess
    import tarfile

    from patched_wheel.releases import main_history

    if not any(OLD_WRITER in commits for commits in main_history(REPOSITORY).values()):
        pytest.skip("this clone's main branch does not hold the old writer's commit")
    tree = tmp_path / "tree"
    command = ["git", "-C", str(REPOSITORY), "archive", OLD_WRITER]
    archive = subprocess.run(command, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    (tree / ".source-revision.json").write_text(
        json.dumps({"revision": OLD_WRITER, "dirty": False})
    )
    # A release is dated by the commit that released it (the old writer took SOURCE_DATE_EPOCH).
    date = git(REPOSITORY, "show", "-s", "--format=%ct", OLD_WRITER).strip()
    base = base_wheels[DEFAULT_RELEASE]
    out = tmp_path / "dist"
    done = run_tool(
        tree,
        "build",
        "--base-wheel",
        str(base),
        "--lock",
        str(LOCK_FILE),
        "--out",
        str(out),
        SOURCE_DATE_EPOCH=date,
    )
    wheel = Path(done.stdout.strip())
    status, report = verify(REPOSITORY, wheel, LOCK_FILE, base.parent)
    assert status == 0 and "from git history" in report, report


# --- One file per release (issue 35) ------------------------------------------------------------


def test_a_release_ignores_source_date_epoch(released: Released) -> None:
    repo, base, lock, cache = released
    plain = build(repo, base, lock).read_bytes()
    out = repo.parent / "dated"
    done = run_tool(
        repo,
        "build",
        "--base-wheel",
        str(base),
        "--lock",
        str(lock),
        "--out",
        str(out),
        SOURCE_DATE_EPOCH="1700000000",
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).read_bytes() == plain
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    names(" ".join(warnings), "SOURCE_DATE_EPOCH=1700000000")  # said, not silently dropped


def test_a_record_pairing_a_revision_with_another_tool_is_refused(released: Released) -> None:
    """A later revision whose tool changed, named with the current tool's sha256 (which the
    in-process rebuild would have reproduced): a pair no build makes."""
    repo, base, lock, cache = released
    with (repo / "tools/patched_wheel/index.py").open("a") as stream:
        stream.write("# a later change of the tool\n")
    git(repo, "commit", "-qam", "later tool")
    later = git(repo, "rev-parse", "HEAD").strip()
    name, data = crafted(base, RELEASED, later, tool_sha256())
    result = judge(released, data, name)
    assert not result.verified
    names(result.verdict, later, "build tool")


# --- What git says is the clone's own (issue 35) ------------------------------------------------


# --- Messages that say what happened (issue 35) -------------------------------------------------


# --- Reads that stay bounded (issue 35) ---------------------------------------------------------


@pytest.mark.pypi
@pytest.mark.parametrize(
    "python, platform",
    [
        pytest.param("3.12", "manylinux_2_28_x86_64", id="cp312"),
        pytest.param("3.11", "manylinux_2_28_aarch64", id="aarch64"),
    ],
)
def test_another_pythons_or_platforms_wheel_verifies_with_an_empty_cache(
    released: Released, tmp_path: Path, python: str, platform: str
) -> None:
    from tests.patched_wheel.wheel_helpers import fetch

    repo, _, _, _ = released
    base = fetch(DEFAULT_RELEASE, python, platform)
    wheel = build(repo, base, LOCK_FILE)
    status, report = verify(repo, wheel, LOCK_FILE, tmp_path / "empty")
    assert status == 0, report
    assert (tmp_path / "empty" / base.name).read_bytes() == base.read_bytes()


def test_index_honours_overlay_as_verify_does(released: Released, tmp_path: Path) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    other = tmp_path / "other.py"
    other.write_bytes((repo / OVERLAY_PATH).read_bytes() + b"# another overlay\n")
    options = ["--lock", str(lock), "--cache", str(cache), "--overlay", str(other)]
    done = run_tool(repo, "index", str(wheel.parent), *options)
    refusal(done, "--overlay")
    assert not (wheel.parent / "simple").exists()


def test_index_refuses_a_symlinked_project_folder(released: Released, tmp_path: Path) -> None:
    """A static host serves ``simple/<project>/`` as it finds it: a link there would offer
    pages the index never wrote, for a project the index does not hold."""
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "index.html").write_text("<a href='https://elsewhere/x.whl'>x</a>")
    (wheel.parent / "simple").mkdir()
    (wheel.parent / "simple" / "torch-tensorrt-rtx").symlink_to(outside)
    done = run_tool(repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, repr(str(wheel.parent / "simple" / "torch-tensorrt-rtx")))
    assert not (wheel.parent / "simple" / "index.html").exists()
