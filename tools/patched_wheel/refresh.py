"""Refresh the lock from the index: every sha256 from a fresh download the index vouches for.

For each requested release, platform and Python, the index's list of files (PEP 691 JSON)
says which official wheel exists and its sha256; pip then downloads that wheel into an empty
folder (never from a cache) and the sha256 of the bytes it brought must be the index's. Only
when every request was checked is the lock written; any failure leaves it unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import parse_wheel_filename
from packaging.version import Version
from patched_wheel import PatchError
from patched_wheel.download import (
    BaseRequest,
    NoSuchWheel,
    acceptable_tags,
    index_digests,
    index_url,
    pip_download,
)
from patched_wheel.lock import Lock, load_lock, write_lock
from patched_wheel.paths import LOCK_FILE

__all__ = ["indexed_name", "refresh_lock"]

logger = logging.getLogger(__name__)


def indexed_name(request: BaseRequest, digests: Mapping[str, str]) -> Optional[str]:
    """The file on the index that serves ``request`` (a wheel without a build tag), or None."""
    wanted = acceptable_tags(request)
    for name in sorted(digests):
        if not name.endswith(".whl"):
            continue
        _, version, build, tags = parse_wheel_filename(name)
        if version == Version(request.release) and not build and tags & wanted:
            return name
    return None


def _checked_download(request: BaseRequest, name: str, expected: str) -> Tuple[str, str]:
    """(file name, sha256) of a fresh download of ``name``, which must match the index."""
    with tempfile.TemporaryDirectory(prefix="torchtrt-lock-") as folder:
        data, filename = pip_download(request, Path(folder))
    actual = hashlib.sha256(data).hexdigest()
    if filename != name or actual != expected:
        raise PatchError(
            f"{filename}: the download (sha256 {actual}) is not the index's {name} (sha256 "
            f"{expected}); the lock is left unchanged, try again"
        )
    return filename, actual


def _fetch_all(
    requests: Sequence[BaseRequest], digests: Mapping[str, str], jobs: int
) -> Tuple[Dict[str, str], List[str]]:
    """(file name -> sha256 of each fresh download, the problems met)."""
    found = [(r, indexed_name(r, digests)) for r in requests]
    for request, name in found:
        if name is None:
            logger.info("%s: not on the index", request.describe())

    def fetch(item: Tuple[BaseRequest, str]) -> Tuple[Optional[Tuple[str, str]], str]:
        try:
            return _checked_download(item[0], item[1], digests[item[1]]), ""
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
    try:
        digests = index_digests(index or index_url())
    except NoSuchWheel as error:
        raise PatchError(f"{error}; the lock is left unchanged") from None
    wheels, problems = _fetch_all(requests, digests, jobs)
    if problems:
        raise PatchError(
            f"{len(problems)} wheel(s) could not be checked, so the lock is left unchanged:\n"
            + "\n".join(f"  {problem}" for problem in problems)
        )
    releases = {Version(request.release) for request in requests}
    kept = {n: d for n, d in old.wheels.items() if parse_wheel_filename(n)[1] not in releases}
    write_lock({**kept, **wheels}, path)
    return Lock({**kept, **wheels})
