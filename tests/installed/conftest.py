"""Fixtures of the installed-package, index and verify tests (helpers in ``installed_helpers``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from installed_helpers import build_index_wheels, install, patched_wheel_for, probe  # noqa: E402
from patched_wheel.base import BaseRequest  # noqa: E402

Installed = Tuple[Path, List[str]]


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installed]:
    """``installed_package(release)``: (target folder, native libraries hidden), made once.

    Skips where PyPI has no official wheel of the release for this Python and platform.
    """
    made: Dict[str, Installed] = {}

    def get(release: str) -> Installed:
        if release not in made:
            wheels = tmp_path_factory.mktemp(f"patched-{release}")
            patched = patched_wheel_for(release, wheels)
            if patched is None:
                pytest.skip(f"PyPI has no official {release} wheel for this Python and platform")
            target = tmp_path_factory.mktemp(f"installed-{release}")
            made[release] = (target, install(patched, target))
        return made[release]

    return get


@pytest.fixture(scope="session")
def probe_report(
    installed_package: Callable[[str], Installed], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Dict[str, Any]]:
    """``probe_report(release)``: the probe's report on the installed release, made once."""
    reports: Dict[str, Dict[str, Any]] = {}

    def get(release: str) -> Dict[str, Any]:
        if release not in reports:
            target, _ = installed_package(release)
            out = tmp_path_factory.mktemp(f"probe-{release}") / "report.json"
            reports[release] = probe(target, out)
        return reports[release]

    return get


@pytest.fixture(scope="session")
def index_wheels(tmp_path_factory: pytest.TempPathFactory) -> Dict[BaseRequest, Path]:
    """Patched wheels of ``INDEX_BASES`` (three platforms, two Pythons), in one folder."""
    return build_index_wheels(tmp_path_factory.mktemp("index-wheels"))
