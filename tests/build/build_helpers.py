"""Helpers of the patched-wheel build's tests: real bases from the cache, small wheels made inline.

Real official wheels are downloaded once, by pip, into the repository's ``.cache/base-wheels``
(the folder the build itself uses, ignored by git), and reused by every test and every later
run. Small wheels for the edge cases are made with ``zipfile.writestr``.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional

from patched_wheel.base import DEFAULT_CACHE_DIR, BaseRequest, download_base
from patched_wheel.overlay import DEFAULT_OVERLAY

OVERLAY = DEFAULT_OVERLAY

# The tag every real base of the tests has: one Python, one platform, per release.
TEST_PYTHON = "3.11"
TEST_PLATFORM = "manylinux_2_28_x86_64"

# 2.9.0 lacks release_host_and_device_memory: the build must refuse it.
UNSUPPORTED_RELEASE = "2.9.0"


def fetch(release: str, python: str = TEST_PYTHON, platform: str = TEST_PLATFORM) -> Path:
    """The official wheel, from the cache or downloaded into it."""
    found = download_base(BaseRequest(release, platform, python), DEFAULT_CACHE_DIR)
    assert found is not None
    return found


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


SYNTHETIC_UTILS = '''\
import gc

import torch


def deallocate_module(module, delete_module=True):
    module.to("cpu")


def release_host_and_device_memory():
    gc.collect()
'''

SYNTHETIC_CALLER = '''\
from torch_tensorrt.dynamo.utils import deallocate_module


def compile(gm):
    deallocate_module(gm, delete_module=False)
'''


def make_wheel(
    directory: Path,
    files: Optional[Mapping[str, bytes]] = None,
    *,
    version: str = "2.14.0",
    tag: str = "cp311-cp311-manylinux_2_28_x86_64",
    record: Optional[Mapping[str, bytes]] = None,
    date_time: tuple[int, int, int, int, int, int] = (2020, 2, 2, 12, 0, 0),
) -> Path:
    """A small wheel of ``torch_tensorrt``: ``files`` as stored, ``record`` as RECORD hashes.

    ``record`` gives, for some paths, the bytes whose hash RECORD lists instead of the
    stored bytes, to make a wheel whose files were edited after RECORD was written.
    """
    dist_info = f"torch_tensorrt-{version}.dist-info"
    members: Dict[str, bytes] = {
        "torch_tensorrt/__init__.py": b"",
        "torch_tensorrt/dynamo/utils.py": SYNTHETIC_UTILS.encode(),
        "torch_tensorrt/dynamo/_compiler.py": SYNTHETIC_CALLER.encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.4\nName: torch_tensorrt\nVersion: {version}\n"
            "Requires-Dist: torch>=2.0\n\nDescription.\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
    }
    members.update(files or {})
    listed = dict(members, **(record or {}))
    rows = [f"{name},{record_hash(data)},{len(data)}" for name, data in listed.items()]
    rows.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    path = directory / f"torch_tensorrt-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time), data)
    return path
