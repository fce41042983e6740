"""``python setup.py bdist_wheel``: the repository's one build, for those used to typing it.

Upstream's layout has a ``setup.py``, and upstream's contributors build with ``python setup.py
bdist_wheel``. Here the build is the in-tree PEP 517 backend that ``pyproject.toml`` names
(``tools/patched_wheel/backend.py``): pip, ``python -m build`` and uv call it, and never run
this file (``pyproject.toml`` names a backend, so pip has no use for a ``setup.py``). This
file calls that backend's ``build_wheel`` hook as a build front end does, so it writes the same
bytes as ``pip wheel . --no-deps -w dist``. It imports nothing of setuptools and overrides no
command of it: ``bdist_wheel`` is the one command, and anything else is refused with the line
to type instead. The base is chosen by the environment, as for pip (``TORCHTRT_BASE_VERSION``,
``TORCHTRT_BASE_WHEEL``, ...; see the docs' install page).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

REPOSITORY = Path(__file__).resolve().parent

# pyproject.toml's [build-system] backend-path and build-backend (a test keeps them the same;
# Python 3.10 has no TOML reader to read them here).
BACKEND_PATH = "tools"
BUILD_BACKEND = "patched_wheel.backend"

USAGE = """\
usage: python setup.py bdist_wheel [--dist-dir DIR]

Build the patched torch_tensorrt wheel into DIR (default: dist/ beside this file): the same
bytes as 'pip wheel . --no-deps -w DIR', through the same build backend (pyproject.toml).
The base release, platform and Python come from the TORCHTRT_BASE_* environment variables,
as for pip.

This is not a setuptools script; bdist_wheel is its one command. Instead of the others:
  install, develop   pip install .      (an editable install is not possible: the patched
                                         wheel is the official wheel with one file replaced)
  sdist              python -m build --sdist
"""

# What to type instead of the setuptools commands people reach for.
INSTEAD = {
    "install": "pip install .",
    "develop": "pip install . (an editable install is not possible here)",
    "sdist": "python -m build --sdist",
    "egg_info": "pip install .",
    "build": "python setup.py bdist_wheel",
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments: List[str] = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help", "--help-commands"):
        print(USAGE, end="")
        return 0
    command, options = arguments[0], arguments[1:]
    if command != "bdist_wheel":
        instead = INSTEAD.get(command, "python setup.py --help")
        print(
            f"error: 'python setup.py {command}' is not supported: this setup.py only builds "
            f"the wheel (bdist_wheel); use: {instead}",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(prog="python setup.py bdist_wheel")
    parser.add_argument(
        "-d", "--dist-dir", type=Path, default=REPOSITORY / "dist", help="where (default: dist)"
    )
    dist_dir: Path = parser.parse_args(options).dist_dir
    # As a PEP 517 front end does (pypa's pyproject_hooks): the hook runs in a process of its
    # own, with the backend's path first on its import path; isolated (-I: no PYTHONPATH, user
    # site or current folder), as ``python tools/patched_wheel`` starts, so that only the tool's
    # own files and the installed libraries can be imported.
    dist_dir.mkdir(parents=True, exist_ok=True)
    hook = f"import sys; sys.path.insert(0, sys.argv[1]); import {BUILD_BACKEND} as backend; "
    hook += "backend.build_wheel(sys.argv[2])"
    backend_path = str(REPOSITORY / BACKEND_PATH)
    command = [sys.executable, "-I", "-B", "-c", hook, backend_path, str(dist_dir.resolve())]
    return subprocess.run(command, cwd=REPOSITORY, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
