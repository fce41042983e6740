"""Where a patched wheel says it came from, checked: its record against its name, the lock,
the registry of overlays; and the overlay it names, found in this repository.

``verify`` starts here: the record inside the wheel (:mod:`patched_wheel.provenance_record`)
names the base wheel (file name and sha256) and the overlay (sha256 and the revision that built
it). A record that disagrees with the wheel's own name, with the lock or with the registry is
refused before anything is fetched, each with a message naming which; the overlay is then
looked for in the clone's history (:mod:`patched_wheel.history`), so that a wheel built at one
revision verifies from a clone at any later one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping, Optional

from patched_wheel import PatchError
from patched_wheel.history import find_overlay
from patched_wheel.labels import (
    OverlayReleases,
    label_number,
    label_sha256_prefix,
    split_label,
)
from patched_wheel.lock import Lock
from patched_wheel.overlay import overlay_from_bytes
from patched_wheel.plan import BuildOrigin
from patched_wheel.provenance import SourceRevision
from patched_wheel.provenance_record import ProvenanceRecord, parse_record, record_member
from patched_wheel.splice import OverlayParts
from patched_wheel.wheelfile import parse_wheel_name

__all__ = [
    "check_base_sha256",
    "check_record",
    "official_name_of",
    "read_patched_record",
    "recorded_origin",
    "recorded_overlay",
]

logger = logging.getLogger(__name__)


def read_patched_record(members: Mapping[str, bytes], filename: str) -> ProvenanceRecord:
    """The provenance record among a patched wheel's ``members``.

    Raises:
        PatchError: If the wheel has none (built before records, or removed) or it is not
            one the build writes.
    """
    name = parse_wheel_name(filename)
    member = record_member(f"{name.written_name}-{name.written_version}.dist-info")
    if member not in members:
        raise PatchError(
            f"{filename}: has no provenance record ({member}), so nothing says which base and "
            "overlay made it; a wheel built before records (label +memfix1) or whose record "
            "was removed cannot be verified: build it again from the official wheel"
        )
    return parse_record(members[member], f"{filename}:{member}")


def _disagreement(filename: str, what: str, recorded: str, actual: str) -> PatchError:
    return PatchError(
        f"{filename}: the provenance record disagrees with the wheel: it names {what} "
        f"{recorded!r}, the wheel {actual!r}; the record or the wheel was altered, do not "
        "install it"
    )


def _check_label(record: ProvenanceRecord, filename: str, releases: OverlayReleases) -> None:
    """The label names the record's overlay: by its number in the registry, or its sha256."""
    number = label_number(record.label)
    registered = releases.by_number.get(number) if number is not None else None
    prefix = label_sha256_prefix(record.label)
    if prefix is not None and not record.overlay_sha256.startswith(prefix):
        raise _disagreement(filename, "the overlay sha256", record.overlay_sha256, record.label)
    if prefix is None and registered is not None and registered != record.overlay_sha256:
        raise PatchError(
            f"{filename}: its label +{record.label} is the released overlay {number}, sha256 "
            f"{registered} in the registry, but its record names the overlay "
            f"{record.overlay_sha256}; the record or the wheel was altered, do not install it"
        )


def check_record(
    record: ProvenanceRecord, filename: str, *, lock: Lock, releases: OverlayReleases
) -> str:
    """Check the record against the wheel's name, the registry and the lock; return the
    official wheel's file name.

    Raises:
        PatchError: Naming the field that disagrees.
    """
    version = parse_wheel_name(filename).written_version
    if record.version != version:
        raise _disagreement(filename, "the version", record.version, version)
    label = split_label(version)[1] or ""
    if record.label != label:
        raise _disagreement(filename, "the label", record.label, label)
    official_name = official_name_of(filename)
    if record.base_wheel != official_name:
        raise _disagreement(filename, "the base wheel", record.base_wheel, official_name)
    _check_label(record, filename, releases)
    locked = lock.wheels.get(official_name)
    if locked is not None and locked != record.base_sha256:
        raise PatchError(
            f"{filename}: its provenance record names the base {official_name} with sha256 "
            f"{record.base_sha256}, and the lock's official file has {locked}: the record "
            "names a base that is not the official wheel; do not install it"
        )
    return official_name


def official_name_of(patched_name: str) -> str:
    """The official wheel's file name that a patched wheel's name implies.

    Raises:
        PatchError: If the version carries no label of this fork.
    """
    name = parse_wheel_name(patched_name)
    base_version, label = split_label(name.written_version)
    if label is None:
        raise PatchError(
            f"{patched_name}: its version {name.written_version!r} carries no label of this "
            "fork, so this repository's build did not make it"
        )
    return f"{name.written_name}-{base_version}-{name.written_tags}.whl"


def check_base_sha256(record: ProvenanceRecord, sha256: str) -> None:
    """The base wheel at hand is the one the record names."""
    if sha256 != record.base_sha256:
        raise PatchError(
            f"the base wheel {record.base_wheel} has sha256 {sha256}, and the patched wheel's "
            f"record names {record.base_sha256}: this base did not make it; give the base "
            "the record names (--base-wheel) or leave --base-wheel out to fetch it"
        )


def recorded_overlay(
    record: ProvenanceRecord, overlay: Optional[OverlayParts], repository: Path
) -> OverlayParts:
    """The overlay the record names: ``overlay`` if given (its sha256 must match), else found
    in ``repository``'s working tree or git history.

    Raises:
        PatchError: If the given overlay is another one, or none in the repository matches.
    """
    if overlay is not None:
        if overlay.sha256 != record.overlay_sha256:
            raise PatchError(
                f"--overlay has sha256 {overlay.sha256}, but the patched wheel's record names "
                f"the overlay {record.overlay_sha256}: this overlay did not make it; give that "
                "overlay, or leave --overlay out to find it in the repository's history"
            )
        return overlay
    found = find_overlay(repository, record.overlay_sha256, record.revision)
    if found is None:
        raise PatchError(
            f"the overlay the wheel's record names (sha256 {record.overlay_sha256}, built at "
            f"revision {record.revision}) is in neither {str(repository)!r}'s working tree nor "
            f"its git history: fetch that revision (git fetch origin {record.revision}) or "
            f"give the overlay file with --overlay PATH"
        )
    logger.info("overlay: %s", found.where)
    return overlay_from_bytes(found.data, found.where)


def recorded_origin(record: ProvenanceRecord) -> BuildOrigin:
    """The origin the build had, as the record states it (to plan the same wheel again)."""
    return BuildOrigin(
        label=record.label,
        overlay_sha256=record.overlay_sha256,
        revision=SourceRevision(record.revision, record.dirty),
        tool_sha256=record.tool_sha256,
    )
