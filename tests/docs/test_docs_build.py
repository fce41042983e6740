"""The docs build: ``sphinx-build -W --keep-going -n`` on ``docsrc`` succeeds, offline-clean.

The build runs once per session (``built_html`` in ``conftest.py``). The tests then check what the build wrote: every page a reader is sent to exists, the figures were drawn,
and no page loads anything from another host.
"""

from __future__ import annotations

import argparse
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from patched_wheel.__main__ import argument_parser
from patched_wheel.matrix import supported_table

from evidence import plots, tables
from evidence.result import result_file

REPOSITORY = Path(__file__).resolve().parents[2]
DOCSRC = REPOSITORY / "docsrc"

PAGES = [
    "index.html",
    "getting_started/installation.html",
    "debugging/troubleshooting.html",
    "tutorials/resource_memory/resource_management.html",
    "api.html",
    "benchmarks.html",
    "reference/index.html",
    "reference/patched_wheel_build.html",
    "reference/patched_wheel_matrix.html",
    "reference/patched_wheel_lock.html",
    "reference/patched_wheel_verify.html",
    "reference/patched_wheel_index.html",
    "reference/patched_wheel_provenance.html",
    "reference/patched_wheel_register_overlay.html",
    "reference/patched_wheel_site.html",
    "genindex.html",
]


