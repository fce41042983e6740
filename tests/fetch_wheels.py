"""Fetch everything the tests take from a package index, so that the suite then runs offline.

    python tests/fetch_wheels.py                      # once, with the network
    PIP_NO_INDEX=1 UV_OFFLINE=1 python -m pytest      # then, with no network at all

It puts every official wheel the tests use into the build's cache (``.cache/base-wheels``,
checked against the lock as the build checks it), and the wheels of the build's own
requirements (``build-system.requires``: packaging, pip) into ``.cache/build-requirements``,
where the tests' isolated builds (``pip wheel .`` as the README runs it) find them: the tests'
``conftest.py`` adds that folder to ``PIP_FIND_LINKS``. Tests that ask the
live PyPI what it offers now (marker ``pypi``) are skipped when ``PIP_NO_INDEX`` is set.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tools"), str(HERE / "patched_wheel"), str(HERE / "installed")]

from installed_helpers import INDEX_BASES, releases_to_test  # noqa: E402
from patched_wheel import PatchError  # noqa: E402
from patched_wheel.lock import load_lock  # noqa: E402
from patched_wheel.paths import DEFAULT_CACHE_DIR, REPOSITORY  # noqa: E402
from patched_wheel.policy import DEFAULT_RELEASE, SUPPORTED_RELEASES  # noqa: E402
from patched_wheel.request import BaseRequest  # noqa: E402
from patched_wheel.resolve import ensure_cached  # noqa: E402
from wheel_helpers import TEST_PLATFORM, TEST_PYTHON, UNSUPPORTED_RELEASE  # noqa: E402

# Where the tests' isolated builds find packaging and pip without an index.
BUILD_REQUIREMENTS_DIR = REPOSITORY / ".cache" / "build-requirements"
BUILD_REQUIREMENTS = ("packaging>=24", "pip")


def wheels_the_tests_use() -> List[BaseRequest]:
    """Every official wheel a test or fixture takes from the cache (``None``: running)."""
    requests = [BaseRequest(r, TEST_PLATFORM, TEST_PYTHON) for r in SUPPORTED_RELEASES]
    requests += [BaseRequest(UNSUPPORTED_RELEASE, TEST_PLATFORM, TEST_PYTHON)]
    requests += [BaseRequest("2.14.0", "win_amd64", TEST_PYTHON)]  # CRLF sources, test_build
    # test_entry_points: the running platform and Python, and the variables' cases.
    requests += [BaseRequest(r) for r in (DEFAULT_RELEASE, "2.13.0", *releases_to_test())]
    requests += [BaseRequest("2.12.1", None, "3.11"), BaseRequest("2.11.0", None, None)]
    requests += [
        BaseRequest("2.11.0", "manylinux_2_28_aarch64", "3.12"),
        BaseRequest("2.14.0", "win_amd64", "3.11"),
    ]
    return requests + list(INDEX_BASES)


def fetch_bases() -> int:
    """Fetch the official wheels into the cache; the number of failures."""
    lock, failures = load_lock(), 0
    for request in dict.fromkeys(wheels_the_tests_use()):
        try:
            print(ensure_cached(request, lock=lock, cache_dir=DEFAULT_CACHE_DIR).name)
        except PatchError as error:  # e.g. a Python or platform PyPI has no wheel for
            print(f"skipped {request.describe()}: {error}")
            failures += "lock has no" not in str(error) and "not built for" not in str(error)
    return failures


def fetch_build_requirements() -> int:
    """pip's wheels of the build requirements, for this Python; pip's exit status."""
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest"]
    command += [str(BUILD_REQUIREMENTS_DIR), *BUILD_REQUIREMENTS]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(1 if fetch_bases() or fetch_build_requirements() else 0)
