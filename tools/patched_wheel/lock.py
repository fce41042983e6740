"""The lock of the official wheels: the sha256 of each ``torch-tensorrt`` wheel on PyPI.

The lock is a JSON file in the repository, ``official_wheels.lock.json`` beside this module,
mapping each official wheel's file name (which names its release, Python and platform) to its
sha256. The build refuses a base whose file name the lock knows but whose bytes differ, and
builds one the lock does not know with a warning. ``python tools/patched_wheel lock``
refreshes it from PyPI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Sequence

from patched_wheel import PatchError
from patched_wheel.base import BaseRequest, download_many
from patched_wheel.wheelfile import sha256_of_file

__all__ = ["LOCK_FILE", "check_against_lock", "load_lock", "refresh_lock", "write_lock"]

LOCK_FILE = Path(__file__).resolve().with_name("official_wheels.lock.json")

_ABOUT = (
    "sha256 of the official torch-tensorrt wheels on PyPI, by file name. "
    "Refresh with: python tools/patched_wheel lock"
)


def load_lock(path: Path = LOCK_FILE) -> Dict[str, str]:
    """File name -> sha256 of every wheel in the lock; empty if there is no lock file."""
    if not path.is_file():
        return {}
    try:
        wheels = json.loads(path.read_text(encoding="utf-8"))["wheels"]
    except (ValueError, KeyError, TypeError) as error:
        raise PatchError(
            f"{path}: not a lock file ({error!r}); restore it from git or refresh it with "
            "'python tools/patched_wheel lock'"
        ) from None
    return {str(name): str(digest) for name, digest in wheels.items()}


def write_lock(wheels: Mapping[str, str], path: Path = LOCK_FILE) -> None:
    """Write the lock, sorted by file name, so that a refresh gives a readable diff."""
    document = {"about": _ABOUT, "wheels": dict(sorted(wheels.items()))}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def check_against_lock(base_wheel: Path, lock: Mapping[str, str]) -> Optional[str]:
    """Check the base's sha256 against the lock.

    Returns:
        A warning when the lock does not know the file name; ``None`` when it matches.

    Raises:
        PatchError: When the lock knows the file name and the sha256 differs.
    """
    expected = lock.get(base_wheel.name)
    if expected is None:
        return (
            f"{base_wheel.name} is not in the lock of official wheels, so its sha256 cannot be "
            "checked; building it anyway"
        )
    actual = sha256_of_file(base_wheel)
    if actual != expected:
        raise PatchError(
            f"{base_wheel.name}: sha256 {actual} differs from the official wheel's {expected} "
            "in the lock; this is not the official file, delete it and download it again"
        )
    return None


def refresh_lock(
    requests: Sequence[BaseRequest],
    cache_dir: Path,
    *,
    path: Path = LOCK_FILE,
    jobs: int = 4,
    progress: Optional[Callable[[str], None]] = None,
) -> Dict[str, str]:
    """Download every requested official wheel that PyPI has and record its sha256.

    Entries of other releases already in the lock are kept.
    """
    wheels = load_lock(path)
    releases = {request.version for request in requests}
    wheels = {name: digest for name, digest in wheels.items() if name.split("-")[1] not in releases}

    def report(request: BaseRequest, found: Optional[Path]) -> None:
        if progress is not None:
            progress(f"{request.describe()}: {found.name if found else 'not on PyPI'}")

    for _, found in download_many(requests, cache_dir, jobs=jobs, on_result=report):
        if found is not None:
            wheels[found.name] = sha256_of_file(found)
    write_lock(wheels, path)
    return wheels
