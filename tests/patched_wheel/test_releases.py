"""Releases of the overlay (releases.py): labels, the registry, and what counts as a release."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from patched_wheel.config import (
    DEFAULT_RELEASE,
    LABEL_NAME,
    OVERLAY_PATH,
    OVERLAY_RELEASES_FILE,
    REPOSITORY,
    TOOL_PATH,
)
from patched_wheel.patch import Origin, patch_wheel
from patched_wheel.provenance import SourceRevision, tool_sha256
from patched_wheel.releases import label_for, release_label
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.wheel import BaseWheel

from tests.patched_wheel.helpers import (
    OVERLAY,
    RELEASED,
    Released,
    build,
    crafted,
    git,
    judge,
    make_wheel,
    names,
    pip_environment,
    refusal,
    run_tool,
    verify,
)


def test_a_development_build_is_not_a_release(released: Released) -> None:
    repo, base, lock, cache = released
    (repo / OVERLAY_PATH).write_bytes((repo / OVERLAY_PATH).read_bytes() + b"\n# edited\n")
    wheel = build(repo, base, lock)
    assert ".dev" in wheel.name
    status, report = verify(repo, wheel, lock, cache)
    edited = hashlib.sha256((repo / OVERLAY_PATH).read_bytes()).hexdigest()
    assert status == 1
    names(report.splitlines()[-1], "NOT verified", edited[:12])


def test_a_downgrade_built_with_an_old_overlay_is_not_a_release(released: Released) -> None:
    """The first overlay ever committed, from this repository's history, with --overlay."""
    repo, base, lock, cache = released
    first = git(REPOSITORY, "log", "--reverse", "--format=%H", "--", OVERLAY_PATH).split()[0]
    old = repo.parent / "old.py"
    old.write_text(git(REPOSITORY, "show", f"{first}:{OVERLAY_PATH}"))
    wheel = build(repo, base, lock, "--overlay", str(old))
    assert ".dev" in wheel.name
    status, report = verify(repo, wheel, lock, cache)
    old_sha256 = hashlib.sha256(old.read_bytes()).hexdigest()
    assert status == 1
    names(report.splitlines()[-1], "NOT verified", old_sha256[:12])


def test_development_labels_sort_below_releases() -> None:
    """A development build after release 2 sorts above the unnumbered first wheels and below
    release 2 and every later one."""
    development = label_for("a" * 64, {"b" * 64: 2}, clean=True)  # an overlay not registered
    labels = [LABEL_NAME, development, release_label(2), release_label(3)]
    versions = [Version(f"{DEFAULT_RELEASE}+{label}") for label in labels]
    assert sorted(versions) == versions


@pytest.mark.parametrize("number", ["next", "99"])
def test_a_relabelled_number_was_never_released(released: Released, number: str) -> None:
    repo, base, lock, cache = released
    if number == "next":  # the number the registry would give the next overlay
        registry = json.loads(OVERLAY_RELEASES_FILE.read_text(encoding="utf-8"))
        number = str(max(map(int, registry["overlays"])) + 1)
    head = git(repo, "rev-parse", "HEAD").strip()
    name, data = crafted(base, f"memfix1.{number}", head)
    result = judge(released, data, name)
    assert not result.verified
    names(result.verdict, f"+memfix1.{number}")


@pytest.mark.parametrize("where", ["branch", "stash", "unreachable"])
def test_an_overlay_only_off_main_was_never_released(released: Released, where: str) -> None:
    repo, base, lock, cache = released
    overlay = repo / OVERLAY_PATH
    overlay.write_bytes(overlay.read_bytes() + b"\n# off main\n")
    run_tool(repo, "register-overlay")
    if where == "branch":
        git(repo, "checkout", "-qb", "feature")
        git(repo, "commit", "-qam", "feature")
        revision = git(repo, "rev-parse", "HEAD").strip()
    elif where == "stash":
        git(repo, "stash", "-q")
        revision = git(repo, "rev-parse", "stash@{0}").strip()
    else:
        git(repo, "commit", "-qam", "soon unreachable")
        revision = git(repo, "rev-parse", "HEAD").strip()
        git(repo, "reset", "-q", "--hard", "HEAD~1")
    name, data = crafted(base, RELEASED, revision)
    result = judge(released, data, name)
    assert not result.verified
    names(result.verdict, revision)


