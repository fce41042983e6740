"""Show that a patched wheel is the official wheel plus this repository's overlay, and no more.

A user who installs a patched wheel from someone else's index cannot read a wheel's worth of
files to trust it. :func:`verify_patched_wheel` reads the wheel's provenance record, which
names the official wheel (file name and sha256) and the overlay (sha256 and revision), checks
it against the wheel's name, the lock and the registry of overlays
(:mod:`patched_wheel.origin`), takes that official wheel (from pip, or given), finds that
overlay in this repository's history (or is given it), plans the same wheel again with them,
and compares the two wheels file by file:

* every file of the official wheel is in the patched one, byte for byte, under the renamed
  ``.dist-info`` directory;
* ``torch_tensorrt/dynamo/utils.py`` is exactly what this repository's overlay makes of the
  official file (the splice is run again here);
* ``METADATA`` differs only in its ``Version`` header, ``RECORD`` lists every file with its
  sha256, and RECORD's signatures are gone (they cannot survive a new RECORD);
* the provenance record is the one the build writes for that base, overlay and revision;
* nothing else is added.

The result lists every other difference (added, missing, changed) and carries the unified diff
of ``utils.py`` from the official wheel to the patched one, which is the whole of the change.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.console import escaped
from patched_wheel.labels import OverlayReleases, load_overlay_releases
from patched_wheel.lock import Lock
from patched_wheel.origin import (
    check_base_sha256,
    check_record,
    official_name_of,
    read_patched_record,
    recorded_origin,
    recorded_overlay,
)
from patched_wheel.paths import DEFAULT_CACHE_DIR, REPOSITORY
from patched_wheel.plan import PatchPlan, plan_patch
from patched_wheel.policy import TARGET
from patched_wheel.provenance_record import record_member
from patched_wheel.request import BaseRequest
from patched_wheel.resolve import fetch_base
from patched_wheel.splice import OverlayParts
from patched_wheel.wheelfile import (
    MAX_RECORD_BYTES,
    Wheel,
    check_sizes,
    parse_wheel_name,
    read_wheel,
    read_wheel_file,
    read_zip,
)

__all__ = [
    "MAX_DIFFED_BYTES",
    "SHOWN_DIFFERENCES",
    "SHOWN_DIFF_LINES",
    "Difference",
    "PatchedMembers",
    "Verification",
    "compare_members",
    "expected_members",
    "format_report",
    "listing_refusal",
    "official_wheel_name",
    "verdict",
    "verify_patched_wheel",
]

logger = logging.getLogger(__name__)

# What a report shows without --full-diff: the diff's first lines and the first differences,
# the rest counted. Benefit: a tampered wheel cannot flood a terminal (a 33 MiB wheel once
# printed 104 MiB). Cost: the rest takes --full-diff.
SHOWN_DIFF_LINES = 400
SHOWN_DIFFERENCES = 50

# Files larger than this are neither kept in memory nor diffed (difflib's time grows with the
# square of the lines); the report names them with their sha256. The official utils.py is
# about 30 KB, METADATA a few KB.
MAX_DIFFED_BYTES = 1 << 20

# The longest line of a difference's detail that reaches the screen.
_MAX_DETAIL_CHARACTERS = 300


@dataclass(frozen=True)
class Difference:
    """A file where the patched wheel is not the official wheel plus the overlay."""

    kind: str  # "added", "missing" or "changed"
    path: str
    detail: str = ""

    def describe(self) -> str:
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_patched_wheel` found."""

    patched_wheel: str
    official_wheel: str
    official_sha256: str
    in_lock: bool
    identical: int
    utils_diff: str
    differences: Tuple[Difference, ...]

    @property
    def verified(self) -> bool:
        return not self.differences


def official_wheel_name(patched_name: str) -> str:
    """The file name of the official wheel a patched wheel was built from.

    ``torch_tensorrt-2.14.0+memfix1.2-cp311-...whl`` gives ``torch_tensorrt-2.14.0-cp311-...whl``
    and ``2.9.0+cu130.memfix1.2`` gives ``2.9.0+cu130``; every label the fork has used is
    understood (:func:`patched_wheel.labels.split_label`).

    Raises:
        PatchError: If the name is not a wheel's, or its version carries no label of the fork.
    """
    return official_name_of(patched_name)


