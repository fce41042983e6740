"""The fork's site in one folder: the index of patched wheels, the docs, and a landing page.

``site --out DIR``: the landing page (``index.html``, the lines for pip and uv), ``matrix``'s
output (the wheels, their PEP 503 index ``simple/``) and ``docs/``, in a folder that any static
web host (or ``file://``) serves as it is and that can move (every link is relative): one
address for a team that publishes the fork, one step for the pages workflow. ``matrix`` runs in
a subprocess, as any user runs it; ``DIR`` is renamed into place when everything is built."""

from __future__ import annotations

import html
import importlib.util
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from packaging.utils import canonicalize_name, parse_wheel_filename

from . import PatchError, config

logger = logging.getLogger(__name__)

# docsrc/Makefile's SPHINXOPTS (a test keeps them the same): warnings, all shown, and broken
# references fail the build.
SPHINX_OPTIONS = ("-W", "--keep-going", "-n")


def build_site(
    out: Path, *, matrix_options: Sequence[str] = (), docs: Optional[Path] = None
) -> None:
    """Write the site into ``out``: wheels and index, docs, landing page; all or nothing.

    ``docs``: the docs already built (``python -m sphinx -b html docsrc DIR``), copied in
    instead of built here, so that the docs' requirements never run in the process, or the
    job, that builds, verifies and indexes the wheels (the pages workflow builds them in a job
    of their own)."""
    # Check what the steps need before the minutes of building; paths are the caller's, from
    # the current folder (the steps run there too, so --cache and the like mean the same)
    out = out.absolute()
    if out.is_symlink():
        raise PatchError(
            f"{str(out)!r} is a symlink; name a new folder (the site is written as a new "
            "folder, never through a link)"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PatchError(
            f"{str(out)!r} exists and is not an empty folder; remove it or name another "
            "(the site is written as a new folder, never over an old one)"
        )
    if docs is not None and not (docs / "index.html").is_file():
        raise PatchError(
            f"{str(docs)!r} holds no index.html; build the docs into it first: "
            f"python -m sphinx -b html {' '.join(SPHINX_OPTIONS)} docsrc {docs}"
        )
    odd = [p for p in docs.rglob("*") if not _plain(p)] if docs is not None else []
    if odd:
        raise PatchError(
            f"{str(odd[0])!r} is a symlink, a FIFO or another file that is not a plain file or "
            "folder; the docs folder must hold plain files only (build the docs into a new folder)"
        )
    if docs is None and importlib.util.find_spec("sphinx") is None:
        raise PatchError(
            "the docs build needs Sphinx, which this Python lacks; install what the docs need "
            f"with: {Path(sys.executable).name} -m pip install -r docsrc/requirements.txt"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
    try:
        # The patched wheels and their PEP 503 index, by the command line
        matrix = [sys.executable, str(Path(__file__).parent), "matrix", "--out", str(staging)]
        said = _run_step("the wheels and their index", [*matrix, *matrix_options])
        if not (staging / "simple" / "index.html").is_file():
            raise PatchError(
                "the matrix wrote no index (its messages above say why: only wheels of a "
                "released overlay are indexed); no site was written"
            )
        projects = read_projects(staging / "simple")
        if not projects:
            raise PatchError("the index holds no project; check the matrix options")
        # The docs, as docsrc/Makefile builds them (doctrees and plots in a folder of their
        # own), or as they were built elsewhere
        if docs is not None:
            shutil.copytree(docs, staging / "docs", symlinks=False)
        else:
            _build_docs(staging / "docs")

        # The landing page, and no Jekyll on hosts that would run it (it hides _static/)
        (staging / "index.html").write_text(landing_page(projects), encoding="utf-8")
        (staging / ".nojekyll").write_bytes(b"")
        # Into place
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
        # What the matrix said, of the folder it wrote in: the site's, now
        said = said.replace(staging.resolve().as_uri(), out.resolve().as_uri())
        print(said.replace(str(staging), str(out)), end="")
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    for name, versions in projects.items():
        logger.info("%s: %s", name, ", ".join(versions))
    logger.info("site in %s; open %s", out, (out / "index.html").resolve().as_uri())


def _build_docs(folder: Path) -> None:
    """Build the docs into ``folder`` as docsrc/Makefile does."""
    with tempfile.TemporaryDirectory() as scratch:
        doctrees = str(Path(scratch) / "doctrees")
        sphinx = [sys.executable, "-m", "sphinx", "-b", "html", *SPHINX_OPTIONS, "-q"]
        folders = ["-d", doctrees, str(config.REPOSITORY / "docsrc"), str(folder)]
        _run_step("the docs", sphinx + folders)  # conf.py finds what it imports itself


def _plain(path: Path) -> bool:
    """Whether ``path`` is a plain file or folder (not a link, a FIFO, a device, a socket)."""
    mode = path.lstat().st_mode
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _run_step(what: str, command: List[str], environment: Optional[Dict[str, str]] = None) -> str:
    """Run one step's command in the current folder, its messages shown as they come; what it
    printed, which names the staging folder, is returned to be said once the site is in place."""
    logger.info("building %s: %s", what, " ".join(command))
    completed = subprocess.run(
        command, env=environment, check=False, stdout=subprocess.PIPE, text=True
    )
    if completed.returncode != 0:
        print(completed.stdout, end="")
        raise PatchError(
            f"building {what} failed (exit status {completed.returncode}, its messages above); "
            "no site was written"
        )
    return completed.stdout


def read_projects(simple: Path) -> Dict[str, List[str]]:
    """The projects of a PEP 503 index folder, by name, and their versions, newest first, read
    from its pages (the index is the one account of what the site offers)."""

    def link_texts(page: Path) -> List[str]:  # as the tool's index writes its pages
        links = re.findall(r"<a\b[^>]*>(.*?)</a>", page.read_text(encoding="utf-8"), re.S)
        return [html.unescape(text).strip() for text in links]

    projects: Dict[str, List[str]] = {}
    for name in sorted(canonicalize_name(text) for text in link_texts(simple / "index.html")):
        wheels = link_texts(simple / name / "index.html")
        versions = sorted({parse_wheel_filename(wheel)[1] for wheel in wheels}, reverse=True)
        projects[name] = [str(version) for version in versions]
    return projects


# What stands for the index's address in the install lines until the landing page's script
# fills in the address the page was opened at: that works on any host and from file://, and names
# the address the reader used (a relative URL is not one pip or uv accepts).
INDEX_URL_PLACEHOLDER = "https://<this site>/simple/"
PAGE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>torch_tensorrt, compile-memory fork: patched wheels</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; }}
pre {{ background: #f4f4f4; padding: 0.75rem; overflow-x: auto; }}
</style>
</head>
<body>
<h1>torch_tensorrt, compile-memory fork</h1>
<p>Patched <code>torch_tensorrt</code> wheels: the official wheels from PyPI with the fork's two \
fixes for the memory a compile takes spliced into <code>torch_tensorrt/dynamo/utils.py</code>, \
every other file unchanged. The package index is <a href="simple/index.html">here</a>; the \
<a href="docs/index.html">documentation</a> says what the fixes do and what they cost; its \
<a href="docs/getting_started/installation.html#install-project-managers">install page</a> gives \
the lines for poetry and pdm, and what each tool does when this index cannot be reached.</p>
{sections}<p><a href="supported_matrix.json">What was built</a>, per release, platform and \
Python.</p>
<noscript><p>Replace {placeholder} with this page's address (without <code>index.html</code>) \
followed by <code>simple/</code>.</p></noscript>
<script>
const index = new URL("simple/", document.baseURI).href;
for (const element of document.querySelectorAll(".index-url")) element.textContent = index;
</script>
</body>
</html>
"""


# A project's part of the landing page; its uv recipe names the index as the install page's do.
SECTION = """\
<h2>{name}</h2>
<p>Patched versions: {versions} (<a href="simple/{name}/index.html">the files, with their \
sha256</a>).</p>
<p>With pip, the index as an extra one, so that torch and TensorRT still come from PyPI:</p>
<pre>pip install --extra-index-url {url} &quot;{name}=={newest}&quot;</pre>
<p>In a uv project, <code>pyproject.toml</code>: the index is explicit, so only {name} comes \
from it and everything else from PyPI:</p>
<pre>[project]
dependencies = [&quot;{name}=={newest}&quot;]

[[tool.uv.index]]
name = &quot;torchtrt-memfix&quot;
url = &quot;{url}&quot;
explicit = true

[tool.uv.sources]
{name} = {{ index = &quot;torchtrt-memfix&quot; }}
</pre>
"""


def landing_page(projects: Mapping[str, Sequence[str]]) -> str:
    """The site's ``index.html``: what the site is, the install lines, relative links only."""
    placeholder = html.escape(INDEX_URL_PLACEHOLDER)
    url = f'<span class="index-url">{placeholder}</span>'
    sections = []
    for project, versions in projects.items():
        name, newest, listed = map(html.escape, (project, versions[0], ", ".join(versions)))
        sections.append(SECTION.format(name=name, versions=listed, newest=newest, url=url))
    return PAGE.format(sections="".join(sections), placeholder=placeholder)
