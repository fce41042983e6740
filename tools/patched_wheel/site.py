"""The fork's site in one folder: the index of patched wheels, the docs, and a landing page.

    python tools/patched_wheel site --out DIR [matrix options]

writes a folder that any static web host serves as it is (GitHub Pages, an object store, an
internal web server), and that works as a ``file://`` folder too::

    DIR/index.html            the landing page: what to type for pip, uv and a pyproject.toml
    DIR/simple/               the PEP 503 index of the patched wheels, one page per project
    DIR/*.whl                 the patched wheels the index links to
    DIR/supported_matrix.json what was built
    DIR/docs/                 the documentation, built from docsrc/

Why a separate command: the wheels and their index come from ``matrix``, the docs from Sphinx;
a team that publishes the fork wants both at one address with the install lines beside them,
and a CI workflow (``.github/workflows/pages.yml``) wants one step. Every link in the folder is
relative, so it can move; the install lines name the index by the page's own address, which
the page fills in when it is opened (the address is not known when the folder is built).

The wheels and the index are built by the command line (``python tools/patched_wheel
matrix``), in a subprocess, as any other user of the tool calls it: options that this command
does not know (``--release``, ``--platform``, ``--python``, ...) go to ``matrix`` as they are,
so a site can hold a few wheels or the whole matrix. The site lists whatever projects the index
holds; nothing here names one. The docs are built as ``docsrc/Makefile`` builds them (warnings
are errors). The folder is written under a temporary name beside ``DIR`` and renamed into place
only when everything is built; ``DIR`` must not exist yet, or be empty.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from packaging.utils import canonicalize_name, parse_wheel_filename

logger = logging.getLogger(__name__)

TOOL = Path(__file__).resolve().parent  # runnable as a folder: ``python tools/patched_wheel``
REPOSITORY = TOOL.parent.parent
DOCSRC = REPOSITORY / "docsrc"

# What the docs build imports, as docsrc/Makefile puts it on PYTHONPATH: the overlay, the
# extensions, the build tool's parser and label, the tables and plots.
DOCS_IMPORTED_FOLDERS = ("py", "docsrc/_ext", "tools", "benchmarks")

# The options of docsrc/Makefile's SPHINXOPTS (a test keeps the two the same): warnings are
# errors, all of them reported, and every internal reference must resolve.
SPHINX_OPTIONS = ("-W", "--keep-going", "-n")

# The name of the fork's index in the project-manager recipes (uv, poetry, pdm).
INDEX_NAME = "torchtrt-memfix"

# Where the docs give every recipe in full, with what each does when the index is down.
RECIPES_PAGE = "docs/getting_started/installation.html#install-project-managers"


class SiteError(Exception):
    """A site that cannot be built; its message names the problem and what to do."""


@dataclass(frozen=True)
class Project:
    """A project of the index: its name and the patched versions it offers, newest first."""

    name: str
    versions: List[str]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/patched_wheel site",
        description=(
            "Build the site: the patched wheels with their index, the docs, and a landing page "
            "with the install lines, in one static folder. Other options go to 'matrix' "
            "(python tools/patched_wheel matrix --help): --release, --platform and --python "
            "build a part of the matrix; the default is all of it."
        ),
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="the site's folder (must not exist, or be empty)"
    )
    args, matrix_options = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        build_site(args.out, matrix_options=matrix_options)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def build_site(out: Path, *, matrix_options: Sequence[str] = ()) -> None:
    """Write the site into ``out``: wheels and index, docs, landing page; all or nothing."""
    # Check what the steps need before the minutes of building
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SiteError(
            f"{str(out)!r} exists and is not an empty folder; remove it or name another "
            "(the site is written as a new folder, never over an old one)"
        )
    if importlib.util.find_spec("sphinx") is None:
        raise SiteError(
            "the docs build needs Sphinx, which this Python lacks; install what the docs need "
            f"with: {Path(sys.executable).name} -m pip install -r docsrc/requirements.txt"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
    try:
        # The patched wheels and their PEP 503 index, by the command line
        _run_step(
            "the wheels and their index",
            [sys.executable, str(TOOL), "matrix", "--out", str(staging), *matrix_options],
        )
        if not (staging / "simple" / "index.html").is_file():
            raise SiteError(
                "the matrix wrote no index (its messages above say why: only wheels of a "
                "released overlay are indexed); no site was written"
            )
        projects = read_projects(staging / "simple")
        if not projects:
            raise SiteError("the index holds no project; check the matrix options")
        # The docs, as docsrc/Makefile builds them (its doctrees kept out of the site)
        with tempfile.TemporaryDirectory() as doctrees:
            _run_step(
                "the docs",
                [sys.executable, "-m", "sphinx", "-b", "html", *SPHINX_OPTIONS, "-q"]
                + ["-d", doctrees, str(DOCSRC), str(staging / "docs")],
                environment=docs_environment(),
            )
        # The landing page, and no Jekyll on hosts that would run it (it hides _static/)
        (staging / "index.html").write_text(landing_page(projects), encoding="utf-8")
        (staging / ".nojekyll").write_bytes(b"")
        # Into place
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    for project in projects:
        logger.info("%s: %s", project.name, ", ".join(project.versions))
    logger.info("site in %s; open %s", out, (out / "index.html").resolve().as_uri())


def docs_environment() -> Dict[str, str]:
    """The environment of a docs build: PYTHONPATH as docsrc/Makefile sets it."""
    folders = [str(REPOSITORY / folder) for folder in DOCS_IMPORTED_FOLDERS]
    folders += [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return dict(os.environ, PYTHONPATH=os.pathsep.join(folders))


def _run_step(what: str, command: List[str], environment: Optional[Dict[str, str]] = None) -> None:
    """Run one step's command in the repository, its output shown as it comes."""
    logger.info("building %s: %s", what, " ".join(command))
    completed = subprocess.run(command, cwd=REPOSITORY, env=environment, check=False)
    if completed.returncode != 0:
        raise SiteError(
            f"building {what} failed (exit status {completed.returncode}, its messages above); "
            "no site was written"
        )


