"""The one route from the user's choice to a patched wheel, shared by every entry point.

``python tools/patched_wheel build``, ``pip wheel .``, ``pip install .``, ``python -m build``
and ``uv build`` (the last four through :mod:`patched_wheel.backend`) all call
:func:`make_patched_wheel`: the base is resolved once, planned, and written. The metadata hook
of the backend calls :func:`patched_metadata`, which takes the same base and the same plan, so
the METADATA pip resolves from is the METADATA the wheel carries.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Tuple

from patched_wheel.build import build_origin, build_patched_wheel
from patched_wheel.lock import Lock
from patched_wheel.overlay import read_overlay
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.plan import plan_patch
from patched_wheel.request import BaseChoice
from patched_wheel.resolve import resolve_base
from patched_wheel.splice import OverlayParts

__all__ = ["make_patched_wheel", "patched_metadata"]

logger = logging.getLogger(__name__)


def make_patched_wheel(
    choice: BaseChoice,
    *,
    out_dir: Path,
    lock: Lock,
    cache_dir: Path = DEFAULT_CACHE_DIR,
    overlay: Optional[OverlayParts] = None,
) -> Path:
    """Resolve the chosen base (once), and write its patched wheel into ``out_dir``.

    Raises:
        PatchError: For any base, overlay or setting refused; no wheel is written then.
    """
    base = resolve_base(choice, lock=lock, cache_dir=cache_dir)
    return build_patched_wheel(base, out_dir=out_dir, overlay=overlay)


def patched_metadata(
    choice: BaseChoice,
    *,
    lock: Lock,
    cache_dir: Path = DEFAULT_CACHE_DIR,
    overlay: Optional[OverlayParts] = None,
) -> Tuple[str, bytes]:
    """The ``.dist-info`` name and METADATA the patched wheel of the chosen base carries."""
    base = resolve_base(choice, lock=lock, cache_dir=cache_dir)
    overlay = overlay or read_overlay()
    plan = plan_patch(base, overlay, origin=build_origin(overlay))
    return plan.dist_info, plan.new_members[f"{plan.dist_info}/METADATA"]
