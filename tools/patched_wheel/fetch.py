"""Fetching a base: the official wheel into the cache, by pip, pinned by its sha256.

A base the lock knows is downloaded by ``pip download`` with a requirement of the exact
release (``===``, so an index offering ``2.14.0+cu999`` beside ``2.14.0`` cannot win) and
``--require-hashes`` with the lock's sha256: pip refuses any other file, from any index
pip is configured with (its own settings, credentials, certificates and proxies apply; none
of them is read or shown here). The file lands in the cache under its official name and is
looked up there by that exact name only, and checked against the lock again when read: the
cache saves downloads, it is not trusted. A base the lock does not know (the user's opt-in)
is downloaded by pip with ``==`` and no hash, and never cached.

This module also answers ``installed``: the release, Python and platform of the installed
``torch_tensorrt``, read from its ``.dist-info/WHEEL`` (outside pip's build isolation where
the build runs inside it).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import List, Optional, Tuple

from packaging.tags import parse_tag
from packaging.version import InvalidVersion, Version

from . import PatchError, config
from .releases import split_label
from .wheel import header_values

logger = logging.getLogger(__name__)

DISTRIBUTION = "torch_tensorrt"
_QUERY = f"""
import json
from importlib import metadata
found = [[d.version, d.read_text("WHEEL")] for d in metadata.distributions(name={DISTRIBUTION!r})
         if d.read_text("WHEEL")]
print(json.dumps(found[0] if found else None))
"""


def usable_cache(cache_dir: Path) -> Path:
    """``cache_dir``, created if missing; one line before any download if it cannot be."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        if not cache_dir.is_dir():
            raise NotADirectoryError("not a folder")
    except OSError as error:
        raise PatchError(
            f"the cache folder {str(cache_dir)!r} cannot be used ({error.strerror or error}); "
            "give a folder you can write with --cache"
        ) from None
    return cache_dir


def pip_download(
    request: config.BaseRequest, folder: Path, *, sha256: Optional[str] = None
) -> Path:
    """The one wheel pip downloads for ``request`` into the empty ``folder``: the release
    exactly and this sha256 where given (``--require-hashes``), else what ``==`` picks.

    Raises:
        PatchError: pip's last lines, when pip fails (no such wheel, no network, no pip).
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", "--no-cache-dir", "-d", str(folder)]
    if request.platform:
        command += ["--platform", request.platform]
    if request.python:
        command += ["--python-version", request.python, "--implementation", "cp"]
    if sha256 is None:
        command.append(f"{request.distribution}=={request.release}")
    else:
        requirement = folder / ".requirement.txt"
        requirement.write_text(
            f"{request.distribution}==={request.release} --hash=sha256:{sha256}\n"
        )
        command += ["--require-hashes", "-r", str(requirement)]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise PatchError(f"cannot run pip ({error}); install pip") from None
    wheels = sorted(folder.glob("*.whl"))
    if completed.returncode != 0 or len(wheels) != 1:
        output = (completed.stdout + completed.stderr).strip().splitlines()
        shown = "\n  ".join(output[-4:]) or f"{len(wheels)} wheels"
        raise PatchError(
            f"pip could not download {request.describe()}:\n  {shown}\nCheck the network and "
            "pip's index settings, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    return wheels[0]


def cached_base(request: config.BaseRequest, name: str, sha256: str, cache_dir: Path) -> Path:
    """The cache's file ``name`` (the official wheel for ``request``), downloaded if missing;
    a download whose bytes are not ``sha256`` is refused (pip checks it, and so does this)."""
    path = cache_dir / name
    if path.is_file():
        return path
    with tempfile.TemporaryDirectory(dir=usable_cache(cache_dir), prefix=".download-") as folder:
        downloaded = pip_download(request, Path(folder), sha256=sha256)
        data = config.read_file(downloaded, what="the downloaded wheel")
        if downloaded.name != name:
            raise PatchError(f"pip downloaded {downloaded.name}, not {name}; report this")
        config.write_atomically(path, data)
    logger.info("fetched %s", name)
    return path


def unlocked_base(request: config.BaseRequest, cache_dir: Path) -> Tuple[bytes, str]:
    """(bytes, file name) of the wheel pip picks for a request the lock does not know."""
    with tempfile.TemporaryDirectory(dir=usable_cache(cache_dir), prefix=".download-") as folder:
        downloaded = pip_download(request, Path(folder))
        return config.read_file(downloaded, what="the downloaded wheel"), downloaded.name


def _installed() -> Tuple[str, str]:
    """(version, WHEEL text) of the installed distribution, outside pip's build isolation."""
    for found in metadata.distributions(name=DISTRIBUTION):
        if found.read_text("WHEEL"):
            return found.version, str(found.read_text("WHEEL"))
    answer = None
    if any(os.environ.get(name) for name in ("PIP_BUILD_TRACKER", "PIP_REQ_TRACKER")):
        hidden = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")  # pip's isolation
        environ = {k: v for k, v in os.environ.items() if k not in hidden}
        try:
            completed = subprocess.run([sys.executable, "-c", _QUERY], env=environ,
                                       capture_output=True, text=True, check=True)  # fmt: skip
            answer = json.loads(completed.stdout)
        except (OSError, subprocess.CalledProcessError, ValueError):
            answer = None
    if not answer:
        raise PatchError(
            f"'{config.INSTALLED}' asks for the installed {DISTRIBUTION}, and this Python has "
            "none; "
            "install it, or give the release (TORCHTRT_BASE_VERSION or --release)"
        )
    return str(answer[0]), str(answer[1])


def installed_request(*, unlocked: bool = False) -> config.BaseRequest:
    """The release, platform and Python of the installed ``torch_tensorrt`` (a patched
    wheel stands for its base).

    Raises:
        PatchError: If none is installed, it has no CPython tag, or it is a CUDA-variant
            release and ``unlocked`` is false.
    """
    version, wheel_text = _installed()
    try:
        parsed = Version(version)
    except InvalidVersion:
        parsed = None
    if parsed is None or str(parsed) != version or len(parsed.release) != 3:
        raise PatchError(
            f"the installed {DISTRIBUTION} {version!r} is not a release the build knows; "
            "give the release (TORCHTRT_BASE_VERSION or --release) instead"
        )
    release, label = split_label(version)
    if label is None and parsed.local is not None and not unlocked:
        raise PatchError(
            f"the installed {DISTRIBUTION} {version} is a CUDA-variant release (+{parsed.local}"
            "), which the lock of official wheels does not know: the lock holds PyPI's wheels "
            f"only. To build from it anyway, {config.UNLOCKED_OPT_IN} with your index in "
            "PIP_INDEX_URL, or set TORCHTRT_BASE_WHEEL to its wheel file"
        )
    found: List[Tuple[str, str]] = []
    for value in header_values(wheel_text.encode("utf-8"), "Tag"):
        try:
            tags = sorted(parse_tag(value), key=str)
        except ValueError:
            continue
        found += [
            (t.interpreter, t.platform)
            for t in tags
            if t.interpreter[:3] == "cp3" and t.interpreter[3:].isdigit()
        ]
    if not found:
        raise PatchError(
            f"the installed {DISTRIBUTION} has no CPython tag in its WHEEL file (not installed "
            "from a wheel?); give the release, platform and Python instead"
        )
    return config.BaseRequest(release, found[0][1], f"3.{found[0][0][3:]}")
