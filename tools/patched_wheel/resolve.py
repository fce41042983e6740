"""One way from what the user asked for to a verified base wheel, raising on failure.

A wheel file is read once and verified. A release is looked up in the cache by the exact
file name of the official wheel the lock names (never by a pattern), and a cached file is
checked against the lock like any other base: the cache saves downloads, it is not trusted.
A base the lock does not know is downloaded afresh each time and never cached.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Optional

from patched_wheel import PatchError
from patched_wheel.base import read_base, verify_base
from patched_wheel.choice import BaseChoice
from patched_wheel.download import BaseRequest, acceptable_tags, pip_download
from patched_wheel.files import write_atomically
from patched_wheel.lock import Lock
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.wheelfile import Wheel

__all__ = ["ensure_cached", "fetch_base", "official_name", "resolve_base"]

logger = logging.getLogger(__name__)


def official_name(request: BaseRequest, lock: Lock) -> Optional[str]:
    """The file name of the official wheel serving ``request``, if the lock knows one."""
    return lock.official_name(request.release, acceptable_tags(request))


def _store(path: Path, data: bytes) -> None:
    """Put verified bytes into the cache under their official name (temporary, rename)."""
    try:
        write_atomically(path, data)
    except OSError as error:
        logger.warning("could not keep %s in the cache (%s)", path.name, error)


def fetch_base(
    request: BaseRequest, *, lock: Lock, cache_dir: Path = DEFAULT_CACHE_DIR, unlocked: bool = False
) -> Wheel:
    """The verified official wheel for ``request``: from the cache, or downloaded.

    Raises:
        PatchError: Including its kinds :class:`~patched_wheel.download.IndexUnreachable`
            and :class:`~patched_wheel.download.NoSuchWheel`.
    """
    name = official_name(request, lock)
    if name is not None and (cache_dir / name).is_file():
        return read_base(cache_dir / name, lock=lock, what="the cached base wheel")
    data, filename = pip_download(request, cache_dir)
    base = verify_base(data, filename, lock=lock, unlocked=unlocked)
    if filename == name:
        _store(cache_dir / name, data)
    return base


def ensure_cached(request: BaseRequest, *, lock: Lock, cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """The cache's file of the official wheel for ``request``, downloaded if missing.

    Only the sha256 is checked here (downloads run in parallel); the caller reads the file
    with :func:`~patched_wheel.base.read_base`, which checks it again with everything else.

    Raises:
        PatchError: If the lock does not know the request, or as :func:`fetch_base`.
    """
    name = official_name(request, lock)
    if name is None:
        raise PatchError(f"the lock has no official wheel of {request.describe()}; run lock")
    path = cache_dir / name
    if not path.is_file():
        data, filename = pip_download(request, cache_dir)
        lock.check(filename, hashlib.sha256(data).hexdigest(), unlocked=False)
        if filename != name:
            raise PatchError(f"pip downloaded {filename}, not the official {name}; check the index")
        _store(path, data)
    return path


def resolve_base(choice: BaseChoice, *, lock: Lock, cache_dir: Path = DEFAULT_CACHE_DIR) -> Wheel:
    """The verified base the user chose: the wheel file given, or the release fetched."""
    if choice.wheel is not None:
        return read_base(
            choice.wheel, lock=lock, unlocked=choice.unlocked, what=choice.wheel_source
        )
    return fetch_base(choice.request, lock=lock, cache_dir=cache_dir, unlocked=choice.unlocked)
