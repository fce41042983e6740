"""The evidence behind the fork's figures: result files, and what presents them.

* :mod:`evidence.result`: the one shape of a result file (``result.schema.json`` beside it):
  its writer, its reader and its validation, and the provenance every file carries;
* :mod:`evidence.memory`: what a process's memory is, the one definition every benchmark
  measures;
* :mod:`evidence.tables` and :mod:`evidence.plots`: the named tables and plots that the
  README's cog blocks and the docs (``docsrc/_ext``, which only adapts them to Sphinx) show;
* :mod:`evidence.sizing`: the sizing model of the memory page and the README.

The benchmarks (``python -m benchmarks run NAME``) measure and write through this package; the
presenters read the files and never import the benchmarks (an import-linter contract in
``pyproject.toml``, run by ``tests/test_layers.py``).

The facts it shows about the build (the label, the releases, the overlay and its sha256, the
source revision) are the build tool's, read from it: ``patched_wheel`` (``tools/``). Every
entry point but one has ``tools`` on its import path (pytest's ``pythonpath``, cog's ``-I``,
``docsrc/conf.py``, the tool's own start-up); ``python -m benchmarks`` has only the
repository's root, so where ``patched_wheel`` cannot be found it is imported here from its
folder under that same name (:func:`import_file`): one identity, no second process.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "benchmarks" / "results"
TOOL = REPOSITORY / "tools" / "patched_wheel"


def import_file(name: str, path: Path, package: Optional[Path] = None) -> ModuleType:
    """The module ``name`` from the file ``path`` (a package's ``__init__.py`` with its folder
    ``package``), imported once per process: the repository's one import by file location.

    For the two modules no import path may hold: the build tool where ``tools`` is not on
    the path (above), and the overlay (``benchmarks.harness.load_overlay``).
    """
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    folders = None if package is None else [str(package)]
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=folders)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:  # a failed import is not kept for the next caller
        del sys.modules[name]
        raise
    return module


if importlib.util.find_spec("patched_wheel") is None:
    import_file("patched_wheel", TOOL / "__init__.py", TOOL)
