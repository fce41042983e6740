"""Show that a patched wheel is the official wheel plus this repository's overlay, and no more.

A user who installs a patched wheel from someone else's index cannot read a wheel's worth of
files to trust it. :func:`verify_patched_wheel` takes the official wheel the patched one names
(from pip, or given), checks it against the lock of official sha256, and compares the two
wheels file by file:

* every file of the official wheel is in the patched one, byte for byte, under the renamed
  ``.dist-info`` directory;
* ``torch_tensorrt/dynamo/utils.py`` is exactly what this repository's overlay makes of the
  official file (the splice is run again here);
* ``METADATA`` differs only in its ``Version`` header, ``RECORD`` lists every file with its
  sha256, and RECORD's signatures are gone (they cannot survive a new RECORD);
* nothing else is added.

The result lists every other difference (added, missing, changed) and carries the unified diff
of ``utils.py`` from the official wheel to the patched one, which is the whole of the change.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.base import DEFAULT_CACHE_DIR, BaseRequest, download_base
from patched_wheel.build import LOCAL_LABEL, TARGET, patched_version, rewrite_metadata_version
from patched_wheel.lock import check_against_lock
from patched_wheel.overlay import DEFAULT_OVERLAY
from patched_wheel.splice import splice_functions
from patched_wheel.wheelfile import RECORD_SIGNATURES, WheelReader, sha256_of_file

__all__ = [
    "Difference",
    "Verification",
    "compare_members",
    "expected_members",
    "format_report",
    "official_wheel_name",
    "verify_patched_wheel",
]

logger = logging.getLogger(__name__)

# Set to 1 to compare against an official wheel the lock does not know (its sha256 unchecked).
UNLOCKED_VARIABLE = "TORCHTRT_BASE_UNLOCKED"


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


def _name_parts(filename: str) -> Tuple[str, str, str]:
    """(distribution, version, tags) of a wheel file name, as written."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    if len(parts) < 5:
        raise PatchError(f"{filename!r} is not a wheel file name; pass the patched wheel's path")
    return parts[0], parts[1], "-".join(parts[2:])


def official_wheel_name(patched_name: str, label: str = LOCAL_LABEL) -> str:
    """The file name of the official wheel a patched wheel was built from.

    ``torch_tensorrt-2.14.0+memfix1-cp311-...whl`` gives ``torch_tensorrt-2.14.0-cp311-...whl``
    and ``2.9.0+cu130.memfix1`` gives ``2.9.0+cu130``.

    Raises:
        PatchError: If the version does not end in this repository's local label.
    """
    dist, version, tags = _name_parts(patched_name)
    try:
        local = (Version(version).local or "").split(".")
    except InvalidVersion:
        local = []
    if local[-1:] != [label]:
        raise PatchError(
            f"{patched_name}: its version {version!r} does not end in the label +{label}, so "
            "this repository's overlay did not make it (or another revision did: verify it "
            "with the revision whose label it carries)"
        )
    public = Version(version).public
    base_version = public + ("+" + ".".join(local[:-1]) if local[:-1] else "")
    return f"{dist}-{base_version}-{tags}.whl"


def _request_for(official_name: str) -> BaseRequest:
    """What to ask pip for to get the official wheel named ``official_name``."""
    _, version, tags = _name_parts(official_name)
    python, _, platform = tags.split("-")[-3:]
    if not (python.startswith("cp") and python[2:].isdigit() and len(python) >= 4):
        raise PatchError(
            f"{official_name}: cannot tell its Python from the tag {python!r}; give the "
            "official wheel with --base-wheel"
        )
    return BaseRequest(version, platform, f"{python[2]}.{python[3:]}")


def _fetch_official(official_name: str, cache_dir: Path) -> Path:
    found = download_base(_request_for(official_name), cache_dir, missing_ok=True)
    if found is None or found.name != official_name:
        raise PatchError(
            f"PyPI has no official wheel named {official_name}; download it yourself and give "
            "it with --base-wheel PATH"
        )
    return found


