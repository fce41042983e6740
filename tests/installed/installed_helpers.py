"""Helpers of the installed-package tests: build, install and probe a patched wheel.

A patched wheel is built with the repository's build from the official wheel of the running
Python and platform (downloaded by pip into ``.cache/base-wheels``, or found there, so the
tests run offline where that folder was filled beforehand), installed with
``pip install --no-deps --target``, and imported by ``probe.py`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_CACHE_DIR, DEFAULT_OVERLAY, DEFAULT_RELEASE, REPOSITORY
from patched_wheel.fetch import cached_base
from patched_wheel.lock import load_lock, open_base
from patched_wheel.patch import build_patched_wheel
from patched_wheel.settings import BaseChoice, BaseRequest

from tests.patched_wheel.wheel_helpers import official_wheel

T = TypeVar("T")
R = TypeVar("R")

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"
STAND_IN = HERE / "stand_in"

# Two releases where input-copy applies (engine-bytes too, in 2.11.0), and the default.
INSTALLED_RELEASES = ("2.10.0", "2.11.0", DEFAULT_RELEASE)

# Environment variable naming other releases (comma-separated), e.g. the one whose torch
# requirement matches the torch of a GPU machine.
RELEASES_VARIABLE = "TORCHTRT_INSTALLED_RELEASES"

# Environment variable giving the size in bytes of the CUDA model the GPU test offloads.
GPU_BYTES_VARIABLE = "TORCHTRT_INSTALLED_GPU_BYTES"
DEFAULT_GPU_BYTES = 2 * 1024**3

# Variables of the caller's shell that would change what the probe sees.
CLEARED_VARIABLES = ("TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM", "TORCHTRT_OFFLOAD_PINNED_BOUNCE")


def releases_to_test() -> Tuple[str, ...]:
    """The releases the installed-package tests install: the default three, or the variable's."""
    chosen = os.environ.get(RELEASES_VARIABLE, "")
    return tuple(r.strip() for r in chosen.split(",") if r.strip()) or INSTALLED_RELEASES


class PatchedWheels:
    """Patched wheels built once per test session, by base wheel, from any thread."""

    def __init__(self, dest_dir: Path) -> None:
        self.dest_dir = dest_dir
        self._lock = threading.Lock()
        self._building: Dict[str, "Future[Path]"] = {}

    def of(self, request: BaseRequest) -> Optional[Path]:
        """The patched wheel of ``request``'s official wheel; ``None`` if PyPI has none (the
        lock, refreshed from PyPI, knows no such file)."""
        path = official_wheel(request)
        if path is None:
            return None
        base = open_base(BaseChoice(wheel=path), lock=load_lock())
        with self._lock:
            future = self._building.get(base.filename)
            owner = future is None
            if future is None:
                future = self._building[base.filename] = Future()
        if owner:
            try:
                folder = self.dest_dir / base.filename[: -len(".whl")]
                folder.mkdir()
                future.set_result(build_patched_wheel(base, out_dir=folder))
            except BaseException as error:
                future.set_exception(error)
        return future.result()


def in_parallel(function: Callable[[T], R], items: Sequence[T]) -> List[R]:
    """``function`` of each item, in threads (the work is in subprocesses and zlib)."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        return list(pool.map(function, items))


def hide_native_runtime(target: Path) -> List[str]:
    """Remove upstream's C++ libraries from an installed copy; the names removed.

    They need TensorRT's libraries, which no machine of these tests has. Without them upstream
    takes its python-only runtime, as it does for a user who installs no C++ runtime.
    """
    lib = target / "torch_tensorrt" / "lib"
    removed = sorted(
        path for pattern in ("libtorchtrt*.so", "torchtrt*.dll") for path in lib.glob(pattern)
    )
    for path in removed:
        path.unlink()
    return [path.name for path in removed]


def install(patched_wheel: Path, target: Path) -> List[str]:
    """``pip install --no-deps --target`` the wheel, offline; the native libraries hidden."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "--quiet",
        "--target",
        str(target),
        str(patched_wheel),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return hide_native_runtime(target)


def probe(target: Path, out: Path, *, gpu_bytes: int = 0) -> Dict[str, Any]:
    """Run ``probe.py`` on an installed package in a subprocess; its JSON report."""
    environment = {k: v for k, v in os.environ.items() if k not in CLEARED_VARIABLES}
    # The installed package and the stand-in tensorrt come first on the probe's import path.
    environment["PYTHONPATH"] = os.pathsep.join([str(target.resolve()), str(STAND_IN.resolve())])
    command = [
        sys.executable,
        str(PROBE),
        "--overlay",
        str(DEFAULT_OVERLAY),
        "--out",
        str(out),
        "--gpu-bytes",
        str(gpu_bytes),
    ]
    completed = subprocess.run(
        command, capture_output=True, text=True, env=environment, check=False
    )
    assert completed.returncode == 0 and out.is_file(), completed.stdout + completed.stderr
    report: Dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert "error" not in report, report["error"]
    return report


# Official bases of the index and verify tests: the newest release on every platform of the
# matrix (two Pythons on one), and an older release beside it.
INDEX_BASES = (
    BaseRequest(DEFAULT_RELEASE, "manylinux_2_28_x86_64", "3.11"),
    BaseRequest(DEFAULT_RELEASE, "manylinux_2_28_x86_64", "3.12"),
    BaseRequest(DEFAULT_RELEASE, "manylinux_2_28_aarch64", "3.12"),
    BaseRequest(DEFAULT_RELEASE, "win_amd64", "3.12"),
    BaseRequest("2.12.0", "manylinux_2_28_x86_64", "3.11"),
)


def plain_index(folder: Path) -> Path:
    """``folder/simple``: the pages of the wheels in ``folder``, as PyPI would serve them.

    Made directly, not by ``index`` (which lists only this fork's verified patched wheels), for
    tests that need an index of any wheels, official ones included, to see what pip picks.
    """
    from patched_wheel.index import index_pages, indexed_wheel

    wheels = [indexed_wheel(path.read_bytes(), path.name) for path in sorted(folder.glob("*.whl"))]
    for relative, page in index_pages(wheels).items():
        (folder / "simple" / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / "simple" / relative).write_text(page)
    return folder / "simple"
