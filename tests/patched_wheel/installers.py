"""pip and uv installing a wheel into a folder, and the tree they installed, for the tests that
show that what the tool read is what installers install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

__all__ = ["OTHER_PYTHONS", "installed_tree", "isolated_environment", "pip_install", "uv_install"]

# Other Pythons this machine may have (pyenv's), to show the same reading on each; a test
# that needs one skips where there is none.
OTHER_PYTHONS = [
    path
    for path in (
        Path(f"/root/.pyenv/versions/{v}/bin/python{v.rsplit('.', 1)[0]}")
        for v in ("3.10.13", "3.12.1", "3.13.0", "3.14.0")
    )
    if path.is_file()
]


def isolated_environment() -> Dict[str, str]:
    """The environment without pip's or uv's configuration files and index variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    environment.update(PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1")
    return environment


def installed_tree(target: Path) -> Dict[str, bytes]:
    """The files an installer put under ``target`` from the wheel: its own records
    (.dist-info, a lock file), the entry-point scripts it writes (bin/) and bytecode aside."""
    tree = {}
    for path in sorted(target.rglob("*")):
        parts = path.relative_to(target).parts
        made = parts[0] in ("bin", ".lock") or "__pycache__" in parts
        if path.is_file() and not made and not parts[0].endswith(".dist-info"):
            tree["/".join(parts)] = path.read_bytes()
    return tree


def uv_install(wheel: Path, target: Path) -> subprocess.CompletedProcess[str]:
    from uv import find_uv_bin

    command = [find_uv_bin(), "pip", "install", "--no-deps", "--offline", "--no-cache"]
    command += ["--python", sys.executable, "--target", str(target), str(wheel)]
    return subprocess.run(command, capture_output=True, text=True, env=isolated_environment())


def pip_install(python: str, wheel: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """pip of ``python`` installing the cp311 x86_64 wheel into ``target``, whatever Python
    runs it (the tags are named, so pip on 3.13 installs it as it would for 3.11)."""
    command = [python, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target)]
    command += ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"]
    command += ["--only-binary=:all:", "--no-compile", "--disable-pip-version-check", str(wheel)]
    return subprocess.run(command, capture_output=True, text=True, env=isolated_environment())
