"""Helpers of the patched-wheel build's tests: real bases, and wheels crafted from them.

Real official wheels are fetched once per session (by the ``base_wheels`` fixture) into the
repository's ``.cache/base-wheels``, the folder the build itself uses, and verified against
the lock. Crafted wheels start from a real one: members are edited, added, dropped or
renamed, and RECORD is written again so that exactly the rule under test is broken.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from patched_wheel.lock import Lock, load_lock
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.request import BaseRequest
from patched_wheel.resolve import ensure_cached

# The tag every real base of the tests has: one Python, one platform, per release.
TEST_PYTHON = "3.11"
TEST_PLATFORM = "manylinux_2_28_x86_64"

# 2.9.0 lacks release_host_and_device_memory: the build must refuse it.
UNSUPPORTED_RELEASE = "2.9.0"

TARGET = "torch_tensorrt/dynamo/utils.py"

Member = Tuple[zipfile.ZipInfo, bytes]


def fetch(release: str, python: str = TEST_PYTHON, platform: str = TEST_PLATFORM) -> Path:
    """The official wheel in the cache (downloaded into it once), checked against the lock."""
    return ensure_cached(
        BaseRequest(release, platform, python), lock=load_lock(), cache_dir=DEFAULT_CACHE_DIR
    )


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_for(*paths: Path) -> Lock:
    """A lock that knows exactly these files, so that a crafted base gets past the lock."""
    return Lock({path.name: sha256(path) for path in paths})


def members(path: Path) -> Dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def dist_info_of(entries: List[Member]) -> str:
    return next(i.filename.split("/")[0] for i, _ in entries if i.filename.endswith("/RECORD"))


def rerecord(entries: List[Member], listed: Optional[Mapping[str, bytes]] = None) -> List[Member]:
    """``entries`` with RECORD written again for them (``listed`` overrides some rows' bytes)."""
    dist_info = dist_info_of(entries)
    rows = []
    for info, data in entries:
        if info.is_dir() or info.filename == f"{dist_info}/RECORD":
            continue
        shown = (listed or {}).get(info.filename, data)
        rows.append(f"{info.filename},{record_hash(shown)},{len(shown)}")
    present = {info.filename for info, _ in entries}
    for name, shown in (listed or {}).items():
        if name not in present:  # listed in RECORD, absent from the zip
            rows.append(f"{name},{record_hash(shown)},{len(shown)}")
    rows.append(f"{dist_info}/RECORD,,")
    record = ("\n".join(rows) + "\n").encode()
    return [(i, record if i.filename == f"{dist_info}/RECORD" else d) for i, d in entries]


def read_entries(path: Path) -> List[Member]:
    with zipfile.ZipFile(path) as archive:
        return [(info, archive.read(info)) for info in archive.infolist()]


def write_entries(path: Path, entries: List[Member]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return path


def craft(
    base: Path,
    folder: Path,
    edit: Callable[[List[Member]], List[Member]],
    *,
    name: Optional[str] = None,
    record: bool = True,
) -> Path:
    """A wheel made from ``base`` by ``edit`` on its (info, bytes) list, RECORD rewritten."""
    entries = edit(read_entries(base))
    if record:
        entries = rerecord(entries)
    folder.mkdir(parents=True, exist_ok=True)
    return write_entries(folder / (name or base.name), entries)


def replaced(entries: List[Member], name: str, data: bytes) -> List[Member]:
    return [(i, data if i.filename == name else d) for i, d in entries]


def added(entries: List[Member], name: str, data: bytes, mode: int = 0o644) -> List[Member]:
    info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return entries + [(info, data)]


SYNTHETIC_UTILS = """\
import gc

import torch


def deallocate_module(module, delete_module=True):
    module.to("cpu")


def release_host_and_device_memory():
    gc.collect()
"""

SYNTHETIC_CALLER = """\
from torch_tensorrt.dynamo.utils import deallocate_module


def compile(gm):
    deallocate_module(gm, delete_module=False)
"""


def make_wheel(
    directory: Path,
    files: Optional[Mapping[str, bytes]] = None,
    *,
    version: str = "2.14.0",
    tag: str = "cp311-cp311-manylinux_2_28_x86_64",
    record: Optional[Mapping[str, bytes]] = None,
    date_time: Tuple[int, int, int, int, int, int] = (2020, 2, 2, 12, 0, 0),
) -> Path:
    """A small wheel of ``torch_tensorrt``: ``files`` as stored, ``record`` as RECORD hashes.

    ``record`` gives, for some paths, the bytes whose hash RECORD lists instead of the
    stored bytes, to make a wheel whose files were edited after RECORD was written.
    """
    dist_info = f"torch_tensorrt-{version}.dist-info"
    contents: Dict[str, bytes] = {
        "torch_tensorrt/__init__.py": b"",
        TARGET: SYNTHETIC_UTILS.encode(),
        "torch_tensorrt/dynamo/_compiler.py": SYNTHETIC_CALLER.encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.4\nName: torch_tensorrt\nVersion: {version}\n"
            "Requires-Dist: torch>=2.0\n\nDescription.\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
        f"{dist_info}/RECORD": b"",
    }
    contents.update(files or {})
    entries = [(zipfile.ZipInfo(name, date_time), data) for name, data in contents.items()]
    return write_entries(
        directory / f"torch_tensorrt-{version}-{tag}.whl", rerecord(entries, record)
    )


def _repository_label() -> str:
    """The label the build gives the repository's overlay (its released number, or a
    development label where the overlay is not registered)."""
    from patched_wheel.build import current_label
    from patched_wheel.overlay import read_overlay

    return current_label(read_overlay())


# The label of every wheel the tests build from the repository's overlay.
LABEL = _repository_label()