def _request_for(official_name: str) -> BaseRequest:
    """What to ask pip for to get the official wheel named ``official_name``."""
    name = parse_wheel_name(official_name)
    python, _, platform = name.written_tags.split("-")[-3:]
    if not (python.startswith("cp") and python[2:].isdigit() and len(python) >= 4):
        raise PatchError(
            f"{official_name}: cannot tell its Python from the tag {python!r}; give the "
            "official wheel with --base-wheel"
        )
    return BaseRequest(name.written_version, platform, f"{python[2]}.{python[3:]}")


def _official_base(
    official_name: str,
    base_wheel: Optional[Path],
    *,
    lock: Lock,
    cache_dir: Path,
    unlocked: bool,
) -> Wheel:
    """The official wheel, given or fetched, checked against the lock and read once."""
    if base_wheel is not None and not base_wheel.is_file():
        raise PatchError(f"--base-wheel {str(base_wheel)!r} is not a file; give the official wheel")
    if base_wheel is not None and base_wheel.name != official_name:
        raise PatchError(
            f"--base-wheel is {base_wheel.name}, but the patched wheel was built from "
            f"{official_name}; give that file"
        )
    if base_wheel is not None:
        return read_base(base_wheel, lock=lock, unlocked=unlocked, what="--base-wheel")
    base = fetch_base(
        _request_for(official_name), lock=lock, cache_dir=cache_dir, unlocked=unlocked
    )
    if base.filename != official_name:
        raise PatchError(
            f"the index gave {base.filename}, not the official {official_name}; download it "
            "yourself and give it with --base-wheel PATH"
        )
    return base


@dataclass(frozen=True)
class PatchedMembers:
    """The patched wheel as verify compares it: every member's sha256, and the bytes of the
    few files the report shows (``utils.py``, METADATA) where they are small enough to diff.

    Only these are kept, so that verify holds one unpacked member at a time, whatever the
    wheel unpacks to.
    """

    sha256: Mapping[str, str]
    shown: Mapping[str, bytes]


def _is_shown(name: str) -> bool:
    return name == TARGET or name.endswith(".dist-info/METADATA")


def _patched_members(data: bytes, filename: str) -> PatchedMembers:
    """The patched wheel's members, read strictly (as the build reads a base: every byte of
    the zip accounted for, sizes checked from the headers before anything is unpacked)."""
    archive = read_zip(data, filename)
    check_sizes(archive.infos, len(data), filename)
    digests: Dict[str, str] = {}
    shown: Dict[str, bytes] = {}
    for member in archive.members:
        name = member.info.filename
        limit = MAX_DIFFED_BYTES if _is_shown(name) else None
        hasher, kept = archive.digest(member, keep_up_to=limit)
        digests[name] = hasher.hexdigest()
        if kept is not None:
            shown[name] = kept
    return PatchedMembers(digests, shown)


def expected_members(plan: PatchPlan) -> Dict[str, bytes]:
    """What the patched wheel must hold, RECORD aside: the build's own plan of the base."""
    return plan.contents()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _changed_detail(path: str, expected: bytes, actual: Optional[bytes], sha256: str) -> str:
    if path == TARGET:
        return "not what this repository's overlay makes of the official file"
    if path.endswith(".dist-info/METADATA") and actual is not None:
        lines = difflib.ndiff(
            expected.decode("utf-8", "replace").splitlines(),
            actual.decode("utf-8", "replace").splitlines(),
        )
        changed = [line[:_MAX_DETAIL_CHARACTERS] for line in lines if line[:1] in "+-"]
        return "lines differ from the official METADATA with Version changed: " + "; ".join(
            changed[:6]
        )
    return f"sha256 {sha256}, expected {_sha256(expected)}"


def compare_members(
    expected: Mapping[str, bytes], actual: PatchedMembers, *, record_name: str
) -> List[Difference]:
    """Every file where ``actual`` is not ``expected`` (``record_name`` is checked elsewhere)."""
    present = set(actual.sha256)
    differences = [
        Difference("missing", name) for name in sorted(set(expected) - present - {record_name})
    ]
    differences += [
        Difference("added", name) for name in sorted(present - set(expected) - {record_name})
    ]
    for name in sorted(set(expected) & present):
        if _sha256(expected[name]) != actual.sha256[name]:
            detail = _changed_detail(
                name, expected[name], actual.shown.get(name), actual.sha256[name]
            )
            differences.append(Difference("changed", name, detail))
    return sorted(differences, key=lambda d: (d.path, d.kind))


