"""Refresh the lock from the index: every sha256 from a fresh download the index vouches for.

For each requested release, platform and Python, the index's list of files (PEP 691 JSON or
PEP 503 HTML) says which official wheel exists and its sha256; that exact file is then
downloaded afresh (never from a cache) and the sha256 of its bytes must be the index's. Only
when every request was checked is the lock written; any failure leaves it unchanged.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.download import IndexFile, NoSuchWheel, fetch_locked, index_files, index_url
from patched_wheel.lock import Lock, load_lock, write_lock
from patched_wheel.paths import LOCK_FILE
from patched_wheel.request import BaseRequest, acceptable_tags

__all__ = ["indexed_name", "refresh_lock"]

logger = logging.getLogger(__name__)


def indexed_name(request: BaseRequest, names: Mapping[str, object]) -> Optional[str]:
    """The file on the index that serves ``request`` (a wheel without a build tag), or None.

    ``names`` are the index's file names (the keys of its list); a name that is not a wheel
    file name is passed over.
    """
    wanted = acceptable_tags(request)
    for name in sorted(names):
        try:
            _, version, build, tags = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if version == Version(request.release) and not build and tags & wanted:
            return name
    return None


def _checked_download(name: str, files: Mapping[str, IndexFile], index: str) -> Tuple[str, str]:
    """(file name, sha256) of a fresh download of ``name``, which must match the index's."""
    expected = files[name].sha256
    if expected is None:
        raise PatchError(
            f"the package index lists {name} without a sha256; the lock is left unchanged, "
            "use an index that lists the sha256 of its files (PyPI does)"
        )
    data = fetch_locked(name, expected, index=index, files=files)
    return name, hashlib.sha256(data).hexdigest()


def _fetch_all(
    requests: Sequence[BaseRequest], files: Mapping[str, IndexFile], index: str, jobs: int
) -> Tuple[Dict[str, str], List[str]]:
    """(file name -> sha256 of each fresh download, the problems met)."""
    found = [(r, indexed_name(r, files)) for r in requests]
    for request, name in found:
        if name is None:
            logger.info("%s: not on the index", request.describe())

    def fetch(item: Tuple[BaseRequest, str]) -> Tuple[Optional[Tuple[str, str]], str]:
        try:
            return _checked_download(item[1], files, index), ""
        except PatchError as error:
            return None, f"{item[0].describe()}: {error}"

    wheels: Dict[str, str] = {}
    problems: List[str] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result, problem in pool.map(fetch, [(r, n) for r, n in found if n is not None]):
            if result is None:
                problems.append(problem)
            else:
                logger.info("%s  %s", result[1], result[0])
                wheels[result[0]] = result[1]
    return wheels, problems


def refresh_lock(
    requests: Sequence[BaseRequest],
    *,
    path: Path = LOCK_FILE,
    index: Optional[str] = None,
    jobs: int = 4,
) -> Lock:
    """Record the sha256 of every requested official wheel the index has.

    Entries of releases not requested are kept.

    Raises:
        PatchError: If the index could not be reached or any download failed its check;
            the lock file is then unchanged.
    """
    old = load_lock(path) if path.exists() else Lock({})
    index = index or index_url()
    try:
        files = index_files(index)
    except NoSuchWheel as error:
        raise PatchError(f"{error}; the lock is left unchanged") from None
    wheels, problems = _fetch_all(requests, files, index, jobs)
    if problems:
        raise PatchError(
            f"{len(problems)} wheel(s) could not be checked, so the lock is left unchanged:\n"
            + "\n".join(f"  {problem}" for problem in problems)
        )
    releases = {Version(request.release) for request in requests}
    kept = {n: d for n, d in old.wheels.items() if parse_wheel_filename(n)[1] not in releases}
    write_lock({**kept, **wheels}, path)
    return Lock({**kept, **wheels})
