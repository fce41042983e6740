"""Fixtures of the tool's tests: the official wheels (network), synthetic ones, a release repo."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Dict, Tuple

import pytest
from helpers import make_wheel, release_repo, write_lock
from installed_helpers import official_wheel
from patched_wheel.config import SUPPORTED_RELEASES, VARIABLES, BaseRequest
from patched_wheel.splice import load_overlay


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No build variable of the caller's shell leaks into a test."""
    for name in (*VARIABLES, "SOURCE_DATE_EPOCH"):
        monkeypatch.delenv(name, raising=False)


def fetch(release: str, python: str = "3.11", platform: str = "manylinux_2_28_x86_64") -> Path:
    path = official_wheel(BaseRequest(release, platform, python))
    assert path is not None, f"the lock has no {release} wheel for {python} on {platform}"
    return path


@pytest.fixture(scope="session")
def base_wheels() -> Dict[str, Path]:
    """Release -> official wheel (cp311, manylinux_2_28_x86_64) of every supported release."""
    return {release: fetch(release) for release in SUPPORTED_RELEASES}


@pytest.fixture(scope="session")
def overlay_module() -> ModuleType:
    return load_overlay()


@pytest.fixture
def released(tmp_path: Path) -> Tuple[Path, Path, Path, Path]:
    """(release repo, synthetic base, its lock file, the cache holding it)."""
    cache = tmp_path / "cache"
    base = make_wheel(cache)
    return release_repo(tmp_path), base, write_lock(tmp_path / "lock.json", base), cache
