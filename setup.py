"""Build entry point: ``pip wheel . --no-deps -w dist`` writes a patched torch_tensorrt wheel.

Nothing is compiled. The ``bdist_wheel`` command below takes the official wheel of the base
release (downloaded by pip, or given), splices the overlay ``py/torch_tensorrt/dynamo/utils.py``
into it with ``tools/patched_wheel``, and leaves the patched wheel in the dist folder.

The base comes from the environment:

* ``TORCHTRT_BASE_WHEEL=<path>``: that official wheel file (offline);
* ``TORCHTRT_BASE_VERSION=<x.y.z>`` (default: the newest supported release), with optional
  ``TORCHTRT_BASE_PLATFORM`` (e.g. ``manylinux_2_28_aarch64``) and ``TORCHTRT_BASE_PYTHON``
  (e.g. ``3.12``); unset, they mean the running platform and Python.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from packaging.utils import parse_wheel_filename
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))

from patched_wheel import PatchError  # noqa: E402
from patched_wheel.base import base_from_environment, download_base  # noqa: E402
from patched_wheel.build import build_patched_wheel, patched_version  # noqa: E402
from patched_wheel.lock import load_lock  # noqa: E402


def _version() -> str:
    """The patched wheel's version, known before anything is downloaded."""
    base = base_from_environment(os.environ)
    if isinstance(base, Path):
        return patched_version(str(parse_wheel_filename(base.name)[1]))
    return patched_version(base.version)


class bdist_patched_wheel(bdist_wheel):  # type: ignore[misc]
    """``bdist_wheel`` that writes the patched wheel of the base into the dist folder."""

    def run(self) -> None:
        try:
            base = base_from_environment(os.environ)
            if not isinstance(base, Path):
                found = download_base(base)
                assert found is not None
                base = found
            patched = build_patched_wheel(base, dest_dir=Path(self.dist_dir), lock=load_lock())
        except PatchError as error:
            raise SystemExit(f"error: {error}") from None
        print(f"patched wheel: {patched}")


try:
    VERSION = _version()
except PatchError as error:
    raise SystemExit(f"error: {error}") from None

setup(version=VERSION, cmdclass={"bdist_wheel": bdist_patched_wheel})