def _check_official(official: Path, official_name: str, lock: Mapping[str, str]) -> bool:
    """Check the given official wheel's name and sha256; whether the lock knew it."""
    if not official.is_file():
        raise PatchError(f"--base-wheel {str(official)!r} is not a file; give the official wheel")
    if official.name != official_name:
        raise PatchError(
            f"--base-wheel is {official.name}, but the patched wheel was built from "
            f"{official_name}; give that file"
        )
    if official_name in lock:
        check_against_lock(official, lock)
        return True
    if os.environ.get(UNLOCKED_VARIABLE) == "1":
        logger.warning("%s is not in the lock; its sha256 is not checked", official_name)
        return False
    raise PatchError(
        f"{official_name} is not in the lock of official wheels, so it cannot be shown to be "
        f"the official file; refresh the lock ('python tools/patched_wheel lock'), or set "
        f"{UNLOCKED_VARIABLE}=1 to compare against it unchecked"
    )


def _members(path: Path) -> Tuple[Dict[str, bytes], List[str]]:
    """A zip's members by name, and the names it holds more than once."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            members = {name: archive.read(name) for name in names}
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise PatchError(f"{path.name}: not a readable zip file ({error})") from None
    return members, sorted(name for name, count in Counter(names).items() if count > 1)


def expected_members(
    official: Mapping[str, bytes],
    *,
    official_dist_info: str,
    patched_dist_info: str,
    version: str,
    overlay_source: str,
) -> Dict[str, bytes]:
    """What the patched wheel must hold, RECORD aside: the official files, renamed and patched."""
    expected: Dict[str, bytes] = {}
    signatures = {f"{official_dist_info}/{name}" for name in RECORD_SIGNATURES}
    for name, data in official.items():
        if name in signatures or name == f"{official_dist_info}/RECORD":
            continue
        if name.startswith(official_dist_info + "/"):
            name = patched_dist_info + name[len(official_dist_info) :]
        expected[name] = data
    base_source = official[TARGET].decode("utf-8")
    expected[TARGET] = splice_functions(base_source, overlay_source).encode("utf-8")
    metadata = f"{patched_dist_info}/METADATA"
    expected[metadata] = rewrite_metadata_version(expected[metadata], version)
    return expected


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _changed_detail(path: str, expected: bytes, actual: bytes) -> str:
    if path == TARGET:
        return "not what this repository's overlay makes of the official file"
    if path.endswith(".dist-info/METADATA"):
        lines = difflib.ndiff(
            expected.decode("utf-8", "replace").splitlines(),
            actual.decode("utf-8", "replace").splitlines(),
        )
        changed = [line for line in lines if line[:1] in "+-"]
        return "lines differ from the official METADATA with Version changed: " + "; ".join(
            changed[:6]
        )
    return f"sha256 {_sha256(actual)}, expected {_sha256(expected)}"


def compare_members(
    expected: Mapping[str, bytes], actual: Mapping[str, bytes], *, record_name: str
) -> List[Difference]:
    """Every file where ``actual`` is not ``expected`` (``record_name`` is checked elsewhere)."""
    differences = [
        Difference("missing", name) for name in sorted(set(expected) - set(actual) - {record_name})
    ]
    differences += [
        Difference("added", name) for name in sorted(set(actual) - set(expected) - {record_name})
    ]
    for name in sorted(set(expected) & set(actual)):
        if expected[name] != actual[name]:
            differences.append(
                Difference("changed", name, _changed_detail(name, expected[name], actual[name]))
            )
    return sorted(differences, key=lambda d: (d.path, d.kind))


def _utils_diff(official: Mapping[str, bytes], patched: Mapping[str, bytes]) -> str:
    before = official[TARGET].decode("utf-8").splitlines(keepends=True)
    after = patched.get(TARGET, b"").decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"official/{TARGET}", f"patched/{TARGET}"))


def _record_problem(patched_wheel: Path) -> Optional[str]:
    """What is wrong with the patched wheel's RECORD (every file, with its sha256 and size)."""
    try:
        with WheelReader(patched_wheel):
            return None
    except PatchError as error:
        return str(error)


