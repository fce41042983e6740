"""Fetching a base: the official wheel into the cache, by pip, pinned by its sha256.

A locked base is ``pip download``-ed as the exact release (``===``: no ``+cu999`` can win) with
``--require-hashes``: pip, under its own settings, refuses any other file. The cache is looked
up by official name and re-checked when read: it saves downloads, it is not trusted. An unlocked
base (opted in) is fetched with ``==``, never cached. ``installed`` is read outside pip's build
isolation; an install no official wheel matches gives a wheel of the files its RECORD lists.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from contextlib import suppress
from pathlib import Path
from typing import List, Optional, Tuple

from packaging.tags import Tag, parse_tag
from packaging.version import InvalidVersion, Version

from . import PatchError, config, files, settings
from .releases import split_label
from .wheel import MAX_UNPACKED_BYTES, header_values, record_hash, record_text

logger = logging.getLogger(__name__)

DISTRIBUTION = "torch_tensorrt"
# Each distribution found on sys.path: [name, version, WHEEL, the folder its files are
# relative to, the .dist-info folder's name] (run outside pip's build isolation).
_QUERY = f"""
import json
from importlib import metadata
found = []
for name in {config.DISTRIBUTIONS!r}:
    for d in metadata.distributions(name=name):
        record = [f.parent.name for f in d.files or () if f.match("*.dist-info/RECORD")]
        found.append([name, d.version, d.read_text("WHEEL") or "", str(d.locate_file("")),
                      (record or [""])[0]])
        break
print(json.dumps(found))
"""
# What pip prints when it reached no index (urllib3's and the resolver's words).
UNREACHABLE = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "ConnectTimeout",
    "Temporary failure in name resolution",
    "Network is unreachable",
)
# Files an installer writes into the .dist-info, which no wheel holds.
_INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
# The installed torch_tensorrt: the base it stands for, its version, the folder its files are
# relative to, its .dist-info folder's name ("" where it has no RECORD: an egg, a develop install).
Installed = Tuple[settings.BaseRequest, str, Path, str]


def usable_cache(cache_dir: Path) -> Path:
    """``cache_dir``, created if missing; one line before any download if it cannot be."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)  # raises where a file is in the way
    except OSError as error:
        raise PatchError(
            f"the cache folder {str(cache_dir)!r} cannot be used ({error.strerror or error}); "
            "give a folder you can write with --cache"
        ) from None
    return cache_dir


