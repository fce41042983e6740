"""The base wheel, read once and verified: lock first, then every rule of the wheel format.

This is the core's door for a base: the bytes come from the caller (a file read once, a
download), are hashed and checked against the lock, then verified member by member by
:func:`~patched_wheel.wheelfile.read_wheel`. The same bytes are the ones later copied into the
patched wheel. Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from packaging.utils import canonicalize_name
from patched_wheel import PatchError
from patched_wheel.lock import Lock
from patched_wheel.policy import PROJECT
from patched_wheel.wheelfile import Wheel, parse_wheel_name, read_wheel, read_wheel_file

__all__ = ["read_base", "verify_base"]


def verify_base(data: bytes, filename: str, *, lock: Lock, unlocked: bool = False) -> Wheel:
    """The base wheel ``filename`` with bytes ``data``, checked against the lock and verified.

    Raises:
        PatchError: For a base that is not torch-tensorrt, that the lock refuses, or that
            breaks a rule of the wheel format.
    """
    name = parse_wheel_name(filename)
    if name.name != canonicalize_name(PROJECT):
        raise PatchError(f"{filename} is not a {PROJECT} wheel; give an official {PROJECT} wheel")
    lock.check(filename, hashlib.sha256(data).hexdigest(), unlocked=unlocked)
    return read_wheel(data, filename)


def read_base(path: Path, *, lock: Lock, unlocked: bool = False, what: str = "base wheel") -> Wheel:
    """The base wheel in the file ``path``, read once (``what`` names where it came from)."""
    return verify_base(read_wheel_file(path, what=what), path.name, lock=lock, unlocked=unlocked)
