"""The docs build: ``sphinx-build -W --keep-going -n`` on ``docsrc`` succeeds, offline-clean.

The build runs once per session (``built_html`` in ``conftest.py``). The tests then check what the build wrote: every page a reader is sent to exists, the figures were drawn,
and no page loads anything from another host.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import results
from patched_wheel.matrix import supported_table

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
    assert len(images) == len(results.PLOTS), f"benchmarks.html draws {images}"
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
    for row in results.table(name).rows:
        for cell in row:
            assert html.escape(cell.replace("`", ""), quote=False) in text, (page, cell)


def test_api_says_what_private_helpers_are(built_html: Path) -> None:
    page = (built_html / "api.html").read_text(encoding="utf-8")
    assert 'id="internal-helpers"' in page, "api.html has no section for the private helpers"
    section = page[page.index('id="internal-helpers"') :]
    assert "torch_tensorrt.dynamo.utils._glibc_malloc_trim" in section


def test_usage_lines_fit_the_page(built_html: Path) -> None:
    """Each command's usage wraps between option groups, within 48 characters a line (a phone's
    width at the font size fork.css gives it)."""
    import html as html_module

    for page in sorted((built_html / "reference").glob("patched_wheel_*.html")):
        text = page.read_text(encoding="utf-8")
        block = re.search(r'<div class="cli-usage[^>]*>.*?</pre>', text, re.S)
        assert block is not None, f"{page.name} shows no usage"
        usage = html_module.unescape(re.sub(r"<[^>]+>", "", block.group(0))).strip()
        long_lines = [line for line in usage.splitlines() if len(line) > 48]
        assert not long_lines, f"{page.name}: usage lines run off the page: {long_lines}"
        for line in usage.splitlines():
            opened = line.count("[") + line.count("{")
            assert opened == line.count("]") + line.count(
                "}"
            ), f"{page.name}: a usage line is broken inside an option group: {line!r}"


def test_phone_styles_break_no_word(built_html: Path) -> None:
    """fork.css never breaks a command or a name at an arbitrary letter, and never makes a
    plot wider than the page (issue 16: "offload_sha|pes.json", "upstrea|m", 150vw plots)."""
    css = (built_html / "_static" / "fork.css").read_text(encoding="utf-8")
    assert "break-all" not in css
    assert "vw" not in re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert re.search(r"img\.plot-directive\s*{[^}]*max-width:\s*100%", css)
    assert re.search(r"table\.benchmark-table code[^{]*{[^}]*white-space:\s*nowrap", css)


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
            if "not the current" in results.overlay_text(results.result_file(role.split()[0]))
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


def test_reference_pages_show_the_defaults(built_html: Path) -> None:
    import html as html_module

    page = (built_html / "reference" / "patched_wheel_lock.html").read_text(encoding="utf-8")
    text = html_module.unescape(re.sub(r"<[^>]+>", "", page))
    assert "(default: tools/patched_wheel/official_wheels.lock.json)" in text
    assert "(default: 4)" in text
