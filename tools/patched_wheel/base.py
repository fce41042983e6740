"""Choosing and downloading the base wheel: the official ``torch-tensorrt`` wheel to patch.

The base comes from the environment, as upstream's build is configured:

* ``TORCHTRT_BASE_WHEEL=<path>``: that wheel file, offline; its tags come from its name;
* otherwise ``TORCHTRT_BASE_VERSION`` (default :data:`DEFAULT_RELEASE`), with optional
  ``TORCHTRT_BASE_PLATFORM`` (e.g. ``manylinux_2_28_aarch64``) and ``TORCHTRT_BASE_PYTHON``
  (e.g. ``3.12``); unset, they mean the running platform and Python.

Downloads go through pip, the ordinary client of the package index
(``python -m pip download --no-deps --only-binary=:all: ...``), into a cache folder, and a
wheel already in the cache is used without asking the index again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

from packaging import tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError

__all__ = [
    "BaseRequest",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_RELEASE",
    "PLATFORMS",
    "PROJECT",
    "PYTHONS",
    "SUPPORTED_RELEASES",
    "base_from_environment",
    "download_base",
    "download_many",
    "find_cached",
    "supported_releases_text",
]

PROJECT = "torch-tensorrt"

# Releases whose utils.py has every function the fixes hook into (2.10.0 added the last one).
SUPPORTED_RELEASES = ("2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
DEFAULT_RELEASE = SUPPORTED_RELEASES[-1]

# Platforms and Python versions the release command asks the index for.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")

REPOSITORY = Path(__file__).resolve().parents[2]
DEFAULT_CACHE_DIR = REPOSITORY / ".cache" / "base-wheels"

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")


def supported_releases_text() -> str:
    return ", ".join(SUPPORTED_RELEASES)


@dataclass(frozen=True)
class BaseRequest:
    """An official wheel to fetch: a release, and a platform and Python (``None``: running)."""

    version: str
    platform: Optional[str] = None
    python: Optional[str] = None

    def describe(self) -> str:
        platform = self.platform or "this platform"
        python = f"Python {self.python}" if self.python else "this Python"
        return f"{PROJECT}=={self.version} for {python} on {platform}"


def _checked_version(value: str) -> str:
    try:
        version = Version(value)
    except InvalidVersion:
        version = None
    if version is None or version.local is not None or len(version.release) != 3:
        raise PatchError(
            f"TORCHTRT_BASE_VERSION={value!r} is not a release such as {DEFAULT_RELEASE!r}; "
            f"supported base releases are {supported_releases_text()}"
        )
    return value


def _checked_python(value: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", value):
        raise PatchError(
            f"TORCHTRT_BASE_PYTHON={value!r} is not a Python version such as '3.12'; "
            "give major.minor"
        )
    return value


def base_from_environment(environ: Mapping[str, str]) -> Union[Path, BaseRequest]:
    """The base the environment asks for: a wheel file, or a release to download.

    Raises:
        PatchError: For a missing wheel file or a malformed variable.
    """
    wheel = environ.get("TORCHTRT_BASE_WHEEL", "")
    if wheel:
        others = [
            name
            for name in ("TORCHTRT_BASE_VERSION", "TORCHTRT_BASE_PLATFORM", "TORCHTRT_BASE_PYTHON")
            if environ.get(name)
        ]
        if others:
            raise PatchError(
                f"TORCHTRT_BASE_WHEEL is set together with {', '.join(others)}; the wheel's "
                "name already fixes release, platform and Python, so unset the others"
            )
        path = Path(wheel).expanduser()
        if not path.is_file():
            raise PatchError(
                f"TORCHTRT_BASE_WHEEL={wheel!r} is not a file; give the path of an official "
                f"{PROJECT} wheel"
            )
        return path.resolve()
    python = environ.get("TORCHTRT_BASE_PYTHON") or None
    return BaseRequest(
        version=_checked_version(environ.get("TORCHTRT_BASE_VERSION") or DEFAULT_RELEASE),
        platform=environ.get("TORCHTRT_BASE_PLATFORM") or None,
        python=_checked_python(python) if python else None,
    )


def _platforms(platform: Optional[str]) -> List[str]:
    """Platform tags a wheel may carry to serve ``platform`` (older manylinux included)."""
    if platform is None:
        return list(tags.platform_tags())
    match = _MANYLINUX.match(platform)
    if not match:
        return [platform]
    major, minor, arch = int(match[1]), int(match[2]), match[3]
    return [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]


def _acceptable_tags(request: BaseRequest) -> FrozenSet[tags.Tag]:
    if request.python is None:
        python: Sequence[int] = sys.version_info[:2]
    else:
        python = tuple(int(part) for part in request.python.split("."))
    return frozenset(tags.cpython_tags(python, platforms=_platforms(request.platform)))


def find_cached(request: BaseRequest, cache_dir: Path) -> Optional[Path]:
    """A wheel in ``cache_dir`` that serves ``request``, or ``None``."""
    if not cache_dir.is_dir():
        return None
    wanted = _acceptable_tags(request)
    for path in sorted(cache_dir.glob("*.whl")):
        try:
            name, version, _, wheel_tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if name == PROJECT and str(version) == request.version and wheel_tags & wanted:
            return path
    return None


def _pip_download(request: BaseRequest, dest: Path) -> Tuple[int, str]:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "--dest",
        str(dest),
    ]
    if request.platform:
        command += ["--platform", request.platform]
    if request.python:
        command += ["--python-version", request.python, "--implementation", "cp"]
    command.append(f"{PROJECT}=={request.version}")
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    return completed.returncode, completed.stdout + completed.stderr


def download_base(
    request: BaseRequest, cache_dir: Path = DEFAULT_CACHE_DIR, *, missing_ok: bool = False
) -> Optional[Path]:
    """The official wheel for ``request``: from the cache, or downloaded into it by pip.

    Returns:
        The wheel's path; ``None`` when PyPI has no such wheel and ``missing_ok`` is set.

    Raises:
        PatchError: If pip cannot run, or PyPI has no such wheel (unless ``missing_ok``).
    """
    cached = find_cached(request, cache_dir)
    if cached is not None:
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".download-") as temporary:
        status, output = _pip_download(request, Path(temporary))
        if status != 0:
            if "No module named pip" in output:
                raise PatchError(
                    "pip is not available to download the base wheel; install pip, or set "
                    "TORCHTRT_BASE_WHEEL to a downloaded official wheel"
                )
            if "No matching distribution" in output or "Could not find a version" in output:
                if missing_ok:
                    return None
                raise PatchError(
                    f"PyPI has no official wheel of {request.describe()}; pick another with "
                    "TORCHTRT_BASE_VERSION, TORCHTRT_BASE_PLATFORM and TORCHTRT_BASE_PYTHON "
                    f"(supported base releases are {supported_releases_text()})"
                )
            last_lines = "\n".join(output.strip().splitlines()[-5:])
            raise PatchError(
                f"pip could not download {request.describe()}:\n{last_lines}\nCheck the "
                "network and the index settings, or set TORCHTRT_BASE_WHEEL to a downloaded "
                "wheel"
            )
        wheels = sorted(Path(temporary).glob("*.whl"))
        if len(wheels) != 1:
            raise PatchError(
                f"pip download of {request.describe()} gave {len(wheels)} wheels, expected "
                "one; report this with the pip version"
            )
        target = cache_dir / wheels[0].name
        os.replace(wheels[0], target)
    return target


def download_many(
    requests: Sequence[BaseRequest],
    cache_dir: Path = DEFAULT_CACHE_DIR,
    *,
    jobs: int = 4,
    on_result: Optional[Callable[[BaseRequest, Optional[Path]], None]] = None,
) -> List[Tuple[BaseRequest, Optional[Path]]]:
    """Fetch many bases at once (``None`` for combinations PyPI lacks), in request order."""

    def fetch(request: BaseRequest) -> Tuple[BaseRequest, Optional[Path]]:
        path = download_base(request, cache_dir, missing_ok=True)
        if on_result is not None:
            on_result(request, path)
        return request, path

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(fetch, requests))
