"""Build entry point: ``pip wheel . --no-deps -w dist`` writes a patched torch_tensorrt wheel.

Nothing is compiled. The ``bdist_wheel`` command below takes the official wheel of the base
release (downloaded by pip, or given), splices the overlay ``py/torch_tensorrt/dynamo/utils.py``
into it with ``tools/patched_wheel``, and leaves the patched wheel in the dist folder.
``python -m build`` builds the same wheel through the sdist, which carries the build tool,
the overlay and the lock.

The base comes from the environment (``patched_wheel.choice``):

* ``TORCHTRT_BASE_WHEEL=<path>``: that official wheel file (offline);
* ``TORCHTRT_BASE_VERSION=<x.y.z>`` or ``installed`` (default: the newest supported release),
  with optional ``TORCHTRT_BASE_PLATFORM`` (e.g. ``manylinux_2_28_aarch64``) and
  ``TORCHTRT_BASE_PYTHON`` (e.g. ``3.12``); unset, they mean the running platform and Python;
* ``TORCHTRT_BASE_UNLOCKED=1``: build a base the lock of official wheels does not know.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))

from patched_wheel import PatchError  # noqa: E402
from patched_wheel.__main__ import configure_logging  # noqa: E402
from patched_wheel.build import build_patched_wheel, current_label, patched_version  # noqa: E402
from patched_wheel.choice import choice_from_environment  # noqa: E402
from patched_wheel.lock import load_lock  # noqa: E402
from patched_wheel.overlay import read_overlay  # noqa: E402
from patched_wheel.resolve import resolve_base  # noqa: E402
from patched_wheel.wheelfile import parse_wheel_name  # noqa: E402


def _version() -> str:
    """The patched wheel's version, known before anything is downloaded."""
    choice = choice_from_environment(os.environ)
    label = current_label(read_overlay())
    if choice.wheel is not None:
        return patched_version(parse_wheel_name(choice.wheel.name).written_version, label)
    return patched_version(choice.request.release, label)


class bdist_patched_wheel(bdist_wheel):  # type: ignore[misc]
    """``bdist_wheel`` that writes the patched wheel of the base into the dist folder."""

    def run(self) -> None:
        configure_logging()
        try:
            choice = choice_from_environment(os.environ)
            base = resolve_base(choice, lock=load_lock())
            patched = build_patched_wheel(base, out_dir=Path(self.dist_dir))
        except PatchError as error:
            raise SystemExit(f"error: {error}") from None
        print(f"patched wheel: {patched}")


try:
    VERSION = _version()
except PatchError as error:
    raise SystemExit(f"error: {error}") from None

setup(version=VERSION, cmdclass={"bdist_wheel": bdist_patched_wheel})
