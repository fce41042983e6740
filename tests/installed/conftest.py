"""Fixtures of the installed-package, index and verify tests (helpers in ``installed_helpers``).

Patched wheels are built once per session and shared; the releases under test are built,
installed and probed in parallel (each probe is a subprocess of its own), once per run: under
pytest-xdist the first worker to ask does it, under a file lock, and the others read its
report (``-n auto`` would otherwise probe every release on every worker at once).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from installed_helpers import (
    INDEX_BASES,
    PatchedWheels,
    in_parallel,
    install,
    probe,
    releases_to_test,
)
from patched_wheel.settings import BaseRequest


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

    def install_and_probe(release: str) -> Optional[InstalledRelease]:
        patched = patched_wheels.of(BaseRequest(release))
        if patched is None:
            return None
        target = shared / f"installed-{release}"
        hidden = install(patched, target)
        return InstalledRelease(target, hidden, probe(target, shared / f"probe-{release}.json"))

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "installed"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        except ImportError:  # Windows: every worker probes for itself
            pass
        done = shared / "releases.json"
        if done.exists():
            found = json.loads(done.read_text())
            return {r: f and InstalledRelease(Path(f[0]), f[1], f[2]) for r, f in found.items()}
        releases = releases_to_test()
        installed = dict(zip(releases, in_parallel(install_and_probe, releases)))
        rows = {r: i and [str(i.target), i.hidden, i.report] for r, i in installed.items()}
        done.write_text(json.dumps(rows))
        return installed


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
