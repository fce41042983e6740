"""Which code made a thing: the overlay's sha256 and the repository revision it came from.

Shared by the build (the record inside every patched wheel) and the benchmarks (the
``provenance`` of every result file), so that a wheel and a figure name their code the same way.

The revision comes from git where the repository is a git checkout. Where it is not (an sdist,
or a copy of the working tree sent to another machine without ``.git``), it comes from the file
:data:`REVISION_FILE` at the repository's root, which whoever made the copy writes with
:func:`write_revision_file`; without either it is ``"unknown"``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Optional, Union

from patched_wheel.files import write_atomically
from patched_wheel.paths import DEFAULT_OVERLAY, REPOSITORY

__all__ = [
    "REVISION_FILE",
    "UNKNOWN",
    "is_sha256_hex",
    "SourceRevision",
    "overlay_sha256",
    "source_revision",
    "write_revision_file",
]

# Where a copy of the repository without git keeps the revision it was copied from.
REVISION_FILE = ".source-revision.json"

UNKNOWN = "unknown"

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def is_sha256_hex(text: str) -> bool:
    """Whether ``text`` is a sha256 as this repository writes one: 64 lowercase hex digits."""
    return _SHA256_HEX.fullmatch(text) is not None


@dataclass(frozen=True)
class SourceRevision:
    """A commit of this repository, and whether the working tree differed from it.

    ``dirty`` is ``None`` where that cannot be told (no git, and no revision file saying so).
    """

    revision: str
    dirty: Optional[bool]

    def as_dict(self) -> Dict[str, Union[str, Optional[bool]]]:
        return asdict(self)


def overlay_sha256(overlay: Path = DEFAULT_OVERLAY) -> str:
    """The hex sha256 of the overlay's bytes, as they are on disk."""
    return hashlib.sha256(Path(overlay).read_bytes()).hexdigest()


def _git(repository: Path, *args: str) -> Optional[str]:
    try:
        completed = subprocess.run(
            ["git", "-C", str(repository), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout


def _from_git(repository: Path) -> Optional[SourceRevision]:
    if not (repository / ".git").exists():
        return None  # not a checkout's root: git would answer for an enclosing repository
    head = _git(repository, "rev-parse", "--verify", "HEAD")
    status = _git(repository, "status", "--porcelain", "--untracked-files=no")
    if head is None or status is None:
        return None
    return SourceRevision(head.strip(), bool(status.strip()))


def _from_file(repository: Path) -> Optional[SourceRevision]:
    try:
        recorded = json.loads((repository / REVISION_FILE).read_text(encoding="utf-8"))
        revision, dirty = recorded["revision"], recorded["dirty"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(revision, str) or not (dirty is None or isinstance(dirty, bool)):
        return None
    return SourceRevision(revision, dirty)


def source_revision(repository: Path = REPOSITORY) -> SourceRevision:
    """The revision of ``repository``: from git, else from its revision file, else unknown."""
    return _from_git(repository) or _from_file(repository) or SourceRevision(UNKNOWN, None)


def write_revision_file(destination: Path, repository: Path = REPOSITORY) -> SourceRevision:
    """Write ``repository``'s revision (from git) into ``destination``'s revision file.

    For a copy of the tree that travels without ``.git`` (an sdist, another machine).
    """
    revision = source_revision(repository)
    text = json.dumps(revision.as_dict(), indent=1) + "\n"
    write_atomically(Path(destination) / REVISION_FILE, text.encode("utf-8"))
    return revision