def verify_patched_wheel(
    patched_wheel: Path,
    *,
    base_wheel: Optional[Path] = None,
    lock: Mapping[str, str],
    overlay: Path = DEFAULT_OVERLAY,
    cache_dir: Path = DEFAULT_CACHE_DIR,
) -> Verification:
    """Compare a patched wheel with its official wheel plus the overlay.

    Args:
        patched_wheel: The wheel to check. It is only read.
        base_wheel: The official wheel; ``None`` downloads it with pip (into ``cache_dir``).
        lock: File name -> sha256 of the official wheels.
        overlay: The overlay whose splice ``utils.py`` must be.

    Raises:
        PatchError: If the patched wheel cannot be read, or the official wheel cannot be had
            or is not the official file. Differences between the wheels are not raised: they
            are in the result.
    """
    patched_wheel = Path(patched_wheel)
    if not patched_wheel.is_file():
        raise PatchError(f"{str(patched_wheel)!r} is not a file; give the patched wheel's path")

    # 1. The official wheel the patched one names, checked against the lock.
    official_name = official_wheel_name(patched_wheel.name)
    official = Path(base_wheel) if base_wheel else _fetch_official(official_name, cache_dir)
    in_lock = _check_official(official, official_name, lock)

    # 2. Both wheels' files; the official one's checked against its own RECORD.
    with WheelReader(official) as reader:
        official_dist_info = reader.dist_info
    official_members, _ = _members(official)
    patched_members, duplicates = _members(patched_wheel)

    # 3. What the patched wheel must hold, and where it does not.
    dist, version, _ = _name_parts(patched_wheel.name)
    patched_dist_info = f"{dist}-{version}.dist-info"
    expected = expected_members(
        official_members,
        official_dist_info=official_dist_info,
        patched_dist_info=patched_dist_info,
        version=patched_version(_name_parts(official_name)[1]),
        overlay_source=Path(overlay).read_text(encoding="utf-8"),
    )
    record_name = f"{patched_dist_info}/RECORD"
    differences = compare_members(expected, patched_members, record_name=record_name)
    differences += [Difference("changed", name, "in the zip twice") for name in duplicates]
    record_problem = _record_problem(patched_wheel)
    if record_problem is not None:
        differences.append(Difference("changed", record_name, record_problem))
    unchanged = {name for name in expected if name not in (TARGET, f"{patched_dist_info}/METADATA")}
    identical = sum(1 for name in unchanged if patched_members.get(name) == expected[name])
    return Verification(
        patched_wheel=patched_wheel.name,
        official_wheel=official_name,
        official_sha256=sha256_of_file(official),
        in_lock=in_lock,
        identical=identical,
        utils_diff=_utils_diff(official_members, patched_members),
        differences=tuple(differences),
    )


def format_report(verification: Verification) -> str:
    """The text the ``verify`` command prints: what was checked, the diff, the differences."""
    lock_note = "as in the lock" if verification.in_lock else "NOT in the lock, unchecked"
    lines = [
        f"patched wheel:  {verification.patched_wheel}",
        f"official wheel: {verification.official_wheel}",
        f"                sha256 {verification.official_sha256} ({lock_note})",
        f"{verification.identical} files are the official wheel's, byte for byte",
    ]
    if verification.verified:
        lines += [
            f"{TARGET} is this repository's overlay spliced into the official file",
            "METADATA differs from the official one only in Version; RECORD lists every file",
        ]
    lines += ["", verification.utils_diff.rstrip("\n"), ""]
    if verification.verified:
        lines.append("verified: the official wheel plus this repository's overlay, nothing else")
    else:
        lines += [difference.describe() for difference in verification.differences]
    return "\n".join(lines)
