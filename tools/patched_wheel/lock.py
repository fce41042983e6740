"""The lock of the official wheels: the sha256 of each ``torch-tensorrt`` wheel on PyPI.

The lock is a JSON file in the repository (:data:`~patched_wheel.paths.LOCK_FILE`) mapping
each official wheel's file name, which names its release, Python and platform, to its sha256.
It is the build's source of trust: a base the lock does not know is refused unless the user
opts in, and a release, platform and Python the lock knows is accepted only as the very file
the lock names. This module only reads and checks; ``patched_wheel.refresh`` rewrites it from
the index.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import FrozenSet, List, Mapping, Optional, Tuple

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.files import write_text_atomically
from patched_wheel.paths import LOCK_FILE
from patched_wheel.policy import (
    FIXES,
    PROJECT,
    SUPPORTED_RELEASES,
    UNLOCKED_OPT_IN,
    supported_releases_text,
)
from patched_wheel.request import BaseRequest, platforms_serving
from patched_wheel.wheelfile import is_wheel_filename

__all__ = ["Lock", "load_lock", "write_lock"]

logger = logging.getLogger(__name__)

_ABOUT = (
    "sha256 of the official torch-tensorrt wheels on PyPI, by file name. "
    "Refresh with: python tools/patched_wheel lock"
)


@dataclass(frozen=True)
class Lock:
    """File name -> sha256 of every official wheel the build trusts."""

    wheels: Mapping[str, str]

    def official_name(self, version: str, tags: FrozenSet[Tag]) -> Optional[str]:
        """The file name of the official wheel of ``version`` for one of ``tags``, if locked.

        ``tags`` are in no order: the first file name in sorted order wins, as for any two
        official wheels of one release serving the same tag (there are none today).
        """
        for name in sorted(self.wheels):
            if _same_release(name, version, tags):
                return name
        return None

    def check(self, filename: str, sha256: str, *, unlocked: bool) -> None:
        """Accept the base ``filename`` with bytes of ``sha256``, or raise.

        Raises:
            PatchError: When the sha256 differs from the lock's; when the lock knows the
                release, platform and Python under another file name; when the lock does not
                know the base and ``unlocked`` is false.
        """
        expected = self.wheels.get(filename)
        if expected is not None:
            if sha256 != expected:
                raise PatchError(
                    f"{filename}: sha256 {sha256} differs from the official wheel's {expected} "
                    "in the lock; this is not the official file, delete it and download it again"
                )
            return
        known = self._same_release_as(filename)
        if known is not None:
            raise PatchError(
                f"{filename}: the lock knows this release, platform and Python as {known}, and "
                "this file is not it; use the official wheel (the opt-in for unknown bases "
                "does not apply to a wheel the lock knows)"
            )
        if not unlocked:
            raise PatchError(
                f"{filename} is not in the lock of official wheels, so the build cannot check "
                f"that it is the official file; choose a supported release "
                f"({supported_releases_text()}) or, for a wheel you trust from another index "
                f"(such as a CUDA variant 2.x.y+cu128), {UNLOCKED_OPT_IN}"
            )
        logger.warning(
            "%s is not in the lock of official wheels; building it unchecked, as asked "
            "(TORCHTRT_BASE_UNLOCKED=1 or --unlocked)",
            filename,
        )

    def _tags_of(self, release: str) -> List[Tag]:
        """Every tag of the locked wheels of ``release``."""
        return [
            tag
            for name in self.wheels
            if is_wheel_filename(name) and parse_wheel_filename(name)[1] == Version(release)
            for tag in parse_wheel_filename(name)[3]
        ]

    def unknown_request(self, request: BaseRequest) -> str:
        """Why the lock has no wheel for ``request``, and what it has instead (one line).

        Told before any network: an unsupported release (too old for the fixes' hooks, or
        unknown), or a platform or Python the release's official wheels lack.
        """
        tags = self._tags_of(request.release)
        if not tags or Version(request.release) < Version(SUPPORTED_RELEASES[0]):
            return _unknown_release(request.release)
        platforms = sorted({tag.platform for tag in tags})
        if not set(platforms_serving(request.platform)) & set(platforms):
            asked = repr(request.platform) if request.platform else "this platform"
            return (
                f"the official wheels of {PROJECT} {request.release} are not built for {asked};"
                f" their platforms are {', '.join(platforms)}: set TORCHTRT_BASE_PLATFORM (or "
                "--platform) to one of them"
            )
        served = set(platforms_serving(request.platform))
        pythons = sorted({_python_of(t) for t in tags if t.platform in served}, key=_python_key)
        asked = f"Python {request.python}" if request.python else "this Python"
        return (
            f"the official wheels of {PROJECT} {request.release} are not built for {asked} on "
            f"{request.platform or 'this platform'}; their Pythons there are "
            f"{', '.join(pythons)}: set TORCHTRT_BASE_PYTHON (or --python) to one of them"
        )

    def _same_release_as(self, filename: str) -> Optional[str]:
        try:
            _, version, _, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            return None
        return self.official_name(str(version), tags)


def _same_release(name: str, version: str, tags: FrozenSet[Tag]) -> bool:
    try:
        _, locked_version, _, locked_tags = parse_wheel_filename(name)
        return locked_version == Version(version) and bool(locked_tags & tags)
    except (InvalidWheelFilename, InvalidVersion):
        return False


def _python_of(tag: Tag) -> str:
    return f"{tag.interpreter[2]}.{tag.interpreter[3:]}"


def _python_key(python: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))


def _unknown_release(release: str) -> str:
    """Why a release no locked wheel has is refused: too old for the fixes, a variant of
    another index, or unknown."""
    hooks = ", ".join(" or ".join(names) for fix in FIXES for names in fix.alternatives())
    first = SUPPORTED_RELEASES[0]
    version = Version(release)
    if version < Version(first):
        return (
            f"{PROJECT} {release} is older than {first}, the first release with every function "
            f"the fixes hook into ({hooks}), so it cannot be patched; supported base releases "
            f"are {supported_releases_text()}"
        )
    if version.local is not None:
        return (
            f"{PROJECT} {release} is a variant that the lock of official wheels does not know (it"
            f" holds PyPI's wheels only); for a wheel you trust from another index, "
            f"{UNLOCKED_OPT_IN}"
        )
    return (
        f"{PROJECT} {release} is not a supported base release; supported base releases are "
        f"{supported_releases_text()} (a newer upstream release needs the lock refreshed: "
        f"'python tools/patched_wheel lock --release {release}')"
    )


def load_lock(path: Path = LOCK_FILE) -> Lock:
    """The lock at ``path``.

    Raises:
        PatchError: If the file is missing or is not a lock.
    """
    try:
        wheels = json.loads(path.read_text(encoding="utf-8"))["wheels"]
        return Lock({str(name): str(digest) for name, digest in wheels.items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise PatchError(
            f"{path}: not a lock file ({error!r}); restore it from git or refresh it with "
            "'python tools/patched_wheel lock'"
        ) from None


def write_lock(wheels: Mapping[str, str], path: Path = LOCK_FILE) -> None:
    """Write the lock, sorted by file name (a readable diff), through a temporary file."""
    document = {"about": _ABOUT, "wheels": dict(sorted(wheels.items()))}
    write_text_atomically(path, json.dumps(document, indent=2) + "\n")
