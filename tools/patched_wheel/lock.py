"""The lock of the official wheels: the sha256 of each wheel on PyPI, and the base it pins.

The lock (:data:`~.config.LOCK_FILE`) maps each official wheel's file name, which names its
distribution, release, Python and platform, to its sha256. It is the build's source of
trust: a base the lock does not know is refused unless the user opts in, and a release,
platform and Python the lock knows is accepted only as the very file the lock names.
:func:`open_base` is the one way from the user's choice to a base wheel: read once, checked
against the lock, then opened. :func:`refresh_lock` rewrites the lock from fresh downloads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from . import PatchError, config
from .fetch import (
    cached_base,
    find_installed,
    installed_request,
    local_install_wheel,
    pip_download,
    unlocked_base,
)
from .wheel import BaseWheel, is_wheel_filename

logger = logging.getLogger(__name__)

_ABOUT = (
    "sha256 of the official torch-tensorrt and torch-tensorrt-rtx wheels on PyPI, by file name. "
    "Refresh with: python tools/patched_wheel lock"
)


@dataclass(frozen=True)
class Lock:
    """File name -> sha256 of every official wheel the build trusts."""

    wheels: Mapping[str, str]

    def official_name(self, request: config.BaseRequest) -> Optional[str]:
        """The file name of the locked wheel serving ``request`` (the first in sorted order)."""
        wanted = request.acceptable_tags()
        for name in sorted(self.wheels):
            if _serves(name, request.distribution, Version(request.release)):
                if parse_wheel_filename(name)[3] & wanted:
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
        name, version, _, tags = parse_wheel_filename(filename)
        known = next(
            (
                n
                for n in sorted(self.wheels)
                if _serves(n, name, version) and parse_wheel_filename(n)[3] & tags
            ),
            None,
        )
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
                f"({config.supported_releases_text()}) or, for a wheel you trust from another "
                "index "
                f"(such as a CUDA variant 2.x.y+cu128), {config.UNLOCKED_OPT_IN}"
            )
        logger.warning(
            "%s is not in the lock of official wheels; building it unchecked, as asked "
            "(TORCHTRT_BASE_UNLOCKED=1 or --unlocked)",
            filename,
        )

    def newest(self, distribution: str) -> Optional[Version]:
        """The newest release of ``distribution`` the lock holds wheels of."""
        project = canonicalize_name(distribution)
        found = (parse_wheel_filename(name)[:2] for name in self.wheels)
        return max((version for name, version in found if name == project), default=None)

    def unknown_request(self, request: config.BaseRequest) -> str:
        """Why the lock has no wheel for ``request``, and what it has instead (one line),
        told before any network."""
        tags = [
            tag
            for name in self.wheels
            if _serves(name, request.distribution, Version(request.release))
            for tag in parse_wheel_filename(name)[3]
        ]
        version, supported = Version(request.release), config.RELEASES[request.distribution]
        if not tags and version < Version(supported[0]):
            return (
                f"{request.distribution} {request.release} is older than {supported[0]}, the "
                "first release the lock holds and a fix applies to, so it cannot be patched; "
                "supported base releases are "
                f"{config.supported_releases_text(request.distribution)}"
            )
        if not tags and version.local is not None:
            return (
                f"{request.distribution} {request.release} is a variant that the lock of "
                "official wheels does not know (it holds PyPI's wheels only); for a wheel you "
                f"trust from another index, {config.UNLOCKED_OPT_IN}"
            )
        if not tags:
            return (
                f"{request.distribution} {request.release} is not a supported base release; "
                "supported base releases are "
                f"{config.supported_releases_text(request.distribution)} "
                f"({self.newest(request.distribution)} is the newest the lock knows; if upstream "
                f"has released {request.release}, a maintainer adds it with 'python "
                f"tools/patched_wheel lock --release {request.release} --distribution "
                f"{request.distribution}')"
            )
        served = set(config.platforms_serving(request.platform))
        platforms = sorted({tag.platform for tag in tags})
        if not served & set(platforms):
            asked = repr(request.platform) if request.platform else "this platform"
            return (
                f"the official wheels of {request.distribution} {request.release} are not built"
                f" for {asked}; their platforms are {', '.join(platforms)}: set "
                "TORCHTRT_BASE_PLATFORM (or --platform) to one of them"
            )
        pythons = sorted(
            {f"3.{t.interpreter[3:]}" for t in tags if t.platform in served}, key=config.python_key
        )
        asked = f"Python {request.python}" if request.python else "this Python"
        return (
            f"the official wheels of {request.distribution} {request.release} are not built for "
            f"{asked} on {request.platform or 'this platform'}; their Pythons there are "
            f"{', '.join(pythons)}: set TORCHTRT_BASE_PYTHON (or --python) to one of them"
        )


def _serves(name: str, distribution: str, version: Version) -> bool:
    """Whether the locked file ``name`` is of this distribution and release."""
    project, locked_version, _, _ = parse_wheel_filename(name)
    return project == canonicalize_name(distribution) and locked_version == version


def load_lock(path: Path = config.LOCK_FILE) -> Lock:
    """The lock at ``path``; one line if it is missing or not a lock."""
    try:
        wheels = json.loads(path.read_text(encoding="utf-8"))["wheels"]
        lock = Lock({str(name): str(digest) for name, digest in wheels.items()})
        if not all(map(is_wheel_filename, lock.wheels)):
            raise ValueError("a key is not a wheel file name")
        return lock
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise PatchError(
            f"{path}: not a lock file ({error!r}); restore it from git or refresh it with "
            "'python tools/patched_wheel lock'"
        ) from None


def open_base(
    choice: config.BaseChoice, *, lock: Lock, cache_dir: Path = config.DEFAULT_CACHE_DIR
) -> BaseWheel:
    """The base the user chose (a wheel file, a release fetched into the cache, or an install
    no official wheel matches, made from its own files), read once, checked against the lock
    (or, unlocked or a local install, against its own RECORD), then opened."""
    request, local_install = choice.request, False
    if choice.wheel is not None:
        data, filename = config.read_file(choice.wheel, what=choice.wheel_source), choice.wheel.name
    else:
        installed = find_installed() if request.release == config.INSTALLED else None
        if installed is not None:
            request = installed_request(installed)
        name = lock.official_name(request)
        if installed is not None and name is None and not choice.unlocked:
            data, filename = local_install_wheel(installed, request)
            local_install = True
            logger.warning(
                "%s is a local install that no official wheel matches: the patched wheel is "
                "made from its own files (checked against its RECORD) and cannot be verified",
                filename,
            )
        elif name is not None:
            path = cached_base(request, name, lock.wheels[name], cache_dir)
            data, filename = config.read_file(path, what="the cached base wheel"), name
        elif choice.unlocked:
            data, filename = unlocked_base(request, cache_dir)
        else:
            raise PatchError(lock.unknown_request(request))
    if not is_wheel_filename(filename):
        raise PatchError(
            f"{filename!r} is not a wheel file name; pass the wheel as pip downloaded it"
        )
    if canonicalize_name(parse_wheel_filename(filename)[0]) not in config.DISTRIBUTIONS:
        raise PatchError(
            f"{filename} is not a wheel of {' or '.join(config.DISTRIBUTIONS)}; give an "
            "official one"
        )
    if not local_install:
        lock.check(filename, hashlib.sha256(data).hexdigest(), unlocked=choice.unlocked)
    base = BaseWheel(data, filename, local_install=local_install)
    if filename not in lock.wheels:
        base.validate_record()  # an unlocked base: checked by nothing but its own RECORD
    return base


def refresh_lock(
    requests: Sequence[config.BaseRequest], *, path: Path = config.LOCK_FILE, jobs: int = 4
) -> Lock:
    """Record the sha256 of a fresh download of every requested official wheel pip finds
    (pip checks each against the index's listed hash); entries of other releases are kept.
    Only when every request was answered is the lock written.

    Raises:
        PatchError: If any download failed otherwise than "no such wheel", or the index has
            no wheel at all of a requested release; the lock is unchanged.
    """
    old = load_lock(path) if path.exists() else Lock({})

    offered: List[Version] = []  # the releases pip says the index has, where it says so

    def fetch(request: config.BaseRequest) -> Tuple[Optional[Tuple[str, str]], str]:
        with tempfile.TemporaryDirectory(prefix="patched-wheel-lock-") as folder:
            try:
                wheel = pip_download(request, Path(folder))
            except PatchError as error:
                if "No matching distribution" not in str(error):  # pip's words for "none"
                    return None, f"{request.describe()}: {error}"
                listed = re.search(r"\(from versions: ([^)]*)\)", str(error))
                texts = listed[1].split(", ") if listed else []
                offered.extend(Version(t) for t in texts if re.fullmatch(r"[0-9]+(\.[0-9]+)*", t))
                return None, ""
            if parse_wheel_filename(wheel.name)[1] != Version(request.release):
                return None, ""  # pip's == took a variant: not the release itself
            digest = hashlib.sha256(
                config.read_file(wheel, what="the downloaded wheel")
            ).hexdigest()
            return (wheel.name, digest), ""

    wheels: Dict[str, str] = {}
    problems: List[str] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for found, problem in pool.map(fetch, requests):
            if found is not None:
                logger.info("%s  %s", found[1], found[0])
                wheels[found[0]] = found[1]
            elif problem:
                problems.append(problem)
    if problems:
        raise PatchError(
            f"{len(problems)} wheel(s) could not be checked, so the lock is left unchanged:\n"
            + "\n".join(f"  {problem}" for problem in problems)
        )
    releases = {Version(request.release) for request in requests}
    answered = {parse_wheel_filename(name)[1] for name in wheels}
    missing = ", ".join(str(release) for release in sorted(releases - answered))
    if missing:
        newest = f"its newest release is {max(offered)}" if offered else "it lists no release"
        raise PatchError(
            f"the index has no wheels of {requests[0].distribution} {missing} ({newest}); the "
            "lock is unchanged"
        )
    if len(wheels) < len(requests):
        logger.info("%d of %d wheels not on the index", len(requests) - len(wheels), len(requests))
    asked = {(canonicalize_name(r.distribution), Version(r.release)) for r in requests}
    kept = {n: d for n, d in old.wheels.items() if parse_wheel_filename(n)[:2] not in asked}
    document = {"about": _ABOUT, "wheels": dict(sorted({**kept, **wheels}.items()))}
    config.write_text_atomically(path, json.dumps(document, indent=2) + "\n")
    return Lock({**kept, **wheels})
