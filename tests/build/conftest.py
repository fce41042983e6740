"""Fixtures of the patched-wheel build's tests (helpers in ``build_helpers``)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Dict, Iterator, Mapping, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_helpers import UNSUPPORTED_RELEASE, fetch, make_wheel  # noqa: E402

from patched_wheel.base import SUPPORTED_RELEASES  # noqa: E402
from patched_wheel.overlay import load_overlay  # noqa: E402

BUILD_VARIABLES = (
    "TORCHTRT_BASE_WHEEL",
    "TORCHTRT_BASE_VERSION",
    "TORCHTRT_BASE_PLATFORM",
    "TORCHTRT_BASE_PYTHON",
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
def dest_dir(tmp_path: Path) -> Iterator[Path]:
    """An empty output folder; the test may check it stays empty on refusal."""
    folder = tmp_path / "dist"
    folder.mkdir()
    yield folder
