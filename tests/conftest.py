"""Markers and environment shared by every test folder.

``network``: the test needs official wheels from the package index, itself or through a fixture
that fetches them (marked here from the fixtures it uses, so that ``-m "not network"`` never
downloads). Once ``python -m tests.fetch_wheels`` has filled the cache, these tests pass with no
network. ``pypi``: the test asks the live PyPI what it offers now; an offline run
(``PIP_NO_INDEX`` set) skips it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Iterator, List

import pytest
from filelock import FileLock

REPOSITORY = Path(__file__).resolve().parent.parent

# Fixtures that fetch official wheels (into the cache, where the fetch script puts them).
FETCHING_FIXTURES = frozenset(
    {"base_wheels", "unsupported_wheel", "patched_wheels", "installed_releases", "index_wheels"}
)

# Wheels of build-system.requires for isolated builds without an index (tests/fetch_wheels.py).
BUILD_REQUIREMENTS_DIR = REPOSITORY / ".cache" / "build-requirements"


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    offline = bool(os.environ.get("PIP_NO_INDEX"))
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if FETCHING_FIXTURES & fixtures:
            item.add_marker(pytest.mark.network)
        if offline and item.get_closest_marker("pypi") is not None:
            item.add_marker(pytest.mark.skip(reason="asks the live PyPI; this run is offline"))


@pytest.fixture(scope="session", autouse=True)
def build_requirements_offline() -> Iterator[None]:
    """pip's isolated builds find packaging and pip in the fetched folder, where there is one."""
    with pytest.MonkeyPatch.context() as patch:
        if BUILD_REQUIREMENTS_DIR.is_dir():
            kept = os.environ.get("PIP_FIND_LINKS", "").strip()
            patch.setenv(
                "PIP_FIND_LINKS", " ".join(filter(None, [kept, str(BUILD_REQUIREMENTS_DIR)]))
            )
        yield


def build_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, built by ``build(folder)`` once for all of pytest-xdist's workers.

    Under pytest-xdist every worker's temporary folders share one parent, this run's; the
    first worker to take the lock builds there (what a failed attempt left is removed first),
    and the others find ``name`` complete (marked by ``.done``) and reuse it. Without xdist the
    run's own temporary folder is used. A session fixture calls this, so each worker asks once.
    """
    shared = factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (folder / ".done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / ".done").touch()
    return folder
