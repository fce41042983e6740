"""The lock: each official wheel's file name and its sha256 on PyPI, the build's source of trust.

A base it does not know is refused unless the user opts in; a release, platform and Python it
knows is accepted only as the very file it names. :func:`open_base` is the one way from the
user's choice to a base wheel; :func:`refresh_lock` rewrites the lock from fresh downloads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import FrozenSet, List, Mapping, Optional, Sequence, Tuple

from packaging.tags import Tag
from packaging.utils import BuildTag, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from . import PatchError, config, fetch, files, settings
from .fetch import pip_download  # by name, so that a test can replace it
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

    @cached_property
    def _parsed(self) -> List[Tuple[str, Tuple[NormalizedName, Version, BuildTag, FrozenSet[Tag]]]]:
        return [(name, parse_wheel_filename(name)) for name in sorted(self.wheels)]

    def _of(self, distribution: str) -> List[Tuple[str, Version, FrozenSet[Tag]]]:
        """(file name, release, tags) of each locked wheel of ``distribution``, by name."""
        project = canonicalize_name(distribution)
        return [(name, p[1], p[3]) for name, p in self._parsed if p[0] == project]

    def _serving(self, request: settings.BaseRequest) -> List[str]:
        """The file names of the locked wheels serving ``request``, in sorted order."""
        wanted, version = request.acceptable_tags(), Version(request.release)
        return [n for n, v, t in self._of(request.distribution) if v == version and t & wanted]

    def official_name(self, request: settings.BaseRequest) -> Optional[str]:
        """The file name of the locked wheel serving ``request`` (the first in sorted order)."""
        return next(iter(self._serving(request)), None)

    def check(self, filename: str, sha256: str, *, unlocked: bool) -> None:
        """Accept the base ``filename`` with bytes of ``sha256``, or refuse it (another sha256
        than the lock's, another file than the lock's, a file it lacks unless ``unlocked``)."""
        expected = self.wheels.get(filename)
        if expected is not None:
            if sha256 != expected:
                raise PatchError(
                    f"{filename}: sha256 {sha256} differs from the official wheel's {expected} "
                    "in the lock; this is not the official file, delete it and download it again"
                )
            return
        name, version, _, tags = parse_wheel_filename(filename)
        known = next((n for n, v, t in self._of(name) if v == version and t & tags), None)
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
                f"index (such as a CUDA variant 2.x.y+cu128), {config.UNLOCKED_OPT_IN}"
            )
        logger.warning(
            "%s is not in the lock of official wheels; building it unchecked, as asked "
            "(TORCHTRT_BASE_UNLOCKED=1 or --unlocked)",
            filename,
        )

    def unknown_request(self, request: settings.BaseRequest) -> str:
        """Why the lock has no wheel for ``request``, what it has instead (one line, offline)."""
        what = f"{request.distribution} {request.release}"
        version = Version(request.release)
        found = self._of(request.distribution)
        tags = [tag for _, v, locked in found if v == version for tag in locked]
        first = config.RELEASES[request.distribution][0]
        supported = config.supported_releases_text(request.distribution)
        if not tags and version < Version(first):
            return (
                f"{what} is older than {first}, the first release the lock holds and a fix "
                f"applies to, so it cannot be patched; supported base releases are {supported}"
            )
        if not tags and version.local is not None:
            return (
                f"{what} is a variant that the lock of official wheels does not know (it holds "
                f"PyPI's wheels only); for a wheel you trust from another index, "
                f"{config.UNLOCKED_OPT_IN}"
            )
        if not tags:
            newest = max((v for _, v, _ in found), default=None)
            return (
                f"{what} is not a supported base release; supported base releases are {supported} "
                f"({newest} is the newest the lock knows; if upstream has released "
                f"{request.release}, a maintainer adds it with 'python tools/patched_wheel lock "
                f"--release {request.release} --distribution {request.distribution}')"
            )
        served = set(settings.platforms_serving(request.platform))
        platforms = {tag.platform for tag in tags}
        if not served & platforms:
            asked = repr(request.platform) if request.platform else "this platform"
            return (
                f"the official wheels of {what} are not built for {asked}; their platforms are "
                f"{', '.join(sorted(platforms))}: set TORCHTRT_BASE_PLATFORM (or --platform) to "
                "one of them"
            )
        pythons = {f"3.{tag.interpreter[3:]}" for tag in tags if tag.platform in served}
        asked = f"Python {request.python}" if request.python else "this Python"
        return (
            f"the official wheels of {what} are not built for {asked} on "
            f"{request.platform or 'this platform'}; their Pythons there are "
            f"{', '.join(sorted(pythons, key=settings.python_key))}: set TORCHTRT_BASE_PYTHON (or "
            "--python) to one of them"
        )


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
    choice: settings.BaseChoice, *, lock: Lock, cache_dir: Path = config.DEFAULT_CACHE_DIR
) -> BaseWheel:
    """The base the user chose (a wheel file, a release fetched into the cache, or a local
    install's own files), read once, checked against the lock or its RECORD, then opened."""
    request, local_install = choice.request, False
    if choice.wheel is not None:
        data = files.read_file(choice.wheel, what=choice.wheel_source)
        filename = choice.wheel.name
    else:
        installed = fetch.find_installed() if request.release == config.INSTALLED else None
        request = request if installed is None else installed[0]
        name = lock.official_name(request)
        if installed is not None and name is None and not choice.unlocked:
            data, filename = fetch.local_install_wheel(installed)
            local_install = True
            logger.warning(
                "%s is a local install that no official wheel matches: the patched wheel is "
                "made from its own files (checked against its RECORD) and cannot be verified",
                filename,
            )
        elif name is not None:
            path = fetch.cached_base(request, name, lock.wheels[name], cache_dir)
            data, filename = files.read_file(path, what="the cached base wheel"), name
        elif choice.unlocked:
            data, filename = fetch.downloaded_base(request, cache_dir)
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
    sha256 = hashlib.sha256(data).hexdigest()
    if not local_install:
        lock.check(filename, sha256, unlocked=choice.unlocked)
    base = BaseWheel(data, filename, local_install=local_install, sha256=sha256)
    if filename not in lock.wheels:
        base.validate_record()  # an unlocked base: checked by nothing but its own RECORD
    return base


def refresh_lock(
    requests: Sequence[settings.BaseRequest], *, path: Path = config.LOCK_FILE, jobs: int = 4
) -> Lock:
    """Record the sha256 of a fresh download of every requested official wheel pip finds (pip
    checks each against the index's hash), keeping the entries no request serves; written only
    when every request was answered (else one error, the lock unchanged)."""
    old = load_lock(path) if path.exists() else Lock({})
    offered: List[Version] = []  # the releases pip says the index has, where it says so

    def download(request: settings.BaseRequest) -> Tuple[str, str]:
        """(file name, sha256); ("", why) if pip failed otherwise than "no such wheel"."""
        with tempfile.TemporaryDirectory(prefix="patched-wheel-lock-") as folder:
            try:
                wheel = pip_download(request, Path(folder))
            except PatchError as error:
                if "No matching distribution" not in str(error):  # pip's words for "none"
                    return "", f"{request.describe()}: {error}"
                listed = re.search(r"\(from versions: ([^)]*)\)", str(error))
                texts = listed[1].split(", ") if listed else []
                offered.extend(Version(t) for t in texts if re.fullmatch(r"[0-9]+(\.[0-9]+)*", t))
                return "", ""
            if parse_wheel_filename(wheel.name)[1] != Version(request.release):
                return "", ""  # pip's == took a variant: not the release itself
            data = files.read_file(wheel, what="the downloaded wheel")
            return wheel.name, hashlib.sha256(data).hexdigest()

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        answers = list(pool.map(download, requests))
    for name, digest in answers:
        if name:
            logger.info("%s  %s", digest, name)
    wheels = {name: digest for name, digest in answers if name}
    problems = [why for name, why in answers if not name and why]
    # PyPI never takes a file name twice: another sha256 for a known name is not an upload.
    problems += [
        f"{name}: the index serves sha256 {digest}, the lock has {old.wheels[name]}; PyPI never "
        "re-uploads a file name, so this is not the official file (check the index pip uses)"
        for name, digest in wheels.items()
        if old.wheels.get(name, digest) != digest
    ]
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
    # An entry is replaced only where a request serves it: `lock --release R --platform P`
    # keeps R's wheels of the other platforms.
    served = {name for request in requests for name in old._serving(request)}
    kept = {name: digest for name, digest in old.wheels.items() if name not in served}
    lock = Lock(dict(sorted({**kept, **wheels}.items())))
    text = json.dumps({"about": _ABOUT, "wheels": lock.wheels}, indent=2)
    files.write_text_atomically(path, text + "\n")
    return lock
