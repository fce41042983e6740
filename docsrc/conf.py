"""Sphinx configuration of the fork's documentation.

Build with ``make -C docsrc html`` or ``python -m sphinx -W --keep-going -n -b html docsrc
docsrc/_build/html``. Nothing here imports ``torch_tensorrt`` (it needs TensorRT): the
version is read from the patched-wheel build's sources, and autodoc imports only the overlay
``py/torch_tensorrt/dynamo/utils.py``, as a namespace package from ``../py``.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPOSITORY = DOCS.parent
OVERLAY = REPOSITORY / "py" / "torch_tensorrt" / "dynamo" / "utils.py"
PATCHED_WHEEL = REPOSITORY / "tools" / "patched_wheel"

sys.path.insert(0, str(REPOSITORY / "py"))
sys.path.insert(0, str(DOCS / "_ext"))


def _constant(path: Path, name: str) -> str:
    """The string value of ``NAME = "..."`` in a source file, read without importing it."""
    match = re.search(rf'^{name} = "([^"]+)"$', path.read_text(encoding="utf-8"), re.M)
    if match is None:
        raise RuntimeError(f'{path}: no line {name} = "..."; docsrc/conf.py reads it')
    return match.group(1)


def _supported_releases() -> list[str]:
    source = (PATCHED_WHEEL / "policy.py").read_text(encoding="utf-8")
    match = re.search(r"^SUPPORTED_RELEASES = \(([^)]*)\)", source, re.M)
    if match is None:
        raise RuntimeError("tools/patched_wheel/policy.py: no SUPPORTED_RELEASES = (...)")
    return re.findall(r'"([^"]+)"', match.group(1))


def _overlay_constant(name: str) -> int:
    """An integer constant of the overlay, such as ``16 * 1024 * 1024``, without importing it."""
    for node in ast.parse(OVERLAY.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            value = eval(compile(ast.Expression(node.value), str(OVERLAY), "eval"), {})
            if isinstance(value, int):
                return value
    raise RuntimeError(f"{OVERLAY}: no integer constant {name}; docsrc/conf.py reads it")


def _mib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB" if size % (1024 * 1024) == 0 else f"{size} bytes"


SUPPORTED_RELEASES = _supported_releases()
DEFAULT_RELEASE = SUPPORTED_RELEASES[-1]
LOCAL_LABEL = _constant(PATCHED_WHEEL / "policy.py", "LOCAL_LABEL")

project = "torch_tensorrt compile-memory fork"
author = "the fork's authors"
copyright = "the fork's authors, BSD-3-Clause"
version = f"{DEFAULT_RELEASE}+{LOCAL_LABEL}"
release = version

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "matplotlib.sphinxext.plot_directive",
    "benchmark_tables",
]

exclude_patterns = ["_build", "requirements.txt", "Makefile"]
templates_path: list[str] = []
nitpicky = True
# Options such as --no-deps stay as typed, not turned into dashes.
smartquotes = False
rst_epilog = f"""
.. |default_release| replace:: {DEFAULT_RELEASE}
.. |local_label| replace:: {LOCAL_LABEL}
.. |patched_version| replace:: {DEFAULT_RELEASE}+{LOCAL_LABEL}
.. |oldest_release| replace:: {SUPPORTED_RELEASES[0]}
.. |patched_version_literal| replace:: ``{DEFAULT_RELEASE}+{LOCAL_LABEL}``
.. |label_literal| replace:: ``+{LOCAL_LABEL}``
.. |release_label_literal| replace:: ``<release>+{LOCAL_LABEL}``
.. |requirement_literal| replace:: ``torch_tensorrt=={DEFAULT_RELEASE}``
.. |patched_file_literal| replace:: ``dist/torch_tensorrt-{DEFAULT_RELEASE}+{LOCAL_LABEL}-<tags>.whl``
.. |default_step| replace:: {_mib(_overlay_constant("DEFAULT_RELEASE_EVERY_BYTES"))}
.. |bounce_chunk| replace:: {_mib(_overlay_constant("PINNED_BOUNCE_CHUNK_BYTES"))}
"""

# -- autodoc: the overlay only ----------------------------------------------------------------

# Without torch (a docs-only environment) the overlay still imports, with torch mocked.
if importlib.util.find_spec("torch") is None:
    autodoc_mock_imports = ["torch"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Types from outside this site. The mapping is empty so that the build never needs the
# network (intersphinx fetches inventories at build time); these names stay plain text.
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
intersphinx_disabled_reftypes = ["*"]
nitpick_ignore = [
    ("py:class", "torch.nn.Module"),
    ("py:class", "torch.nn.modules.module.Module"),
    ("py:class", "torch.Tensor"),
    ("py:class", "Callable"),
    ("py:class", "Optional"),
    ("py:class", "int"),
    ("py:class", "None"),
    ("py:class", "_PinnedBounceMover"),
]

# -- matplotlib's plot directive: figures drawn from benchmarks/results at build time ---------

plot_working_directory = str(REPOSITORY)
plot_pre_code = (
    "import sys\n"
    f"sys.path.insert(0, {str(REPOSITORY / 'benchmarks')!r})\n"
    "import plots\n"
    "RESULTS = 'benchmarks/results/'\n"
)
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]
plot_rcparams = {"savefig.bbox": "tight"}

# -- HTML: pydata-sphinx-theme, nothing loaded from other hosts -------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"torch_tensorrt {version}"
html_static_path = ["_static"]
html_css_files = ["fork.css"]
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "navbar_align": "left",
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "show_nav_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "icon_links": [],
    "analytics": {},
}
# The left sidebar only where a section has pages of its own.
html_sidebars = {
    page: []
    for page in ("index", "api", "benchmarks", "getting_started/*", "debugging/*", "tutorials/**")
}
