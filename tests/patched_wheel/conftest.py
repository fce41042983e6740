"""Fixtures of the patched-wheel build's tests (helpers in ``wheel_helpers``).

The official wheels the tests need are fetched once, up front, by the session fixture
``base_wheels``; every test that uses them then runs offline. Tests that reach the package
index themselves are marked ``network``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Callable, Dict, Iterator, Mapping, Optional

import pytest
from patched_wheel.overlay import load_overlay
from patched_wheel.policy import SUPPORTED_RELEASES
from wheel_helpers import UNSUPPORTED_RELEASE, fetch, make_wheel

BUILD_VARIABLES = (
    "TORCHTRT_BASE_WHEEL",
    "TORCHTRT_BASE_VERSION",
    "TORCHTRT_BASE_PLATFORM",
    "TORCHTRT_BASE_PYTHON",
    "TORCHTRT_BASE_UNLOCKED",
    "SOURCE_DATE_EPOCH",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No build variable of the caller's shell leaks into a test."""
    for name in BUILD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def base_wheels() -> Dict[str, Path]:
    """Release -> official wheel (cp311, manylinux_2_28_x86_64) for every supported release."""
    return {release: fetch(release) for release in SUPPORTED_RELEASES}


@pytest.fixture(scope="session")
def unsupported_wheel() -> Path:
    return fetch(UNSUPPORTED_RELEASE)


@pytest.fixture(scope="session")
def overlay_module() -> ModuleType:
    """The overlay imported on its own (it needs torch only)."""
    return load_overlay()


@pytest.fixture
def synthetic_wheel(tmp_path: Path) -> Callable[..., Path]:
    """Make small wheels in a folder of their own: ``synthetic_wheel(files, **options)``."""
    folder = tmp_path / "bases"
    folder.mkdir()

    def make(files: Optional[Mapping[str, bytes]] = None, **options: object) -> Path:
        return make_wheel(folder, files, **options)  # type: ignore[arg-type]

    return make


@pytest.fixture
def out_dir(tmp_path: Path) -> Iterator[Path]:
    """An empty output folder; the test may check it stays empty on refusal."""
    folder = tmp_path / "dist"
    folder.mkdir()
    yield folder
