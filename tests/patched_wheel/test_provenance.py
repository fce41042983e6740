"""Which code made a wheel (provenance.py, git.py): the revision, the revision file and the SBOM."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from patched_wheel.config import OVERLAY_PATH
from patched_wheel.verify import read_provenance

from tests.patched_wheel.helpers import (
    NEWEST,
    Released,
    build,
    git,
    names,
    refusal,
    run_tool,
    verify,
)


def test_a_record_of_nested_arrays_is_one_line(tmp_path: Path, released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    data = wheel.read_bytes()
    record = next(n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith("cdx.json"))
    out = tmp_path / wheel.name
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(
                info,
                b"[" * 100_000 + b"]" * 100_000 if info.filename == record else source.read(info),
            )
    for command in ("verify", "provenance"):
        done = run_tool(
            repo,
            command,
            str(out),
            *(["--lock", str(lock), "--cache", str(cache)] if command == "verify" else []),
        )
        refusal(done, out.name)
        assert done.stderr.count("\n") == 1


def test_a_skip_worktree_edit_is_recorded_as_not_the_revisions(released: Released) -> None:
    repo, base, lock, cache = released
    git(repo, "update-index", "--skip-worktree", OVERLAY_PATH)
    (repo / OVERLAY_PATH).write_bytes((repo / OVERLAY_PATH).read_bytes() + b"\n# hidden\n")
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    wheel = build(repo, base, lock)
    assert ".dev" in wheel.name
    assert read_provenance(wheel.read_bytes(), wheel.name).dirty is True


def test_a_short_revision_in_the_revision_file_is_refused(
    tmp_path: Path, released: Released
) -> None:
    repo, base, lock, cache = released
    tree = tmp_path / "copy"
    import shutil

    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git"))
    (tree / ".source-revision.json").write_text(json.dumps({"revision": "abc1234", "dirty": False}))
    done = run_tool(
        tree, "build", "--base-wheel", str(base), "--lock", str(lock), "--out", str(tmp_path / "o")
    )
    refusal(done, str(tree / ".source-revision.json"))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "epoch",
    [
        pytest.param(["1"], id="list"),
        pytest.param(True, id="true"),
        pytest.param(1.7e9, id="float"),
        pytest.param("-5", id="negative"),
        pytest.param("17e8", id="exponent"),
        pytest.param("\x1b[31m1", id="escape"),
        pytest.param(" 1", id="space"),
    ],
)
def test_an_odd_source_date_epoch_in_a_record_is_refused(released: Released, epoch: object) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    out = io.BytesIO()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename.endswith("patched_wheel.cdx.json"):
                document = json.loads(body)
                for item in document["metadata"]["component"]["properties"]:
                    if item["name"].endswith("source_date_epoch"):
                        item["value"] = epoch
                body = (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()
            target.writestr(info, body)
    crafted_wheel = repo.parent / wheel.name
    crafted_wheel.write_bytes(out.getvalue())
    status, report = verify(repo, crafted_wheel, lock, cache)
    assert status == 1 and "SOURCE_DATE_EPOCH" in report
    assert "Traceback" not in report and "\x1b" not in report
    done = run_tool(repo, "index", str(repo.parent), "--lock", str(lock), "--cache", str(cache))
    assert done.returncode == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("how", ["replace", "graft", "GIT_DIR"])
def test_git_answers_from_the_clones_own_objects(released: Released, how: str) -> None:
    """An overlay released only in another repository, made to look like main's history by a
    replace ref, a graft or GIT_DIR, is not a release here (and its tool never runs)."""
    repo, base, lock, cache = released
    evil = repo.parent / "evil"
    git(repo.parent, "clone", "-q", str(repo), str(evil))
    (evil / OVERLAY_PATH).write_bytes((evil / OVERLAY_PATH).read_bytes() + b"\n# evil\n")
    run_tool(evil, "register-overlay")
    git(evil, "commit", "-qam", "evil release")
    released_there = git(evil, "rev-parse", "HEAD").strip()
    wheel = build(evil, base, lock, "--out", str(repo.parent / "evil-dist"))
    assert f"+memfix1.{NEWEST + 1}" in wheel.name
    git(repo, "fetch", "-q", str(evil), "main:refs/heads/evil")
    environ = {}
    if how == "replace":
        git(repo, "replace", "--graft", "main", "evil")  # main's parent, as git shows it: evil
    elif how == "graft":
        head, other = git(repo, "rev-parse", "main", "evil").split()
        (repo / ".git/info/grafts").write_text(f"{head} {other}\n")
    else:
        environ["GIT_DIR"] = str(evil / ".git")
    done = run_tool(
        repo, "verify", str(wheel), "--lock", str(lock), "--cache", str(cache), **environ
    )
    assert done.returncode == 1, done.stderr
    names(done.stdout.splitlines()[-1], "NOT verified", released_there)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_git_refusing_the_clone_is_said_as_such(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    subprocess.run(["chown", "-R", "65534", str(repo)], check=True)
    done = run_tool(
        repo,
        "verify",
        str(wheel),
        "--lock",
        str(lock),
        "--cache",
        str(cache),
        HOME=str(repo.parent),
    )
    refusal(done, "safe.directory")  # git refused the clone: not said as a lack of history
