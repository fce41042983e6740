"""The site command: one static folder, relative links only, all or nothing; pip installs the
patched wheel from it with the landing page's line."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List
from urllib.parse import unquote, urlsplit

import pytest
from patched_wheel.config import DEFAULT_RELEASE
from patched_wheel.site import (
    INDEX_URL_PLACEHOLDER,
    SPHINX_OPTIONS,
    landing_page,
    read_projects,
)

from tests.patched_wheel.helpers import refusal

REPOSITORY = Path(__file__).resolve().parents[2]


def _site_command(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPOSITORY / "tools" / "patched_wheel"), "site", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )


def _links(page: str) -> List[str]:
    return [html.unescape(link) for link in re.findall(r'(?:href|src)="([^"]*)"', page)]


def _commands(page: str) -> List[str]:
    """The text of the page's ``<pre>`` blocks, as a reader copies it."""
    blocks = re.findall(r"<pre>(.*?)</pre>", page, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


def test_the_landing_page_links_relatively_and_names_every_project() -> None:
    projects = {
        "torch-tensorrt": ["2.14.0+memfix1.2", "2.13.0+memfix1.2"],
        "torch-tensorrt-rtx": ["2.14.0+memfix1.2"],
    }
    page = landing_page(projects)
    links = _links(page)
    assert "simple/torch-tensorrt-rtx/index.html" in links
    assert [link for link in links if urlsplit(link).scheme or link.startswith("/")] == []
    commands = _commands(page)
    assert (
        f'pip install --extra-index-url {INDEX_URL_PLACEHOLDER} "torch-tensorrt-rtx==2.14.0+memfix1.2"'
        in commands
    )
    assert any('torch-tensorrt-rtx = { index = "torchtrt-memfix" }' in c for c in commands)
    assert 'new URL("simple/", document.baseURI)' in page  # the lines get the page's address


def test_the_projects_are_read_from_the_index(tmp_path: Path) -> None:
    simple = tmp_path / "simple"
    (simple / "torch-tensorrt").mkdir(parents=True)
    (simple / "index.html").write_text('<a href="torch-tensorrt/">torch-tensorrt</a>')
    wheels = [
        f"torch_tensorrt-{v}+memfix1.2-cp311-cp311-win_amd64.whl" for v in ("2.9.0", "2.10.0")
    ]
    (simple / "torch-tensorrt" / "index.html").write_text(
        "".join(f'<a href="../../{w}#sha256=00">{w}</a><br>' for w in wheels)
    )
    assert read_projects(simple) == {
        "torch-tensorrt": ["2.10.0+memfix1.2", "2.9.0+memfix1.2"]  # newest first
    }


def test_a_folder_with_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "old.html").write_text("")
    completed = _site_command("--out", str(tmp_path))
    refusal(completed, repr(str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.html"]


@pytest.mark.parametrize("planted", ["nothing", "symlink", "fifo"])
def test_docs_built_elsewhere_must_be_a_folder_of_plain_files(tmp_path: Path, planted: str) -> None:
    """``--docs DIR`` (the workflow's docs job's output) is checked before anything is built:
    it holds the docs' index.html and no symlink (which would copy what it points to) or FIFO
    (which would stop the copy); the matrix option that would fail shows it is not reached."""
    docs = tmp_path / "docs-html"
    docs.mkdir()
    if planted != "nothing":
        (docs / "index.html").write_text("<html></html>")
        if planted == "symlink":
            (docs / "secret").symlink_to("/etc/hostname")
        else:
            os.mkfifo(docs / "secret")
    arguments = ["--out", str(tmp_path / "site"), "--docs", str(docs), "--release", "1.0"]
    completed = _site_command(*arguments)
    refusal(completed, repr(str(docs / "secret" if planted != "nothing" else docs)))
    assert completed.stderr.count("\n") == 1 and not (tmp_path / "site").exists()


def test_the_workflows_docs_job_builds_as_the_makefile_does(workflow_steps: List[str]) -> None:
    """The docs job's Sphinx options are the site's (and so the Makefile's, test below)."""
    (docs_step,) = [step for step in workflow_steps if step.startswith("python -m sphinx")]
    assert all(option in docs_step.split() for option in SPHINX_OPTIONS)


def test_a_failed_step_leaves_no_site_and_no_partial_folder(tmp_path: Path) -> None:
    completed = _site_command("--out", str(tmp_path / "site"), "--release", "1.0")
    refusal(completed, "exit status 2")  # the matrix's, which refused '1.0' above it
    assert "'1.0'" in completed.stderr and list(tmp_path.iterdir()) == []


def test_the_docs_are_built_as_the_makefile_builds_them() -> None:
    makefile = (REPOSITORY / "docsrc" / "Makefile").read_text(encoding="utf-8")
    options = re.search(r"^SPHINXOPTS \?= (.*)$", makefile, re.M)
    assert options is not None and tuple(options.group(1).split()) == SPHINX_OPTIONS


@pytest.mark.network
def test_every_link_of_the_landing_page_is_a_file_of_the_site(site: Path) -> None:
    page = (site / "index.html").read_text(encoding="utf-8")
    for link in _links(page):
        target = unquote(urlsplit(link).path)
        assert (site / target).is_file(), link


@pytest.mark.network
def test_pip_installs_the_patched_wheel_with_the_landing_pages_line(
    site: Path, tmp_path: Path
) -> None:
    line = next(c for c in _commands((site / "index.html").read_text()) if c.startswith("pip "))
    line = line.replace(INDEX_URL_PLACEHOLDER, (site / "simple").as_uri() + "/")
    target = tmp_path / "target"
    # An offline run (PIP_NO_INDEX, as the README's offline test command sets) would have pip
    # ignore the line's --extra-index-url too; there the site is the one index.
    environment = {k: v for k, v in os.environ.items() if k != "PIP_NO_INDEX"}
    if os.environ.get("PIP_NO_INDEX"):
        environment["PIP_INDEX_URL"] = (site / "simple").as_uri() + "/"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            *line.replace('"', "").split(),
            "--no-deps",
            "--target",
            str(target),
        ],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [p.name for p in target.glob("torch_tensorrt-*.dist-info")] == [
        f"torch_tensorrt-{read_projects(site / 'simple')['torch-tensorrt'][0]}.dist-info"
    ]


@pytest.mark.network
def test_a_relative_out_and_cache_are_the_callers(tmp_path: Path) -> None:
    """Run from a folder outside the repository, ``--out NAME`` and ``--cache DIR`` are
    that folder's; the install line names the site, not the folder it was built in."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPOSITORY), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "-B", "main"], check=True)
    here = tmp_path / "here"
    (here / "docs").mkdir(parents=True)
    (here / "docs" / "index.html").write_text("<html></html>")
    (here / "bases").symlink_to(REPOSITORY / ".cache" / "base-wheels")
    options = ["--release", DEFAULT_RELEASE, "--platform", "manylinux_2_28_x86_64"]
    options += ["--python", f"{sys.version_info[0]}.{sys.version_info[1]}", "--cache", "bases"]
    command = [sys.executable, str(clone / "tools/patched_wheel"), "site", "--out", "site"]
    done = subprocess.run(
        [*command, "--docs", "docs", *options], cwd=here, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (here / "site" / "simple" / "index.html").is_file()
    git_status = ["git", "-C", str(clone), "status", "--porcelain", "--ignored"]
    status = subprocess.run(git_status, capture_output=True, text=True).stdout
    assert status == "" and (here / "site").resolve().as_uri() in done.stdout
    assert ".partial-" not in done.stdout + done.stderr.split("site in")[-1]
