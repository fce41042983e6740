"""Fetch everything the tests take from a package index, so that the suite then runs offline.

    python -m tests.fetch_wheels                  # not run: once, with the network
    PIP_NO_INDEX=1 UV_OFFLINE=1 python -m pytest  # then, with no network at all

It puts every official wheel the tests use into the build's cache (``.cache/base-wheels``,
pinned by the lock's sha256 as the build fetches them), and the wheels of the build's own
requirements (``build-system.requires``: packaging, pip) into ``.cache/build-requirements``,
where the tests' isolated builds find them (the tests' ``conftest.py`` adds that folder to
``PIP_FIND_LINKS``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import List, Tuple

import evidence  # noqa: F401  (first: the build tool under its one name, evidence's docstring)

# isort: split
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_CACHE_DIR, DEFAULT_RELEASE, REPOSITORY, SUPPORTED_RELEASES
from patched_wheel.fetch import cached_base
from patched_wheel.lock import load_lock
from patched_wheel.settings import BaseRequest

from tests.installed import installed_helpers

BUILD_REQUIREMENTS_DIR = REPOSITORY / ".cache" / "build-requirements"
BUILD_REQUIREMENTS = ("packaging>=24", "pip")


def wheels_the_tests_use() -> List[BaseRequest]:
    """Every official wheel a test or fixture takes from the cache (``None``: running)."""
    requests = [BaseRequest(r, "manylinux_2_28_x86_64", "3.11") for r in SUPPORTED_RELEASES]
    requests += [BaseRequest("2.14.0", "win_amd64", "3.11"), BaseRequest(DEFAULT_RELEASE)]
    rtx = ("manylinux_2_28_x86_64", "3.11", "torch-tensorrt-rtx")
    requests += [BaseRequest(r, *rtx) for r in ("2.11.0", "2.14.0")]
    requests += [BaseRequest(r) for r in installed_helpers.releases_to_test()]
    return requests + list(installed_helpers.INDEX_BASES)


def fetch_bases() -> Tuple[int, int, int]:
    """Fetch the official wheels into the cache, each file once: (failed, downloaded, there)."""
    lock, names = load_lock(), {}
    for request in dict.fromkeys(wheels_the_tests_use()):
        name = lock.official_name(request)
        if name is None:
            print(f"skipped {request.describe()}: {lock.unknown_request(request)}")
        else:
            names.setdefault(name, request)  # two requests (one the running Python's) may meet
    there = [name for name in names if (DEFAULT_CACHE_DIR / name).is_file()]
    failures = 0
    for name, request in names.items():
        if name in there:
            continue
        try:
            print(cached_base(request, name, lock.wheels[name], DEFAULT_CACHE_DIR).name)
        except PatchError as error:
            print(f"failed {request.describe()}: {error}")
            failures += 1
    return failures, len(names) - len(there) - failures, len(there)


def fetch_build_requirements() -> int:
    """pip's wheels of the build requirements, for this Python; pip's exit status."""
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest"]
    command += [str(BUILD_REQUIREMENTS_DIR), *BUILD_REQUIREMENTS]
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    failed, downloaded, there = fetch_bases()
    pip_status = fetch_build_requirements()
    print(
        f"fetch_wheels: {downloaded + there} official wheels in .cache/base-wheels ({downloaded} "
        f"downloaded, {there} already there{f', {failed} failed' if failed else ''}); build "
        f"requirements in .cache/build-requirements{'' if pip_status == 0 else ' (pip failed)'}"
    )
    sys.exit(1 if failed or pip_status else 0)
