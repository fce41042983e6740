"""Build one patched wheel: plan the patch from a verified base, then write it.

:func:`build_patched_wheel` takes a base already read and verified
(:func:`patched_wheel.base.read_base` or :func:`patched_wheel.base.verify_base`), decides the
patch as data (:func:`patched_wheel.plan.plan_patch`) and hands the members to the one writer
(:func:`patched_wheel.wheelfile.write_wheel`). A refusal raises
:class:`~patched_wheel.PatchError` and leaves no wheel behind.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence

from patched_wheel.overlay import read_overlay
from patched_wheel.plan import PatchPlan, patched_version, plan_patch
from patched_wheel.policy import FIXES, LOCAL_LABEL, Fix
from patched_wheel.splice import OverlayParts
from patched_wheel.wheelfile import DateTime, Entry, Wheel, new_entry, write_wheel, zip_date_time

__all__ = ["build_patched_wheel", "patched_entries", "patched_version"]

logger = logging.getLogger(__name__)


def patched_entries(base: Wheel, plan: PatchPlan, written_time: Optional[DateTime]) -> List[Entry]:
    """Every member of the patched wheel: the base's, renamed where planned, new bytes where
    planned (with ``written_time`` where given, else the replaced member's own time)."""
    entries = []
    for info in base.infos:
        if info.filename in plan.dropped:
            continue
        name = plan.renamed(base, info.filename)
        if name in plan.new_members:
            data = plan.new_members[name]
            entries.append(new_entry(info, data, name=name, date_time=written_time))
        else:
            data = b"" if info.is_dir() else base.read(info.filename)
            entries.append(new_entry(info, data, name=name, raw=base.raw(info)))
    return entries


def build_patched_wheel(
    base: Wheel,
    *,
    out_dir: Path,
    overlay: Optional[OverlayParts] = None,
    label: str = LOCAL_LABEL,
    fixes: Sequence[Fix] = FIXES,
    source_date_epoch: Optional[str] = None,
) -> Path:
    """Write the patched wheel of ``base`` into ``out_dir`` and return its path.

    Args:
        base: The verified base wheel; its bytes are the ones copied.
        out_dir: Folder for the patched wheel (created if missing).
        overlay: The parsed overlay; ``None`` reads the repository's.
        label: The local version label added to the base's version.
        fixes: The fixes whose upstream functions the base must have.
        source_date_epoch: Time for the members written anew; ``None`` reads
            ``SOURCE_DATE_EPOCH``, and without it they keep the replaced member's time.

    Raises:
        PatchError: For any base, overlay or setting the build refuses; no wheel is written.
    """
    if source_date_epoch is None:
        source_date_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    written_time = zip_date_time(source_date_epoch)
    plan = plan_patch(base, overlay or read_overlay(), label=label, fixes=fixes)
    entries = patched_entries(base, plan, written_time)
    patched = write_wheel(Path(out_dir), plan.filename, entries, dist_info=plan.dist_info)
    logger.debug("patched wheel: %s", patched)
    return patched
