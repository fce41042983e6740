"""What tests outside this folder import: the label a build of the current overlay gets here
(tests/docs compares the README's), and the one way to an official wheel (lock-checked)."""

import os
from pathlib import Path
from typing import Optional

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_CACHE_DIR, REPOSITORY
from patched_wheel.fetch import cached_base
from patched_wheel.lock import load_lock
from patched_wheel.patch import current_label
from patched_wheel.settings import BaseRequest

LABEL = current_label()


def official_wheel(request: BaseRequest, cache_dir: Path = DEFAULT_CACHE_DIR) -> Optional[Path]:
    """The cached official wheel of ``request``, downloaded where missing; ``None`` if PyPI
    has none (the lock, refreshed from PyPI, knows no such file). A run that cannot download
    fails with what to do, instead of the build's advice on choosing a base."""
    lock = load_lock()
    name = lock.official_name(request)
    if name is None:
        return None
    if (cache_dir / name).is_file():
        return cache_dir / name
    why = "PIP_NO_INDEX or UV_OFFLINE is set"
    if not (os.environ.get("PIP_NO_INDEX") or os.environ.get("UV_OFFLINE")):
        try:
            return cached_base(request, name, lock.wheels[name], cache_dir)
        except PatchError as error:
            why = str(error).splitlines()[0].rstrip(":")
    pytest.fail(
        f"{name} is not in {os.path.relpath(cache_dir, REPOSITORY)} and this run cannot "
        f"download: run 'python3 -m tests.fetch_wheels' once with network ({why})",
        pytrace=False,
    )


def fetch(
    release: str,
    python: str = "3.11",
    platform: str = "manylinux_2_28_x86_64",
    distribution: str = "torch-tensorrt",
) -> Path:
    """The official wheel of ``release``, from the cache or downloaded (tests using it are
    marked ``network``)."""
    path = official_wheel(BaseRequest(release, platform, python, distribution))
    assert path is not None, f"the lock has no {release} wheel for {python} on {platform}"
    return path
