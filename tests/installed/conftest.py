"""Fixtures of the installed-package, index and verify tests (helpers in ``installed_helpers``).

Patched wheels are built once per session and shared; the releases under test are built,
installed and probed in parallel (each probe is a subprocess of its own), once per run for all
of pytest-xdist's workers (``build_once``; ``-n auto`` would otherwise probe every release on
every worker at once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from patched_wheel.settings import BaseRequest

from tests.conftest import build_once
from tests.installed.installed_helpers import (
    INDEX_BASES,
    PatchedWheels,
    in_parallel,
    install,
    probe,
    releases_to_test,
)


@dataclass(frozen=True)
class InstalledRelease:
    """A release's patched wheel installed into ``target``, and the probe's report on it."""

    target: Path
    hidden: List[str]
    report: Dict[str, Any]


@pytest.fixture(scope="session")
def patched_wheels(tmp_path_factory: pytest.TempPathFactory) -> PatchedWheels:
    return PatchedWheels(tmp_path_factory.mktemp("patched"))


@pytest.fixture(scope="session")
def installed_releases(
    patched_wheels: PatchedWheels, tmp_path_factory: pytest.TempPathFactory
) -> Dict[str, Optional[InstalledRelease]]:
    """Each release under test, for this Python and platform; ``None`` where PyPI has none."""

    def install_and_probe(folder: Path, release: str) -> Optional[InstalledRelease]:
        patched = patched_wheels.of(BaseRequest(release))
        if patched is None:
            return None
        target = folder / f"installed-{release}"
        hidden = install(patched, target)
        return InstalledRelease(target, hidden, probe(target, folder / f"probe-{release}.json"))

    def install_and_probe_all(folder: Path) -> None:
        releases = releases_to_test()
        found = in_parallel(lambda release: install_and_probe(folder, release), releases)
        rows = {r: i and [str(i.target), i.hidden, i.report] for r, i in zip(releases, found)}
        (folder / "releases.json").write_text(json.dumps(rows))

    folder = build_once(tmp_path_factory, "installed", install_and_probe_all)
    found = json.loads((folder / "releases.json").read_text())
    return {r: f and InstalledRelease(Path(f[0]), f[1], f[2]) for r, f in found.items()}


@pytest.fixture(scope="session")
def installed_release(
    installed_releases: Dict[str, Optional[InstalledRelease]],
) -> Callable[[str], InstalledRelease]:
    """``installed_release(release)``; skips where PyPI has no wheel for this Python."""

    def get(release: str) -> InstalledRelease:
        found = installed_releases[release]
        if found is None:
            pytest.skip(f"PyPI has no official {release} wheel for this Python and platform")
        return found

    return get


@pytest.fixture(scope="session")
def probe_report(
    installed_release: Callable[[str], InstalledRelease],
) -> Callable[[str], Dict[str, Any]]:
    """``probe_report(release)``: the probe's report on the installed release."""
    return lambda release: installed_release(release).report


@pytest.fixture(scope="session")
def index_wheels(
    patched_wheels: PatchedWheels, tmp_path_factory: pytest.TempPathFactory
) -> Dict[BaseRequest, Path]:
    """Patched wheels of ``INDEX_BASES`` (three platforms), linked into one folder."""
    folder = tmp_path_factory.mktemp("index-wheels")
    built = in_parallel(patched_wheels.of, INDEX_BASES)
    linked = {}
    for request, patched in zip(INDEX_BASES, built):
        assert patched is not None, request
        linked[request] = folder / patched.name
        linked[request].symlink_to(patched)
    return linked
