"""Build patched ``torch_tensorrt`` wheels from the official releases, and verify them.

The build splices the fork's overlay ``py/torch_tensorrt/dynamo/utils.py`` into an official
wheel's (the *base*, pinned by sha256 in the lock) and writes it with a local version label,
every other member's compressed bytes copied; ``verify`` rebuilds a wheel and compares bytes.
Only :mod:`.fetch` and :mod:`.lock` start pip; nothing else uses the network.

What runs is what is hashed (the tool's sha256 in every wheel's record). Importing the package
first refuses a folder of the repository (or the current one, or one before the standard
library on the import path) that holds a module named like one of the standard library's or
``packaging``: it would run in the build in their place. Then every module of the package is
run from its source, never from a ``.pyc`` beside it, and :func:`loaded_sources` keeps the
bytes that ran for the tool's sha256 to compare. The command line starts an isolated Python
(``-I``: no ``PYTHONPATH``, no user site, no current folder; see ``__main__``).
"""

from __future__ import annotations

import os
import sys

FOLDER = os.path.dirname(os.path.abspath(__file__))
_REPOSITORY = os.path.dirname(os.path.dirname(FOLDER))
# What the tool imports besides its own modules and the standard library.
REQUIREMENTS = ("packaging",)


def shadow_folders() -> list[str]:
    """The folders on the import path whose modules could take the place of the standard
    library's: those of the repository, the current folder, and any before the standard
    library's own that is not the installation's (``PYTHONPATH``'s, for one)."""
    installation = tuple(
        os.path.join(os.path.abspath(p), "")
        for p in {sys.base_prefix, sys.base_exec_prefix, sys.prefix}
    )
    stdlib = os.path.dirname(os.path.abspath(os.__file__))
    folders, before = [], True
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        before = before and folder != stdlib
        inside = os.path.join(folder, "").startswith(os.path.join(_REPOSITORY, ""))
        if inside or folder == os.getcwd() or (before and not folder.startswith(installation)):
            folders.append(folder)
    return folders


def _shadowed(name: str) -> bool:
    top = name.partition(".")[0]
    return top in sys.stdlib_module_names or top in REQUIREMENTS


def shadows() -> list[str]:
    """The files of :func:`shadow_folders` that Python would import under a name of the
    standard library or of :data:`REQUIREMENTS`, and the modules already loaded from there."""
    suffixes = (".py", ".pyc", ".pyd", ".so")
    found = []
    for folder in shadow_folders():
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            package = os.path.isfile(os.path.join(path, "__init__.py"))
            if _shadowed(entry.partition(".")[0]) and (package or entry.endswith(suffixes)):
                found.append(path)
    for name, module in list(sys.modules.items()):
        where = os.path.dirname(getattr(module, "__file__", None) or "")
        if _shadowed(name) and where and os.path.abspath(where) in shadow_folders():
            found.append(f"{where}{os.sep}... (module {name})")
    return found


def refuse_shadows() -> None:
    """Stop before anything else is imported if :func:`shadows` finds one."""
    found = shadows()
    if found:
        sys.exit(
            f"error: {found[0]!r} would run in the build in place of the module of that name "
            "that Python installs; the build runs only its own files and installed libraries: "
            "remove it, or move it out of that folder"
        )


refuse_shadows()

import importlib.abc  # noqa: E402 (only once no shadow can answer for them)
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
from types import CodeType, ModuleType  # noqa: E402
from typing import Dict, Optional, Sequence  # noqa: E402

# The source bytes each module of the package ran from, by module name.
_SOURCES: Dict[str, bytes] = {}


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles a module of the tool from its source file, never a ``.pyc`` (which Python
    would run if its stamp matched, whatever its code), and keeps the bytes it compiled."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        _SOURCES[fullname] = source
        return compile(source, path, "exec", dont_inherit=True)


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the package's modules in its folder, as sources only (no ``.pyc``, no ``.so``)."""

    _files = importlib.machinery.FileFinder(FOLDER, (_SourceLoader, [".py"]))

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith(f"{__name__}."):
            return None
        return self._files.find_spec(fullname, target)


if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _SourceFinder())


def loaded_sources() -> Dict[str, bytes]:
    """The file name and source bytes of each module of the package that has run; a module run
    from anything else (a ``.pyc``) is named with ``b""``, which no file's bytes equal."""
    loaded = {}
    for name, module in list(sys.modules.items()):
        if name.startswith(f"{__name__}."):
            spec = getattr(module, "__spec__", None)
            origin = getattr(spec, "origin", None) or name
            loaded[os.path.basename(origin)] = _SOURCES.get(name, b"")
    return loaded


if importlib.util.find_spec("packaging") is None:  # the one package the tool needs, checked first
    sys.exit(
        "error: the build needs the 'packaging' package, which this Python lacks (pip wheel "
        "--no-build-isolation builds with the running Python's packages); install it with: "
        f"{os.path.basename(sys.executable)} -m pip install 'packaging>=24'"
    )


class PatchError(Exception):
    """What the tool refuses (a base wheel, an overlay, a setting): the message names the thing and
    says what to do. The only exception it raises on purpose, caught once, exit status 1."""