class _Resources(HTMLParser):
    """Collects ``(tag, attribute, url)`` of everything a page loads or links to."""

    def __init__(self) -> None:
        super().__init__()
        self.found: List[Tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and name in ("src", "href", "data", "srcset", "poster"):
                self.found.append((tag, name, value))


def _is_remote(url: str) -> bool:
    return re.match(r"^\s*(https?:)?//", url, re.IGNORECASE) is not None


@pytest.mark.parametrize("page", [pytest.param(page, id=page) for page in PAGES])
def test_page_is_built(built_html: Path, page: str) -> None:
    assert (built_html / page).is_file(), f"{page} is missing from the built docs"


def test_no_page_loads_from_other_hosts(built_html: Path) -> None:
    """No <script src>, <link href>, <img src>, ... points at an http(s) host: the docs read
    offline and carry no tracking or CDN scripts. Plain <a href> links to other sites are
    fine: a reader follows them, the page does not load them."""
    offending: Dict[str, List[str]] = {}
    pages = sorted(built_html.rglob("*.html"))
    assert pages, "the docs build wrote no HTML"
    for page in pages:
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        remote = [
            f"<{tag} {name}={url!r}>"
            for tag, name, url in parser.found
            if tag != "a" and _is_remote(url)
        ]
        if remote:
            offending[str(page.relative_to(built_html))] = remote
    assert not offending, f"pages load resources from other hosts: {offending}"


def test_no_stylesheet_or_script_imports_from_other_hosts(built_html: Path) -> None:
    """CSS @import/url() and scripts shipped with the docs load nothing from other hosts."""
    offending = []
    for path in sorted(built_html.rglob("*.css")):
        text = path.read_text(encoding="utf-8", errors="replace")
        for url in re.findall(r"""(?:@import\s+|url\()\s*["']?([^"')\s]+)""", text):
            if _is_remote(url):
                offending.append(f"{path.relative_to(built_html)}: {url}")
    assert not offending, f"stylesheets load from other hosts: {offending}"


def test_plots_are_drawn_from_the_results(built_html: Path) -> None:
    """The benchmark page shows the figures the plot directive drew at build time."""
    page = (built_html / "benchmarks.html").read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', page)
    assert len(images) == len(plots.PLOTS), f"benchmarks.html draws {images}"
    for image in images:
        assert (built_html / image).is_file(), f"benchmarks.html shows a missing image {image}"


def test_api_documents_the_overlay(built_html: Path) -> None:
    page = (built_html / "api.html").read_text(encoding="utf-8")
    for name in (
        "torch_tensorrt.dynamo.utils.deallocate_module",
        "torch_tensorrt.dynamo.utils.trim_host_heap",
        "torch_tensorrt.dynamo.utils.release_host_and_device_memory",
        "torch_tensorrt.dynamo.utils._glibc_malloc_trim",
        "torch_tensorrt.dynamo.utils.DEFAULT_RELEASE_EVERY_BYTES",
        "torch_tensorrt.dynamo.utils.PINNED_BOUNCE_CHUNK_BYTES",
        "envvar-TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM",
        "envvar-TORCHTRT_OFFLOAD_PINNED_BOUNCE",
    ):
        assert f'id="{name}"' in page, f"api.html documents no {name}"


def test_supported_matrix_is_the_build_tools_table(built_html: Path) -> None:
    """The docs' supported table is ``matrix.supported_table`` of its JSON, cell for cell (the
    README's is made by the same function: ``test_readme.py``)."""
    document = json.loads((DOCSRC / "_data" / "supported_matrix.json").read_text("utf-8"))
    header, rows = supported_table(document)
    page = (built_html / "getting_started" / "installation.html").read_text(encoding="utf-8")
    tables = [t for t in re.findall(r"<table.*?</table>", page, re.S) if ">Base release<" in t]
    assert len(tables) == 1, "installation.html has no one supported table"
    assert re.findall(r"<p>(.*?)</p>", tables[0]) == [*header, *(c for row in rows for c in row)]


# What a page must not show: paths of the machine that built the docs or ran a benchmark.
MACHINE_LOCAL = re.compile(
    r"/root/|/home/[a-z]|/Users/|/tmp/|/var/folders/|venv/bin/|[A-Za-z]:\\Users"
)


def test_no_machine_local_paths(built_html: Path) -> None:
    """Generated text (result sources, option defaults, plots' captions) shows repository
    paths and plain commands, never the folders of the machine where it was made."""
    offending: Dict[str, List[str]] = {}
    for page in sorted(built_html.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        found = [match.group(0) for match in MACHINE_LOCAL.finditer(text)]
        found += [str(REPOSITORY)] * text.count(str(REPOSITORY))
        if found:
            offending[str(page.relative_to(built_html))] = sorted(set(found))
    assert not offending, f"pages show machine-local paths: {offending}"


@pytest.mark.parametrize(
    "name, page",
    [
        pytest.param("offload-memory", "tutorials/resource_memory/resource_management.html"),
        pytest.param("host-heap", "tutorials/resource_memory/resource_management.html"),
        pytest.param("offload-speed", "benchmarks.html"),
        pytest.param("build-speed", "getting_started/installation.html"),
    ],
)
def test_docs_show_the_readme_tables(built_html: Path, name: str, page: str) -> None:
    """The docs' copies of the README's tables hold the same figures as the README."""
    text = re.sub(r"<[^>]+>", "", (built_html / page).read_text(encoding="utf-8"))
    for row in tables.table(name).rows:
        for cell in row:
            assert html.escape(cell.replace("`", ""), quote=False) in text, (page, cell)


def test_api_says_what_private_helpers_are(built_html: Path) -> None:
    page = (built_html / "api.html").read_text(encoding="utf-8")
    assert 'id="internal-helpers"' in page, "api.html has no section for the private helpers"
    section = page[page.index('id="internal-helpers"') :]
    assert "torch_tensorrt.dynamo.utils._glibc_malloc_trim" in section


def test_phone_styles_break_no_word(built_html: Path) -> None:
    """fork.css never breaks a command or a name at an arbitrary letter, and never makes a
    plot wider than the page (issue 16: "offload_sha|pes.json", "upstrea|m", 150vw plots)."""
    css = (built_html / "_static" / "fork.css").read_text(encoding="utf-8")
    assert "break-all" not in css
    assert "vw" not in re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert re.search(r"img\.plot-directive\s*{[^}]*max-width:\s*100%", css)
    assert re.search(r"table\.benchmark-table code[^{]*{[^}]*white-space:\s*nowrap", css)
    # The reference pages' usage blocks (sphinx-argparse's, highlight-none) wrap, never scroll.
    assert re.search(r"div\.highlight-none pre[^{]*{[^}]*white-space:\s*pre-wrap", css)


def test_long_inline_code_is_marked(built_html: Path) -> None:
    """Only inline code with a word too long for a phone's line may break inside it."""
    page = (built_html / "tutorials/resource_memory/resource_management.html").read_text(
        encoding="utf-8"
    )
    marked = re.findall(r'<code class="[^"]*long-literal[^"]*">(.*?)</code>', page, re.S)
    assert marked, "no long inline code was marked on the memory page"
    for code in marked:
        text = re.sub(r"<[^>]+>", "", code)
        assert max(len(word) for word in text.split()) > 28, text


def test_figures_from_other_overlays_are_marked(built_html: Path) -> None:
    """Each inline figure (``:result:``) drawn from a result file that measured another
    overlay than the current one carries the dagger, and no other figure does."""
    for source in sorted(DOCSRC.rglob("*.rst")):
        roles = re.findall(r":result:`([^`]+)`", source.read_text(encoding="utf-8"))
        stale = [
            role
            for role in roles
            if "not the current" in tables.overlay_text(result_file(role.split()[0]))
        ]
        page = built_html / source.relative_to(DOCSRC).with_suffix(".html")
        shown = page.read_text(encoding="utf-8").count('<abbr title="measured on another')
        assert shown == len(stale), f"{page.name}: {shown} figures marked, {len(stale)} stale"


def test_no_printf_field_is_left_unexpanded(built_html: Path) -> None:
    """No page shows a help string's ``%(default)s`` (or any ``%(...)``) as written: the
    reference pages expand them as ``--help`` does."""
    offending = {
        str(page.relative_to(built_html)): sorted(set(re.findall(r"%\([a-z_]*\)?.?", text)))
        for page in sorted(built_html.rglob("*.html"))
        for text in [page.read_text(encoding="utf-8")]
        if "%(" in text
    }
    assert not offending, f"pages show unexpanded %(...) fields: {offending}"


# -- the build tool's reference (sphinx-argparse), checked against the tool's own parser --------

# Characters of a usage line: what a 375 px phone shows in a line at the size fork.css gives
# code (conf.py sets COLUMNS for it); only a first line of the command alone may be longer.
USAGE_WIDTH = 43
# sphinx-argparse's usage block (the reference pages set ``.. highlight:: none``).
USAGE_BLOCK = re.compile(
    r'<div class="highlight-none[^>]*>\s*<div class="highlight"><pre>(.*?)</pre>', re.S
)


def _commands() -> Dict[str, argparse.ArgumentParser]:
    """The parser of ``python tools/patched_wheel`` (as ``""``) and of each of its commands."""
    parser = argument_parser()
    commands = {"": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands.update(action.choices)
    return commands


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _reference_page(built_html: Path, parser: argparse.ArgumentParser) -> Tuple[str, str]:
    """(the usage block, the page) of the reference page that shows ``parser``'s usage, the
    words ``--help`` prints (the lines may break elsewhere)."""
    words = parser.format_usage().split()
    for page in sorted((built_html / "reference").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        for block in USAGE_BLOCK.findall(text):
            if _text(block).split() == words:
                return _text(block).strip(), text
    raise AssertionError(f"no reference page shows the usage of {parser.prog!r} as --help does")


def _help_shown(page: str) -> Dict[str, str]:
    """Each argument a reference page lists (``--lock``, ``DIR``) and its text, in one line."""
    items = re.findall(r"<dt><kbd>(.*?)</kbd></dt>\s*<dd>(.*?)</dd>", page, re.S)
    return {_text(name): " ".join(_text(text).split()) for name, text in items}


@pytest.mark.parametrize("command", [pytest.param(name, id=name or "tool") for name in _commands()])
def test_reference_shows_every_command(built_html: Path, command: str) -> None:
    """Every command has a reference page with its usage, as ``--help`` prints it, and wrapped
    to a phone's line between option groups; the tool's own page lists every command."""
    parser = _commands()[command]
    usage, page = _reference_page(built_html, parser)
    for line in usage.splitlines():
        fits = len(line) <= USAGE_WIDTH or line == f"usage: {parser.prog}"
        assert fits, f"{parser.prog}: a usage line runs off a phone: {line!r}"
        opened = line.count("[") + line.count("{")
        assert opened == line.count("]") + line.count("}"), f"{parser.prog}: broken group {line!r}"
    if not command:
        choices = _help_shown(page)["COMMAND"]
        assert set(_commands()) - {""} <= set(re.findall(r"[\w-]+", choices)), choices


@pytest.mark.parametrize("command", [pytest.param(name, id=name or "tool") for name in _commands()])
def test_every_default_is_in_its_help(command: str) -> None:
    """The reference pages leave out sphinx-argparse's own "Default:" line (``:nodefault:``),
    which would show a path default as this machine's absolute path: so every option with a
    default says it in its help, relative to the repository where it is a path there."""
    for action in _commands()[command]._actions:
        if action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in (action.help or ""), f"{command} {action.option_strings}"
