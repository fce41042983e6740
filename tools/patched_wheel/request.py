"""What an official wheel to fetch is, and which wheel tags serve it: pure, no network.

A :class:`BaseRequest` names a release, a platform tag and a Python version (``None``: the
running one). :func:`acceptable_tags` turns it into the set of wheel tags that serve it, which
the lock, the cache and the index's list of files are matched against. Kept apart from
:mod:`patched_wheel.download` so that what the user asks for (``choice``, ``installed``) is
decided without importing the network.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import FrozenSet, List, Optional, Sequence

from packaging import tags
from patched_wheel.policy import DEFAULT_RELEASE, PROJECT

__all__ = ["BaseChoice", "BaseRequest", "acceptable_tags", "platforms_serving"]


@dataclass(frozen=True)
class BaseRequest:
    """An official wheel to fetch: a release, and a platform and Python (``None``: running)."""

    release: str
    platform: Optional[str] = None
    python: Optional[str] = None

    def describe(self) -> str:
        platform = self.platform or "this platform"
        python = f"Python {self.python}" if self.python else "this Python"
        return f"{PROJECT}=={self.release} for {python} on {platform}"


@dataclass(frozen=True)
class BaseChoice:
    """A wheel file (``wheel``), or else a release to fetch (``request``).

    ``wheel_source`` names where the wheel's path came from, for messages; ``unlocked``
    lets a base the lock does not know through.
    """

    request: BaseRequest = field(default_factory=lambda: BaseRequest(DEFAULT_RELEASE))
    wheel: Optional[Path] = None
    wheel_source: str = "--base-wheel"
    unlocked: bool = False


def platforms_serving(platform: Optional[str]) -> List[str]:
    """Platform tags a wheel may carry to serve ``platform`` (older manylinux included).

    ``None`` is the running platform. ``manylinux_2_34_x86_64`` is served by every
    ``manylinux_2_N_x86_64`` up to 2.34, as pip would accept on such a machine.
    """
    if platform is None:
        return list(tags.platform_tags())
    parts = platform.split("_")
    if platform.startswith("manylinux_") and len(parts) >= 4 and parts[2].isdigit():
        major, minor, arch = parts[1], int(parts[2]), "_".join(parts[3:])
        return [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    return [platform]


def acceptable_tags(request: BaseRequest) -> FrozenSet[tags.Tag]:
    """The tags a wheel may carry to serve ``request``."""
    if request.python is None:
        python: Sequence[int] = sys.version_info[:2]
    else:
        python = tuple(int(part) for part in request.python.split("."))
    return frozenset(tags.cpython_tags(python, platforms=platforms_serving(request.platform)))
