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
from patched_wheel.choice import choice_from_environment
from patched_wheel.lock import load_lock
from patched_wheel.overlay import read_overlay
from patched_wheel.plan import plan_patch
from patched_wheel.resolve import resolve_base
from setuptools.build_meta import (  # type: ignore[import-untyped]
    build_sdist,
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
    plan = plan_patch(base, read_overlay())
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