def _source_lines(source: bytes) -> List[str]:
    """The lines of a source as Python reads them, ended by ``\n`` only (``splitlines`` would
    also end them at a carriage return, form feed or separator a line may hold)."""
    parts = source.decode("utf-8", "replace").split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _utils_diff(official: Wheel, patched: PatchedMembers) -> str:
    """The unified diff of ``utils.py``, or one line saying why there is none."""
    if TARGET in patched.sha256 and TARGET not in patched.shown:
        return f"(the patched {TARGET} is larger than {MAX_DIFFED_BYTES} bytes: no diff made)\n"
    before = _source_lines(official.read(TARGET))
    after = _source_lines(patched.shown.get(TARGET, b""))
    return "".join(difflib.unified_diff(before, after, f"official/{TARGET}", f"patched/{TARGET}"))


def _record_problem(data: bytes, filename: str) -> Optional[str]:
    """What is wrong with the patched wheel as a wheel (RECORD, structure), if anything; no
    member is kept, so that this second reading holds one member at a time."""
    try:
        read_wheel(data, filename, keep=lambda name: False)
    except PatchError as error:
        return str(error)
    return None


def _differences(
    expected: Mapping[str, bytes], data: bytes, filename: str
) -> Tuple[List[Difference], PatchedMembers]:
    """Every way the patched wheel (``data``) is not ``expected``, and its members."""
    members = _patched_members(data, filename)
    name = parse_wheel_name(filename)
    record_name = f"{name.written_name}-{name.written_version}.dist-info/RECORD"
    differences = compare_members(expected, members, record_name=record_name)
    record_problem = _record_problem(data, filename)
    if record_problem is not None:
        differences.append(Difference("changed", record_name, record_problem))
    return differences, members


def _identical(plan: PatchPlan, expected: Mapping[str, bytes], patched: PatchedMembers) -> int:
    """How many of the official files that must stay unchanged (the plan copies them) are the
    official ones."""
    unchanged = [member.name for member in plan.members() if member.data is None]
    return sum(1 for name in unchanged if patched.sha256.get(name) == _sha256(expected[name]))


def _read_patched(path: Path) -> bytes:
    """The patched wheel's bytes, read once (with the same size cap as a base)."""
    if not path.is_file():
        raise PatchError(f"{str(path)!r} is not a file; give the patched wheel's path")
    return read_wheel_file(path, what="the patched wheel")


def _record_members(data: bytes, filename: str) -> Dict[str, bytes]:
    """The patched wheel's provenance record alone, by name (the zip read strictly, and its
    sizes checked from the headers before the record is unpacked)."""
    archive = read_zip(data, filename)
    check_sizes(archive.infos, len(data), filename)
    name = parse_wheel_name(filename)
    wanted = record_member(f"{name.written_name}-{name.written_version}.dist-info")
    found = [member for member in archive.members if member.info.filename == wanted]
    if any(member.info.file_size > MAX_RECORD_BYTES for member in found):
        raise PatchError(f"{filename}: its provenance record is larger than a record can be")
    return {wanted: archive.unpack(member) for member in found}


@dataclass(frozen=True)
class _Sources:
    """Where the base and the overlay a record names are taken from."""

    base_wheel: Optional[Path]
    overlay: Optional[OverlayParts]
    cache_dir: Path
    unlocked: bool
    repository: Path


def _recorded_plan(
    filename: str,
    data: bytes,
    sources: _Sources,
    lock: Lock,
    releases: Optional[OverlayReleases],
) -> PatchPlan:
    """The build's plan of the base and overlay that the wheel's record names, each checked:
    the record against the wheel's name, lock and registry, the base and overlay by sha256."""
    official_wheel_name(filename)  # a wheel of this fork at all, before unpacking it
    record = read_patched_record(_record_members(data, filename), filename)
    releases = releases or load_overlay_releases()
    official_name = check_record(record, filename, lock=lock, releases=releases)
    official = _official_base(
        official_name,
        sources.base_wheel,
        lock=lock,
        cache_dir=sources.cache_dir,
        unlocked=sources.unlocked,
    )
    check_base_sha256(record, official.sha256)
    overlay = recorded_overlay(record, sources.overlay, sources.repository)
    return plan_patch(official, overlay, origin=recorded_origin(record))


