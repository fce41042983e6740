"""What the build supports and how it names its output: releases, platforms, label, fixes.

Everything a user-facing text states about support (the CLI's help, the docs, the errors) is
derived from these constants, never typed again elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple, Union

from packaging.version import InvalidVersion, Version

__all__ = [
    "DEFAULT_RELEASE",
    "FIXES",
    "Fix",
    "HookNames",
    "LABEL_NAME",
    "PLATFORMS",
    "PROJECT",
    "PYTHONS",
    "SUPPORTED_RELEASES",
    "TARGET",
    "UNLOCKED_OPT_IN",
    "canonical_python",
    "canonical_release",
    "supported_releases_text",
]

PROJECT = "torch-tensorrt"

# Releases whose utils.py has every function the fixes hook into (2.10.0 added the last one).
SUPPORTED_RELEASES = ("2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
DEFAULT_RELEASE = SUPPORTED_RELEASES[-1]

# Platforms and Python versions the matrix and lock commands ask the index for.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")

# How a user lets a base the lock does not know through, as messages say it.
UNLOCKED_OPT_IN = "set TORCHTRT_BASE_UNLOCKED=1 (or pass build --unlocked)"

# The module of the base that the overlay is spliced into.
TARGET = "torch_tensorrt/dynamo/utils.py"

# The first segment of the PEP 440 local label of every patched wheel. The label is
# ``<LABEL_NAME>.<N>``, N the overlay's number in the registry of released overlays
# (patched_wheel.labels); the first wheels carried ``memfix1`` alone, which sorts below every
# numbered label (PEP 440 compares local segments one by one, a longer label above its prefix).
# It is not ``memfix.<N>``: ``memfix`` sorts below ``memfix1``, so those would lose to the old
# wheels under ``pip install -U``.
LABEL_NAME = "memfix1"

# A hook: an upstream function's name, or the names it has had or may have (any one will do).
HookNames = Union[str, Tuple[str, ...]]


@dataclass(frozen=True)
class Fix:
    """One fix of the overlay, and the upstream functions through which it takes effect.

    A hook given as a tuple of names accepts any one of them, so an upstream release that
    renames a hooked function is supported by naming the new name here (and defining it in
    the overlay), not by a change of the build.
    """

    title: str
    hooks: Tuple[HookNames, ...]

    def alternatives(self) -> Tuple[Tuple[str, ...], ...]:
        """Each hook as the tuple of names that satisfy it."""
        return tuple((hook,) if isinstance(hook, str) else tuple(hook) for hook in self.hooks)


FIXES = (
    Fix("offload without doubling memory", ("deallocate_module",)),
    Fix("host heap trimmed after each engine build", ("release_host_and_device_memory",)),
)


def supported_releases_text() -> str:
    return ", ".join(SUPPORTED_RELEASES)


def _canonical_or_none(value: str) -> Optional[str]:
    try:
        version = Version(value.strip())
    except InvalidVersion:
        return None
    if version.epoch or version.pre or version.post or version.dev or len(version.release) != 3:
        return None
    return str(version)


def canonical_release(value: str) -> str:
    """``value`` if it is a canonical release such as ``2.14.0`` (or ``2.9.0+cu128``).

    Raises:
        ValueError: Saying why, with the canonical form where one exists (``v2.14.0``,
            ``' 2.14.0'`` and ``2.14.00`` all suggest ``2.14.0``). Callers add the variable
            or option the value came from.
    """
    canonical = _canonical_or_none(value)
    if canonical == value:
        return value
    if canonical is not None:
        raise ValueError(f"{value!r} is not a canonical release; write {canonical!r}")
    raise ValueError(
        f"{value!r} is not a release such as {DEFAULT_RELEASE!r}; supported base releases "
        f"are {supported_releases_text()}"
    )


def canonical_python(value: str) -> str:
    """``value`` if it is a Python version written ``3.N``.

    Raises:
        ValueError: For anything else.
    """
    if not re.fullmatch(r"3\.(0|[1-9][0-9]?)", value):
        raise ValueError(f"{value!r} is not a Python version such as '3.12'; give major.minor")
    return value
