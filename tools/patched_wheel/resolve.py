"""One way from what the user asked for to a verified base wheel, raising on failure.

A wheel file is read once and verified. A release is looked up in the cache by the exact
file name of the official wheel the lock names (never by a pattern), and a cached file is
checked against the lock like any other base: the cache saves downloads, it is not trusted.
A missing one is fetched by that exact name from the index's list of files
(:func:`~patched_wheel.download.fetch_locked`), whatever else the index offers. A request the
lock does not know is refused before any network, with what the lock does know, unless the
user opted in; such a base is downloaded by pip afresh each time and never cached.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Mapping, Optional

from patched_wheel import PatchError
from patched_wheel.base import read_base, verify_base
from patched_wheel.download import IndexFile, fetch_locked, pip_download
from patched_wheel.files import write_atomically
from patched_wheel.lock import Lock
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.request import BaseChoice, BaseRequest, acceptable_tags
from patched_wheel.wheelfile import Wheel

__all__ = ["ensure_cached", "fetch_base", "official_name", "resolve_base", "usable_cache"]

logger = logging.getLogger(__name__)


def official_name(request: BaseRequest, lock: Lock) -> Optional[str]:
    """The file name of the official wheel serving ``request``, if the lock knows one."""
    return lock.official_name(request.release, acceptable_tags(request))


def usable_cache(cache_dir: Path) -> Path:
    """``cache_dir``, created if missing.

    Raises:
        PatchError: If it cannot be created or is not a folder (a file of that name, a
            read-only place): one line, before anything is downloaded.
    """
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PatchError(
            f"the cache folder {str(cache_dir)!r} cannot be created ({error.strerror or error});"
            " give a folder you can write with --cache"
        ) from None
    if not cache_dir.is_dir():
        raise PatchError(
            f"the cache folder {str(cache_dir)!r} is not a folder; give a folder you can write "
            "with --cache"
        )
    return cache_dir


def _store(path: Path, data: bytes) -> None:
    """Put verified bytes into the cache under their official name (temporary, rename)."""
    try:
        write_atomically(path, data)
    except OSError as error:
        logger.warning("could not keep %s in the cache (%s)", path.name, error)


def _fetch_unlocked(request: BaseRequest, *, lock: Lock, cache_dir: Path) -> Wheel:
    """A base the lock does not know, downloaded by pip as the user opted in; not cached."""
    data, filename = pip_download(request, usable_cache(cache_dir))
    return verify_base(data, filename, lock=lock, unlocked=True)


def fetch_base(
    request: BaseRequest, *, lock: Lock, cache_dir: Path = DEFAULT_CACHE_DIR, unlocked: bool = False
) -> Wheel:
    """The verified official wheel for ``request``: from the cache, or downloaded.

    Raises:
        PatchError: Including its kinds :class:`~patched_wheel.download.IndexUnreachable`
            and :class:`~patched_wheel.download.NoSuchWheel`; an unknown request without
            ``unlocked`` before any network.
    """
    name = official_name(request, lock)
    if name is None:
        if not unlocked:
            raise PatchError(lock.unknown_request(request))
        return _fetch_unlocked(request, lock=lock, cache_dir=cache_dir)
    path = cache_dir / name
    if path.is_file():
        return read_base(path, lock=lock, what="the cached base wheel")
    usable_cache(cache_dir)
    data = fetch_locked(name, lock.wheels[name])
    base = verify_base(data, name, lock=lock)
    _store(path, data)
    return base


def ensure_cached(
    request: BaseRequest,
    *,
    lock: Lock,
    cache_dir: Path = DEFAULT_CACHE_DIR,
    index: Optional[str] = None,
    files: Optional[Mapping[str, IndexFile]] = None,
) -> Path:
    """The cache's file of the official wheel for ``request``, downloaded if missing.

    Only the sha256 is checked here (downloads run in parallel); the caller reads the file
    with :func:`~patched_wheel.base.read_base`, which checks it again with everything else.
    ``index`` and ``files`` are the index and its list of files where the caller has them.

    Raises:
        PatchError: If the lock does not know the request, or as :func:`fetch_base`.
    """
    name = official_name(request, lock)
    if name is None:
        raise PatchError(lock.unknown_request(request))
    path = cache_dir / name
    if not path.is_file():
        usable_cache(cache_dir)
        data = fetch_locked(name, lock.wheels[name], index=index, files=files)
        lock.check(name, hashlib.sha256(data).hexdigest(), unlocked=False)
        _store(path, data)
    return path


def resolve_base(choice: BaseChoice, *, lock: Lock, cache_dir: Path = DEFAULT_CACHE_DIR) -> Wheel:
    """The verified base the user chose: the wheel file given, or the release fetched."""
    if choice.wheel is not None:
        return read_base(
            choice.wheel, lock=lock, unlocked=choice.unlocked, what=choice.wheel_source
        )
    return fetch_base(choice.request, lock=lock, cache_dir=cache_dir, unlocked=choice.unlocked)
