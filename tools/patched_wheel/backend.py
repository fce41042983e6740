"""The PEP 517 build backend of ``pip install .``: setuptools, with the base's metadata.

pip reads a project's metadata before it builds the wheel (``prepare_metadata_for_build_wheel``)
and resolves the requirements from that metadata, not from the wheel. setuptools alone would
hand pip this repository's ``pyproject.toml`` metadata, which has no ``Requires-Dist``: ``pip
install .`` would then install the patched wheel without torch or TensorRT. This backend
answers that hook with the METADATA the patched wheel carries (the base's, its ``Version`` the
patched one), so pip resolves the official wheel's requirements (``Requires-Dist``,
``Requires-Python``) exactly as it would for the official wheel. Every other hook is
setuptools', whose ``bdist_wheel`` (``setup.py``) builds the patched wheel.

Cost: the hook resolves the base, so the official wheel is fetched (or found in the cache) and
checked before pip resolves the requirements, as the wheel build would do right after.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Union

from patched_wheel import PatchError
from patched_wheel.build import build_origin
from patched_wheel.choice import choice_from_environment
from patched_wheel.lock import load_lock
from patched_wheel.overlay import read_overlay
from patched_wheel.paths import REPOSITORY
from patched_wheel.plan import plan_patch
from patched_wheel.provenance import REVISION_FILE, write_revision_file
from patched_wheel.resolve import resolve_base
from setuptools.build_meta import build_sdist as setuptools_build_sdist  # type: ignore[import-untyped]
from setuptools.build_meta import (
    build_wheel,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

__all__ = [
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "patched_metadata",
    "prepare_metadata_for_build_wheel",
]

ConfigSettings = Optional[Dict[str, Union[str, List[str], None]]]


def patched_metadata() -> tuple[str, bytes]:
    """The patched wheel's ``.dist-info`` name and METADATA, for the base the environment
    chooses (the same choice, checks and plan as the wheel build)."""
    base = resolve_base(choice_from_environment(os.environ), lock=load_lock())
    overlay = read_overlay()
    plan = plan_patch(base, overlay, origin=build_origin(overlay))
    return plan.dist_info, plan.new_members[f"{plan.dist_info}/METADATA"]


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Write ``<name>-<version>.dist-info/METADATA`` as the patched wheel will carry it."""
    try:
        dist_info, metadata = patched_metadata()
    except PatchError as error:
        raise SystemExit(f"error: {error}") from None
    folder = Path(metadata_directory) / dist_info
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_bytes(metadata)
    return dist_info


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """setuptools' sdist, carrying the repository's revision in ``.source-revision.json``.

    An sdist has no ``.git``; the wheel built from it names the revision the sdist was made
    from (its provenance record), read from that file. In a git checkout the file is written
    for the sdist (``MANIFEST.in`` takes it) and removed after; a tree without git (an
    unpacked sdist) passes on the file it has.
    """
    from_git = (REPOSITORY / ".git").exists()
    if from_git:
        write_revision_file(REPOSITORY)
    try:
        name: str = setuptools_build_sdist(sdist_directory, config_settings)
    finally:
        if from_git:
            (REPOSITORY / REVISION_FILE).unlink(missing_ok=True)
    return name
