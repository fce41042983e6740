"""The network: official wheels fetched by pip, and the index's own list of files and digests.

Downloads go through pip, the ordinary client of the package index
(``python -m pip download --no-deps --only-binary=:all: ...``), so that the user's index,
proxy and certificate settings apply, into an empty temporary folder. The list of an index's
files with their sha256 comes from the index's JSON API (PEP 691). Two failures are kept
apart: :class:`IndexUnreachable` (the network or the index failed; nothing is known) and
:class:`NoSuchWheel` (the index answered, and has no such wheel).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from packaging import tags
from patched_wheel import PatchError
from patched_wheel.policy import PROJECT
from patched_wheel.wheelfile import read_wheel_file

__all__ = [
    "BaseRequest",
    "DEFAULT_INDEX",
    "IndexUnreachable",
    "NoSuchWheel",
    "acceptable_tags",
    "index_digests",
    "index_url",
    "pip_download",
]

logger = logging.getLogger(__name__)

DEFAULT_INDEX = "https://pypi.org/simple"

# How long one request to the index may take before it counts as unreachable.
INDEX_TIMEOUT_S = 60

# Words of pip's output that mean the network failed, not that the index lacks the file.
_NETWORK_WORDS = (
    "Retrying (",
    "NewConnectionError",
    "Could not fetch URL",
    "ConnectTimeout",
    "ReadTimeout",
    "ProxyError",
    "SSLError",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
)


class IndexUnreachable(PatchError):
    """The package index could not be reached: nothing is known about the wheel."""


class NoSuchWheel(PatchError):
    """The package index answered, and has no wheel for the request."""


@dataclass(frozen=True)
class BaseRequest:
    """An official wheel to fetch: a release, and a platform and Python (``None``: running)."""

    release: str
    platform: Optional[str] = None
    python: Optional[str] = None

    def describe(self) -> str:
        platform = self.platform or "this platform"
        python = f"Python {self.python}" if self.python else "this Python"
        return f"{PROJECT}=={self.release} for {python} on {platform}"


def _platforms(platform: Optional[str]) -> List[str]:
    """Platform tags a wheel may carry to serve ``platform`` (older manylinux included)."""
    if platform is None:
        return list(tags.platform_tags())
    parts = platform.split("_")
    if platform.startswith("manylinux_") and len(parts) >= 4 and parts[2].isdigit():
        major, minor, arch = parts[1], int(parts[2]), "_".join(parts[3:])
        return [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    return [platform]


def acceptable_tags(request: BaseRequest) -> FrozenSet[tags.Tag]:
    """The tags a wheel may carry to serve ``request``."""
    if request.python is None:
        python: Sequence[int] = sys.version_info[:2]
    else:
        python = tuple(int(part) for part in request.python.split("."))
    return frozenset(tags.cpython_tags(python, platforms=_platforms(request.platform)))


def index_url() -> str:
    """The index pip uses: ``PIP_INDEX_URL`` where set, else PyPI."""
    return os.environ.get("PIP_INDEX_URL", "").strip() or DEFAULT_INDEX


def _shown(url: str) -> str:
    """``url`` without any user name or password in it, for messages."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _get(url: str, accept: str) -> Optional[bytes]:
    """The body at ``url``; ``None`` when the index answers 404 (no such project)."""
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=INDEX_TIMEOUT_S) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise IndexUnreachable(
            f"the package index {_shown(url)} answered HTTP {error.code}; try again later"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise IndexUnreachable(
            f"could not reach the package index {_shown(url)} ({reason}); check the network and "
            "the proxy, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        ) from None


def index_digests(index: str) -> Dict[str, str]:
    """File name -> sha256 of every file of the project on the index (PEP 691 JSON).

    Raises:
        IndexUnreachable: If the index cannot be reached or answers nonsense.
        NoSuchWheel: If the index has no such project.
    """
    url = f"{index.rstrip('/')}/{PROJECT}/"
    body = _get(url, "application/vnd.pypi.simple.v1+json")
    if body is None:
        raise NoSuchWheel(f"the package index {_shown(index)} has no project {PROJECT}")
    try:
        files = json.loads(body)["files"]
        return {str(f["filename"]): str(f["hashes"]["sha256"]) for f in files}
    except (ValueError, KeyError, TypeError) as error:
        raise IndexUnreachable(
            f"the package index {_shown(url)} gave no file list with sha256 ({error!r}); use PyPI"
        ) from None


def _pip_command(request: BaseRequest, dest: Path) -> List[str]:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", "--no-cache-dir"]
    command += ["--dest", str(dest)]
    if request.platform:
        command += ["--platform", request.platform]
    if request.python:
        command += ["--python-version", request.python, "--implementation", "cp"]
    return command + [f"{PROJECT}=={request.release}"]


def _run_pip(request: BaseRequest, dest: Path) -> Tuple[int, str]:
    try:
        completed = subprocess.run(
            _pip_command(request, dest), capture_output=True, text=True, check=False
        )
    except OSError as error:
        raise PatchError(f"cannot run pip ({error}); install pip") from None
    return completed.returncode, completed.stdout + completed.stderr


def _pip_failure(request: BaseRequest, output: str) -> PatchError:
    """What a failed ``pip download`` means: no pip, no network, no such wheel, or other."""
    if "No module named pip" in output:
        return PatchError(
            "pip is not available to download the base wheel; install pip, or set "
            "TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    network = any(word in output for word in _NETWORK_WORDS)
    if network or "No matching distribution" in output:
        _get(f"{index_url().rstrip('/')}/{PROJECT}/", "text/html")  # raises if unreachable
    if network:
        return IndexUnreachable(
            f"could not reach the package index to download {request.describe()}; check the "
            "network and the proxy, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    if "No matching distribution" in output:
        return NoSuchWheel(
            f"the package index has no official wheel of {request.describe()}; pick another "
            "with TORCHTRT_BASE_VERSION, TORCHTRT_BASE_PLATFORM and TORCHTRT_BASE_PYTHON "
            "(or --release, --platform and --python)"
        )
    last_lines = "\n".join(output.strip().splitlines()[-5:])
    return PatchError(
        f"pip could not download {request.describe()}:\n{last_lines}\nCheck the index "
        "settings, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
    )


def pip_download(request: BaseRequest, temporary_parent: Path) -> Tuple[bytes, str]:
    """The bytes and file name of the wheel pip downloads for ``request``, read once.

    pip downloads into a new empty folder under ``temporary_parent`` (removed afterwards),
    never from pip's own cache, so what is read is what the index served.

    Raises:
        IndexUnreachable, NoSuchWheel, PatchError: As :func:`_pip_failure` tells them apart.
    """
    temporary_parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=temporary_parent, prefix=".download-") as folder:
        status, output = _run_pip(request, Path(folder))
        if status != 0:
            raise _pip_failure(request, output)
        wheels = sorted(Path(folder).glob("*.whl"))
        if len(wheels) != 1:
            raise PatchError(
                f"pip download of {request.describe()} gave {len(wheels)} wheels, expected "
                "one; report this with the pip version"
            )
        logger.debug("downloaded %s", wheels[0].name)
        return read_wheel_file(wheels[0], what="the downloaded wheel"), wheels[0].name