class _Links(HTMLParser):
    """The ``href`` and text of every link of a simple-index page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: List[Dict[str, str]] = []
        self._href: Optional[str] = None

    def handle_starttag(self, tag: str, attrs: List[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self.links.append({"href": self._href, "text": ""})

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.links[-1]["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def _links(page: Path) -> List[Dict[str, str]]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.links


def read_projects(simple: Path) -> List[Project]:
    """The projects of a PEP 503 index folder and their versions, read from its pages (the
    index is the one account of what the site offers)."""
    projects = []
    for link in _links(simple / "index.html"):
        name = canonicalize_name(link["text"].strip())
        wheels = [entry["text"].strip() for entry in _links(simple / name / "index.html")]
        versions = sorted({parse_wheel_filename(wheel)[1] for wheel in wheels}, reverse=True)
        projects.append(Project(name, [str(version) for version in versions]))
    return sorted(projects, key=lambda project: project.name)


def uv_recipe(project: str, version: str, index_url: str) -> str:
    """The ``pyproject.toml`` lines that take ``project`` alone from the fork's index."""
    return (
        "[project]\n"
        f'dependencies = ["{project}=={version}"]\n'
        "\n"
        "[[tool.uv.index]]\n"
        f'name = "{INDEX_NAME}"\n'
        f'url = "{index_url}"\n'
        "explicit = true\n"
        "\n"
        "[tool.uv.sources]\n"
        f'{project} = {{ index = "{INDEX_NAME}" }}\n'
    )


# What stands for the index's address in the install lines until the page's script replaces it
# with the address the page was opened at (a relative URL is not one pip or uv accepts).
INDEX_URL_PLACEHOLDER = "https://<this site>/simple/"

PAGE_STYLE = """\
body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; }
pre { background: #f4f4f4; padding: 0.75rem; overflow-x: auto; }
"""

# Fills every install line with the index's address, from the page's own: works on any host and
# from file://, and names the address the reader actually used.
PAGE_SCRIPT = """\
const index = new URL("simple/", document.baseURI).href;
for (const element of document.querySelectorAll(".index-url")) element.textContent = index;
"""


def landing_page(projects: Sequence[Project]) -> str:
    """The site's ``index.html``: what the site is, the install lines, relative links only."""
    url = f'<span class="index-url">{html.escape(INDEX_URL_PLACEHOLDER)}</span>'
    sections = []
    for project in projects:
        newest = project.versions[0]
        requirement = html.escape(f'"{project.name}=={newest}"')
        recipe = html.escape(uv_recipe(project.name, newest, INDEX_URL_PLACEHOLDER)).replace(
            html.escape(INDEX_URL_PLACEHOLDER), url
        )
        page = f"simple/{html.escape(project.name)}/index.html"
        sections.append(
            f"<h2>{html.escape(project.name)}</h2>\n"
            f"<p>Patched versions: {html.escape(', '.join(project.versions))} "
            f'(<a href="{page}">the files, with their sha256</a>).</p>\n'
            "<p>With pip, the index as an extra one, so that torch and TensorRT still come "
            "from PyPI:</p>\n"
            f"<pre>pip install --extra-index-url {url} {requirement}</pre>\n"
            "<p>In a uv project, <code>pyproject.toml</code>: the index is explicit, so only "
            f"{html.escape(project.name)} comes from it and everything else from PyPI:</p>\n"
            f"<pre>{recipe}</pre>\n"
        )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>torch_tensorrt, compile-memory fork: patched wheels</title>\n"
        f"<style>\n{PAGE_STYLE}</style>\n</head>\n<body>\n"
        "<h1>torch_tensorrt, compile-memory fork</h1>\n"
        "<p>Patched <code>torch_tensorrt</code> wheels: the official wheels from PyPI with the "
        "fork's two fixes for the memory a compile takes spliced into "
        "<code>torch_tensorrt/dynamo/utils.py</code>, every other file unchanged. The "
        'package index is <a href="simple/index.html">here</a>; the '
        '<a href="docs/index.html">documentation</a> says what the fixes do and what they '
        f'cost; its <a href="{RECIPES_PAGE}">install page</a> gives the lines for poetry and '
        "pdm, and what each tool does when this index cannot be reached.</p>\n"
        + "".join(sections)
        + '<p><a href="supported_matrix.json">What was built</a>, per release, platform '
        "and Python.</p>\n"
        f"<noscript><p>Replace {html.escape(INDEX_URL_PLACEHOLDER)} with this page's address "
        "(without <code>index.html</code>) followed by <code>simple/</code>.</p></noscript>\n"
        f"<script>\n{PAGE_SCRIPT}</script>\n</body>\n</html>\n"
    )


if __name__ == "__main__":
    sys.exit(main())