def pip_download(
    request: settings.BaseRequest, folder: Path, *, sha256: Optional[str] = None
) -> Path:
    """The one wheel pip downloads for ``request`` into the empty ``folder``: the release
    exactly and this sha256 where given (``--require-hashes``), else what ``==`` picks."""
    folder = folder.resolve()  # pip runs in it
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", "--no-cache-dir", "-d", str(folder)]
    # pip takes a manylinux tag as itself alone, not the older ones
    for platform in settings.platforms_serving(request.platform) if request.platform else ():
        command += ["--platform", platform]
    if request.python:
        command += ["--python-version", request.python, "--implementation", "cp"]
    if sha256 is None:
        command.append(f"{request.distribution}=={request.release}")
    else:
        requirement, pin = folder / ".requirement.txt", f"--hash=sha256:{sha256}"
        requirement.write_text(f"{request.distribution}==={request.release} {pin}\n")
        command += ["--require-hashes", "-r", str(requirement)]
    try:
        # in the empty download folder: ``-m`` puts the current folder first on pip's path
        completed = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    except OSError as error:
        raise PatchError(f"cannot run pip ({error}); install pip") from None
    wheels = sorted(folder.glob("*.whl"))
    if completed.returncode != 0 or len(wheels) != 1:
        # One line: whether the index was reached at all, else pip's own ERROR lines (the
        # lock's refresh reads "No matching distribution" and "(from versions: ...)" there).
        output = [line.strip() for line in (completed.stdout + completed.stderr).splitlines()]
        errors = [line for line in output if line.startswith("ERROR:")][-2:]
        shown = "; ".join(errors) or (output[-1] if output else f"{len(wheels)} wheels")
        if any(word in line for line in output for word in UNREACHABLE):
            shown = "the package index could not be reached (no network, or a wrong index URL)"
        raise PatchError(
            f"pip could not download {request.describe()}: {shown}. Check the network and "
            "pip's index settings, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    return wheels[0]


def downloaded_base(
    request: settings.BaseRequest, cache_dir: Path, *, sha256: Optional[str] = None
) -> Tuple[bytes, str]:
    """(bytes, file name) of the wheel pip downloads for ``request``, by a temporary folder."""
    with tempfile.TemporaryDirectory(dir=usable_cache(cache_dir), prefix=".download-") as folder:
        downloaded = pip_download(request, Path(folder), sha256=sha256)
        return files.read_file(downloaded, what="the downloaded wheel"), downloaded.name


def cached_base(request: settings.BaseRequest, name: str, sha256: str, cache_dir: Path) -> Path:
    """The cache's file ``name`` (the official wheel for ``request``), downloaded if missing."""
    path = cache_dir / name
    if not path.is_file():
        data, downloaded = downloaded_base(request, cache_dir, sha256=sha256)
        if downloaded != name:
            raise PatchError(f"pip downloaded {downloaded}, not {name}; report this")
        files.write_atomically(path, data)
        logger.info("fetched %s", name)
    return path


def find_installed() -> Installed:
    """The installed ``torch_tensorrt`` (either distribution, outside pip's build isolation) and
    the base it stands for: a patched wheel's, or a source build's own (``2.10.0a0+abc1234``)."""
    isolated = any(os.environ.get(name) for name in ("PIP_BUILD_TRACKER", "PIP_REQ_TRACKER"))
    hidden = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME") if isolated else ()  # pip's isolation
    environ = {name: value for name, value in os.environ.items() if name not in hidden}
    query = [sys.executable, "-c", _QUERY]
    try:  # in an empty folder: ``-c`` puts the current folder first on the query's path
        with tempfile.TemporaryDirectory() as empty:
            completed = subprocess.run(
                query, cwd=empty, env=environ, capture_output=True, text=True, check=True
            )
        found = [(n, v, w, Path(r), d) for n, v, w, r, d in json.loads(completed.stdout)]
    except (OSError, subprocess.CalledProcessError, ValueError, TypeError):
        found = []
    if not found:
        raise PatchError(
            f"'{config.INSTALLED}' asks for the installed {DISTRIBUTION}, and this Python has "
            "none; install it, or give the release (TORCHTRT_BASE_VERSION or --release)"
        )
    if len(found) > 1:
        raise PatchError(
            f"both {' and '.join(i[0] for i in found)} are installed, into one "
            f"{DISTRIBUTION} folder; uninstall one, or give the release and distribution"
        )
    distribution, version, wheel_text, root, dist_info = found[0]
    known = False  # a canonical release of three parts, such as 2.10.0a0+abc1234
    with suppress(InvalidVersion):
        known = str(Version(version)) == version and len(Version(version).release) == 3
    if not known:
        raise PatchError(
            f"the installed {DISTRIBUTION} {version!r} is not a release the build knows; "
            "give the release (TORCHTRT_BASE_VERSION or --release) instead"
        )
    tags: List[Tag] = []
    for value in header_values(wheel_text.encode("utf-8"), "Tag"):
        with suppress(ValueError):  # a Tag line that is not a tag
            tags += sorted(parse_tag(value), key=str)
    cpython = [t for t in tags if t.interpreter[:3] == "cp3" and t.interpreter[3:].isdigit()]
    if not cpython:
        raise PatchError(
            f"the installed {DISTRIBUTION} has no CPython tag in its WHEEL file (not installed "
            "from a wheel?); give the release, platform and Python instead"
        )
    release, python = split_label(version)[0], f"3.{cpython[0].interpreter[3:]}"
    request = settings.BaseRequest(release, cpython[0].platform, python, distribution)
    return request, version, root, dist_info


def installed_request() -> settings.BaseRequest:
    """The release, platform and Python the installed ``torch_tensorrt`` stands for."""
    return find_installed()[0]


def local_install_wheel(installed: Installed) -> Tuple[bytes, str]:
    """(bytes, file name) of a wheel of the install's own files as its RECORD lists them (not
    scripts, bytecode or the installer's files), each checked against its row."""
    request, version, root, dist_info = installed
    what = f"the installed {request.distribution} {version} ({root / dist_info})"
    if not dist_info:
        raise PatchError(f"{what}: has no RECORD (not installed from a wheel); reinstall it")
    try:
        listing = files.read_regular_file(root / dist_info / "RECORD", 16 * config.MiB)
        if len(listing) > 16 * config.MiB:
            raise OSError(errno.EFBIG, "larger than 16 MiB")
        rows = list(csv.reader(io.StringIO(listing.decode("utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise PatchError(f"{what}: its RECORD cannot be read ({error}); reinstall it") from None
    members: List[Tuple[str, bytes, int]] = []  # (path, bytes, mode)
    problems: List[str] = []
    # The files add up to at most what an unlocked wheel may unpack to, each read once: a
    # RECORD that lists one large file many times costs no more than the bytes on disk.
    budget, seen = MAX_UNPACKED_BYTES, set()
    for row in filter(None, rows):
        path = row[0] if len(row) == 3 else ""
        parts = path.replace("\\", "/").split("/")  # an empty part: no path, or an absolute one
        installer_file = parts[0] == dist_info and parts[-1] in _INSTALLER_FILES
        if {"", "..", "__pycache__"} & set(parts) or installer_file:
            continue  # not a file of the install folder (scripts), bytecode, an installer's file
        if path in seen:
            problems.append(f"{path} is listed twice")
            continue
        seen.add(path)
        try:  # within the cap of a wheel: a FIFO or a link to /dev/zero is never read
            data = files.read_regular_file(root / path, min(budget, config.MAX_WHEEL_BYTES))
            mode = os.stat(root / path).st_mode & 0o777
        except OSError:
            problems.append(f"{path} is missing or not a regular file")
            continue
        budget -= len(data)
        if budget < 0:
            problems.append(f"its files add up to more than {MAX_UNPACKED_BYTES >> 30} GiB")
            break
        if (record_hash(data), str(len(data))) != (row[1], row[2]):
            problems.append(f"{path} differs from its RECORD row")
        else:
            members.append((path, data, mode))
    if problems or not members:
        shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
        raise PatchError(
            f"{what}: {shown or 'RECORD lists no file'}: its files are not the ones it was "
            "installed with, so the build cannot patch them; reinstall it first"
        )
    record = f"{dist_info}/RECORD"
    rows_out = [(p, record_hash(d), str(len(d))) for p, d, _ in members]
    rows_out.append((record, "", ""))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in [*members, (record, record_text(rows_out), 0o644)]:
            info = zipfile.ZipInfo(path)  # dated 1980-01-01
            info.external_attr = mode << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
    python = f"cp{str(request.python).replace('.', '')}"
    stem = dist_info.removesuffix(".dist-info")
    return out.getvalue(), f"{stem}-{python}-{python}-{request.platform}.whl"
