"""Fixtures of the tool's tests: the official wheels (network), synthetic ones, a release repo."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Dict, Tuple

import pytest
from patched_wheel.config import SUPPORTED_RELEASES
from patched_wheel.settings import VARIABLES

from benchmarks.harness import load_overlay
from tests.patched_wheel.helpers import RTX, make_wheel, release_repo, write_lock
from tests.patched_wheel.wheel_helpers import fetch


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No build variable of the caller's shell leaks into a test."""
    for name in (*VARIABLES, "SOURCE_DATE_EPOCH"):
        monkeypatch.delenv(name, raising=False)


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


@pytest.fixture
def both(tmp_path: Path) -> Tuple[Path, Path, Path]:
    """(release repo, lock, cache) with a synthetic base of each distribution, one release."""
    cache = tmp_path / "cache"
    bases = [make_wheel(cache, name=name) for name in ("torch_tensorrt", RTX)]
    return release_repo(tmp_path), write_lock(tmp_path / "lock.json", *bases), cache
