"""Sphinx configuration of the fork's documentation.

Build with ``python -m sphinx -W -b html docsrc OUT`` or ``make -C docsrc html``; nothing needs
to be on ``PYTHONPATH``. As Sphinx's own documentation does for local extensions, this file
puts the folders the build imports from on ``sys.path``: ``_ext`` (the extensions), the
repository's root (the evidence package, ``evidence/``, which the extensions present), ``../py``
(autodoc of the overlay) and ``../tools`` (the build
tool's argument parser, which sphinx-argparse's ``.. argparse::`` renders
as the build tool's reference; the pages pass ``:nodefault:``, since each option's help states
its default, a path relative to the repository, where sphinx-argparse's own "Default:" line would
show this machine's absolute path). Nothing here imports ``torch_tensorrt`` (it needs TensorRT):
the version is read from the build's sources, and autodoc imports only the overlay
``py/torch_tensorrt/dynamo/utils.py``, as a namespace package from ``py``. The docs read the
result files through the evidence package (``evidence/``), never the benchmarks' code.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

DOCS = Path(__file__).resolve().parent
REPOSITORY = DOCS.parent
OVERLAY = REPOSITORY / "py" / "torch_tensorrt" / "dynamo" / "utils.py"
PATCHED_WHEEL = REPOSITORY / "tools" / "patched_wheel"

for _folder in (DOCS / "_ext", REPOSITORY, REPOSITORY / "py", REPOSITORY / "tools"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

# argparse wraps usage lines to the terminal's width less 2 (COLUMNS): the reference pages'
# usage lines (sphinx-argparse) are 43 characters whatever the terminal of the build, what a
# 375 px phone shows in a line at the font size fork.css gives code.
os.environ["COLUMNS"] = "45"


def _build_requirements() -> str:
    """The ``[build-system] requires`` of ``pyproject.toml``, as an offline build needs them."""
    with open(REPOSITORY / "pyproject.toml", "rb") as handle:
        requires = tomllib.load(handle)["build-system"]["requires"]
    return " ".join(f'"{requirement}"' for requirement in requires)


def _int_constant(path: Path, name: str) -> int:
    """An integer constant of a module, such as ``16 * 1024 * 1024``, without importing it."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            value = eval(compile(ast.Expression(node.value), str(path), "eval"), {})
            if isinstance(value, int):
                return value
    raise RuntimeError(f"{path}: no integer constant {name}; docsrc/conf.py reads it")


def _overlay_constant(name: str) -> int:
    return _int_constant(OVERLAY, name)


def _wheel_limit(name: str) -> int:
    """A size limit of the build's wheel reader (``tools/patched_wheel/wheel.py``, the file
    cap in ``config.py``)."""
    module = "config.py" if name == "MAX_WHEEL_BYTES" else "wheel.py"
    return _int_constant(PATCHED_WHEEL / module, name)


def _splice_limit(name: str) -> int:
    """A ceiling of the build's splice on a parsed source (``tools/patched_wheel/splice.py``)."""
    return _int_constant(PATCHED_WHEEL / "splice.py", name)


def _mib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB" if size % (1024 * 1024) == 0 else f"{size} bytes"


from evidence import facts  # noqa: E402  (the releases and the label, from the build tool)

SUPPORTED_RELEASES = facts.SUPPORTED_RELEASES
DEFAULT_RELEASE = facts.NEWEST_RELEASE
LOCAL_LABEL = facts.label()
# What substitution-code-block (_ext/sphinx_results.py) replaces in a code block, as rst_epilog
# below does in prose.
fork_substitutions = facts.substitutions()

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
    "sphinxarg.ext",
    "sphinx_results",
]

exclude_patterns = ["_build", "requirements.txt", "Makefile"]
templates_path: list[str] = []
nitpicky = True
# Options such as --no-deps stay as typed, not turned into dashes.
smartquotes = False
rst_epilog = "".join(f".. |{name}| replace:: {text}\n" for name, text in fork_substitutions.items())
rst_epilog += f"""
.. |patched_version_literal| replace:: ``{DEFAULT_RELEASE}+{LOCAL_LABEL}``
.. |label_literal| replace:: ``+{LOCAL_LABEL}``
.. |release_label_literal| replace:: ``<release>+{LOCAL_LABEL}``
.. |requirement_literal| replace:: ``torch_tensorrt=={DEFAULT_RELEASE}``
.. |patched_file_literal| replace:: ``torch_tensorrt-{DEFAULT_RELEASE}+{LOCAL_LABEL}-<tags>.whl``
.. |default_step| replace:: {_mib(_overlay_constant("DEFAULT_RELEASE_EVERY_BYTES"))}
.. |build_requirements| replace:: {_build_requirements()}
.. |bounce_chunk| replace:: {_mib(_overlay_constant("PINNED_BOUNCE_CHUNK_BYTES"))}
.. |max_wheel| replace:: {_mib(_wheel_limit("MAX_WHEEL_BYTES"))}
.. |max_unpacked| replace:: {_mib(_wheel_limit("MAX_UNPACKED_BYTES"))}
.. |unpacked_ratio| replace:: {_wheel_limit("MAX_UNPACKED_RATIO")}
.. |max_source| replace:: {_splice_limit("MAX_SOURCE_BYTES") // 1024} KiB
.. |max_nesting| replace:: {_splice_limit("MAX_NESTING")}
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
    ("py:class", "torch.device"),
    ("py:class", "Callable"),
    ("py:class", "Optional"),
    ("py:class", "int"),
    ("py:class", "None"),
    ("py:class", "_PinnedBounceMover"),
    ("py:class", "contextlib.ExitStack"),
    ("py:class", "ExitStack"),
]
# Docstrings of the overlay's private classes name their instance attributes (set in
# __init__, which autodoc does not list) as :attr:`name`; those stay plain text.
nitpick_ignore_regex = [(r"py:attr", r"[a-z_][a-z0-9_]*")]

# -- matplotlib's plot directive: plots.plot(NAME) draws a named plot at build time -----------

plot_working_directory = str(REPOSITORY)
plot_pre_code = "from evidence import plots\n"
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


def _drop_stale_plots(app: Any) -> None:
    """Redraw every plot on every build.

    matplotlib's plot directive reuses a drawn figure while the page that holds it is
    unchanged, but the figures depend on ``benchmarks/results/*.json`` and
    ``evidence/``, which it does not watch: a rebuild after new results would show
    the old plots. Its cache folder sits beside the doctrees.
    """
    shutil.rmtree(Path(app.doctreedir).parent / "plot_directive", ignore_errors=True)


def _only_private_members(
    app: Any, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    """In the API page's list of internal helpers (the one ``automodule`` with
    ``:private-members:``), leave out the module's public names: they have sections of their
    own. Members of a private class stay."""
    if what == "module" and options.get("private-members") and not name.startswith("_"):
        return True
    return None


def _no_second_module_docstring(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """The list of internal helpers leaves out the module's docstring, shown at the top."""
    if what == "module" and options.get("private-members"):
        lines.clear()


def setup(app: Any) -> None:
    app.connect("builder-inited", _drop_stale_plots)
    app.connect("autodoc-skip-member", _only_private_members)
    app.connect("autodoc-process-docstring", _no_second_module_docstring)