def verify_patched_wheel(
    patched_wheel: Path,
    *,
    base_wheel: Optional[Path] = None,
    lock: Lock,
    overlay: Optional[OverlayParts] = None,
    cache_dir: Path = DEFAULT_CACHE_DIR,
    unlocked: bool = False,
    repository: Path = REPOSITORY,
    releases: Optional[OverlayReleases] = None,
) -> Verification:
    """Compare a patched wheel with the official wheel plus the overlay its record names.

    ``base_wheel`` and ``overlay`` are given, or fetched and found (``repository``'s tree or
    history); each must be the one the record names. ``unlocked`` accepts a base the lock
    does not know; ``releases`` is the registry of overlays (``None``: the repository's).

    Raises:
        PatchError: If the wheel cannot be read, its record is missing or disagrees with it,
            the lock or the registry, or the base or overlay cannot be had (differences
            between the wheels are in the result).
    """
    # 1. The patched wheel, read once; the plan of the base and overlay its record names.
    patched_wheel = Path(patched_wheel)
    data = _read_patched(patched_wheel)
    sources = _Sources(base_wheel, overlay, cache_dir, unlocked, repository)
    plan = _recorded_plan(patched_wheel.name, data, sources, lock, releases)
    # 2. What the patched wheel must hold (the build's plan), and where it does not.
    expected = expected_members(plan)
    differences, patched_members = _differences(expected, data, patched_wheel.name)
    # 3. The summary: files that are the official ones byte for byte, and the diff.
    return Verification(
        patched_wheel.name,
        plan.base.filename,
        plan.base.sha256,
        in_lock=plan.base.filename in lock.wheels,
        identical=_identical(plan, expected, patched_members),
        utils_diff=_utils_diff(plan.base, patched_members),
        differences=tuple(differences),
    )


def _diff_lines(diff: str, full_diff: bool) -> List[str]:
    # A CRLF source (the Windows wheels) keeps its carriage returns out of sight.
    lines = [escaped(line.removesuffix("\r")) for line in diff.split("\n")]
    lines = lines[:-1] if lines[-1:] == [""] else lines
    if full_diff or len(lines) <= SHOWN_DIFF_LINES:
        return lines
    hidden = len(lines) - SHOWN_DIFF_LINES
    return lines[:SHOWN_DIFF_LINES] + [
        f"... {hidden} more lines of the diff (--full-diff shows them)"
    ]


def _difference_lines(differences: Sequence[Difference], full_diff: bool) -> List[str]:
    lines = [escaped(difference.describe()) for difference in differences]
    if full_diff or len(lines) <= SHOWN_DIFFERENCES:
        return lines
    hidden = len(lines) - SHOWN_DIFFERENCES
    return lines[:SHOWN_DIFFERENCES] + [f"... {hidden} more differences (--full-diff lists them)"]


def verdict(verification: Verification) -> str:
    """The report's last line: what the comparison found, in one line."""
    if verification.verified:
        return "verified: the official wheel plus this repository's overlay, nothing else"
    count = len(verification.differences)
    return (
        f"NOT verified: {escaped(verification.patched_wheel)} differs from the official wheel "
        f"plus this repository's overlay in {count} {'file' if count == 1 else 'files'} "
        "(listed above); do not install it"
    )


def listing_refusal(
    path: Path, *, lock: Lock, overlay: Optional[OverlayParts] = None, cache_dir: Path
) -> Optional[str]:
    """Why an index may not list the wheel at ``path``, in one line, or ``None`` where verify
    accepts it (the check the ``index`` and ``matrix`` commands give
    :func:`~patched_wheel.index.write_simple_index`)."""
    try:
        verification = verify_patched_wheel(path, lock=lock, overlay=overlay, cache_dir=cache_dir)
    except PatchError as error:
        return str(error)
    return None if verification.verified else verdict(verification)


def format_report(verification: Verification, *, full_diff: bool = False) -> str:
    """The text the ``verify`` command prints: what was checked, the diff, the differences,
    and the verdict as the last line.

    Every name and line from the wheels is shown escaped (:func:`escaped`), so that nothing in
    them can move the cursor or erase a line; the diff and the list of differences are cut
    to their first lines unless ``full_diff``.
    """
    lock_note = "as in the lock" if verification.in_lock else "NOT in the lock, unchecked"
    lines = [
        f"patched wheel:  {escaped(verification.patched_wheel)}",
        f"official wheel: {escaped(verification.official_wheel)}",
        f"                sha256 {verification.official_sha256} ({lock_note})",
        f"{verification.identical} files are the official wheel's, byte for byte",
    ]
    if verification.verified:
        lines += [
            f"{TARGET} is this repository's overlay spliced into the official file",
            "METADATA differs from the official one only in Version; RECORD lists every file",
        ]
    lines += ["", *_diff_lines(verification.utils_diff, full_diff), ""]
    lines += _difference_lines(verification.differences, full_diff)
    lines.append(verdict(verification))
    return "\n".join(lines)