def test_a_registry_that_is_no_mapping_is_refused_under_python_o_too(tmp_path: Path) -> None:
    (tmp_path / "registry.json").write_text('{"overlays": [2]}')
    check = (
        "import sys, patched_wheel.releases as r\n"
        "try:\n    r.load_overlay_releases(r.Path(sys.argv[1]))\n"
        "except r.PatchError as error:\n    print(error)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "tools")}
    command = [sys.executable, "-O", "-c", check, str(tmp_path / "registry.json")]
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    # Refused as a PatchError (caught and printed above), not by an assert that -O drops.
    assert done.returncode == 0 and done.stdout.endswith("\n"), done.stderr
    names(done.stdout[:-1], str(tmp_path / "registry.json"))


def test_one_release_is_one_file_in_two_clones_at_two_commits(released: Released) -> None:
    """A clone at a later commit that leaves the fork's files alone (a README edit) builds the
    release's very bytes: the record names the commit that released it, and its time."""
    repo, base, lock, cache = released
    release = git(repo, "rev-parse", "HEAD").strip()
    first = build(repo, base, lock)
    clone = repo.parent / "clone"
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    (clone / "README.md").write_text("an edit that does not touch the fork\n")
    git(clone, "add", "README.md")
    git(clone, "commit", "-qm", "readme", "--date=2030-01-01T00:00:00")
    second = build(clone, base, lock, "--out", str(repo.parent / "second"))
    assert first.name == second.name and first.read_bytes() == second.read_bytes()
    assert release in run_tool(clone, "provenance", str(second)).stdout
    status, report = verify(clone, second, lock, cache)
    assert status == 0, report


def test_a_record_of_a_later_commit_is_not_the_release(released: Released) -> None:
    """What the build wrote before: the revision it was built at, not the release's commit."""
    repo, base, lock, cache = released
    release = git(repo, "rev-parse", "HEAD").strip()
    (repo / "README.md").write_text("later\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "readme")
    later = git(repo, "rev-parse", "HEAD").strip()
    name, data = crafted(base, RELEASED, later, tool_sha256())
    result = judge(released, data, name)
    assert not result.verified
    names(result.verdict, later, release)  # built at the one, released at the other


def test_a_shallow_clone_says_it_lacks_history(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    for edit in ("one", "two"):
        (repo / "README.md").write_text(edit)
        git(repo, "add", "README.md")
        git(repo, "commit", "-qm", edit)
    shallow = repo.parent / "shallow"
    git(repo.parent, "clone", "-q", "--depth", "1", repo.as_uri(), str(shallow))
    status, report = verify(shallow, wheel, lock, cache)
    assert status == 1 and "never released" not in report
    names(report.splitlines()[-1], "git fetch --unshallow")  # what to do
    done = run_tool(shallow, "build", "--base-wheel", str(base), "--lock", str(lock))
    refusal(done, "git fetch --unshallow")


def test_development_labels_sort_below_releases_for_pip(tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    for label in ("memfix1.dev2.gcd7f5f9a51", "memfix1.2"):
        origin = Origin(label, SourceRevision("0" * 40, False), "1" * 64)
        data = patch_wheel(
            BaseWheel(
                make_wheel(tmp_path / "b").read_bytes(),
                "torch_tensorrt-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            ),
            overlay_from_bytes(OVERLAY, "o"),
            origin=origin,
        )
        folder.mkdir(exist_ok=True)
        (folder / data.filename).write_bytes(data.data)
    command = [sys.executable, "-m", "pip", "download", "--no-index", "--find-links", str(folder)]
    command += ["--no-deps", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11"]
    command += ["--only-binary=:all:", "-d", str(tmp_path / "got"), "torch_tensorrt==2.99.0"]
    subprocess.run(command, check=True, capture_output=True, env=pip_environment())
    assert [p.name.split("-")[1] for p in (tmp_path / "got").glob("*.whl")] == ["2.99.0+memfix1.2"]


def _clone(source: Path, folder: Path, *options: str) -> Path:
    subprocess.run(["git", *options, "clone", "-q", str(source), str(folder)], check=True)
    return folder


def test_a_clone_with_windows_line_ends_builds_and_verifies_the_release(
    released: Released, tmp_path: Path
) -> None:
    """``core.autocrlf=true`` (Git for Windows' default) or a committed ``eol=crlf`` writes the
    files with CRLF; the release's bytes are the same, and verify says so."""
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    crlf = _clone(repo, tmp_path / "crlf", "-c", "core.autocrlf=true")
    git(crlf, "config", "core.autocrlf", "true")
    assert b"\r\n" in (crlf / TOOL_PATH / "patch.py").read_bytes()
    (crlf / ".gitattributes").write_text("* text eol=crlf\n")
    git(crlf, "add", ".gitattributes")
    git(crlf, "commit", "-qm", "line ends")
    again = build(crlf, base, lock)
    assert again.name == wheel.name and again.read_bytes() == wheel.read_bytes()
    assert verify(crlf, wheel, lock, cache)[0] == 0


def test_a_local_main_behind_its_remote_says_which_history_it_read(
    released: Released, tmp_path: Path
) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    clone = _clone(repo, tmp_path / "clone")
    git(clone, "checkout", "-q", "--detach")  # main moved, the tree and origin/main not
    unrelated = git(clone, "commit-tree", "HEAD^{tree}", "-m", "not the release").strip()
    git(clone, "update-ref", "refs/heads/main", unrelated)
    status, report = verify(clone, wheel, lock, cache)
    assert status == 0 and "released on:    origin/main" in report, report
    git(clone, "update-ref", "-d", "refs/remotes/origin/main")
    status, report = verify(clone, wheel, lock, cache)
    assert status == 1 and names(
        report.splitlines()[-1], "not on the main branch", "consulted: main"
    )


def test_without_git_the_build_and_verify_say_so(released: Released, tmp_path: Path) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    (tmp_path / "bin").mkdir()  # the tool runs Python as sys.executable, git from PATH
    no_git = str(tmp_path / "bin")
    options = ["--lock", str(lock), "--cache", str(cache)]
    done = run_tool(repo, "verify", str(wheel), *options, PATH=no_git)
    refusal(done, "git cannot be run here", "install git")
    assert "unshallow" not in done.stderr and "not released" not in done.stderr
    out = ["--base-wheel", str(base), "--lock", str(lock), "--out", str(tmp_path / "o")]
    done = run_tool(repo, "build", *out, PATH=no_git)
    assert done.returncode == 0 and "no revision is known" in done.stderr
    assert ".dev" in Path(done.stdout.strip()).name
