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

from patched_wheel.labels import OverlayReleases, label_for, load_overlay_releases
from patched_wheel.overlay import read_overlay
from patched_wheel.plan import BuildOrigin, PatchPlan, plan_patch
from patched_wheel.policy import FIXES, Fix
from patched_wheel.provenance import SourceRevision, source_revision
from patched_wheel.provenance_record import tool_sha256
from patched_wheel.splice import OverlayParts
from patched_wheel.wheelfile import DateTime, Entry, Wheel, new_entry, write_wheel, zip_date_time

__all__ = [
    "build_origin",
    "build_patched_wheel",
    "current_label",
]

logger = logging.getLogger(__name__)


def current_label(overlay: OverlayParts, releases: Optional[OverlayReleases] = None) -> str:
    """The label of ``overlay``: its number in the registry, or a development label."""
    return label_for(overlay.sha256, releases or load_overlay_releases())


def build_origin(
    overlay: OverlayParts,
    *,
    revision: Optional[SourceRevision] = None,
    releases: Optional[OverlayReleases] = None,
) -> BuildOrigin:
    """This build's origin: the overlay's label, the repository's revision, the tool's sha256."""
    return BuildOrigin(
        label=current_label(overlay, releases),
        overlay_sha256=overlay.sha256,
        revision=revision or source_revision(),
        tool_sha256=tool_sha256(),
    )


def patched_entries(base: Wheel, plan: PatchPlan, written_time: Optional[DateTime]) -> List[Entry]:
    """Every member of the patched wheel, as the plan lists them: the base's bytes copied
    as they are, new bytes with ``written_time`` where given, else their entry's own time."""
    entries = []
    for member in plan.members():
        if member.data is not None:
            entries.append(
                new_entry(member.info, member.data, name=member.name, date_time=written_time)
            )
        else:
            info = member.info
            data = b"" if info.is_dir() else base.read(info.filename)
            entries.append(new_entry(info, data, name=member.name, raw=base.raw(info)))
    return entries


def build_patched_wheel(
    base: Wheel,
    *,
    out_dir: Path,
    overlay: Optional[OverlayParts] = None,
    origin: Optional[BuildOrigin] = None,
    fixes: Sequence[Fix] = FIXES,
    source_date_epoch: Optional[str] = None,
) -> Path:
    """Write the patched wheel of ``base`` into ``out_dir`` and return its path.

    Args:
        base: The verified base wheel; its bytes are the ones copied.
        out_dir: Folder for the patched wheel (created if missing).
        overlay: The parsed overlay; ``None`` reads the repository's.
        origin: The label and the record's revision and tool; ``None`` works them out
            (:func:`build_origin`).
        fixes: The fixes whose upstream functions the base must have.
        source_date_epoch: Time for the members written anew; ``None`` reads
            ``SOURCE_DATE_EPOCH``, and without it they keep the replaced member's time.

    Raises:
        PatchError: For any base, overlay or setting the build refuses; no wheel is written.
    """
    if source_date_epoch is None:
        source_date_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    written_time = zip_date_time(source_date_epoch)
    overlay = overlay or read_overlay()
    plan = plan_patch(base, overlay, origin=origin or build_origin(overlay), fixes=fixes)
    entries = patched_entries(base, plan, written_time)
    patched = write_wheel(Path(out_dir), plan.filename, entries, dist_info=plan.dist_info)
    logger.debug("patched wheel: %s", patched)
    return patched
